"""``relaymq admin broker-member-group``: a broker group's live members, as the nameserver keeps
them for acting master (mqadmin's view of ``GET_BROKER_MEMBER_GROUP``; reference 2.2).

Rules: the members come from the nameserver's member set ``rmq_sys_SYNC_BROKER_MEMBER_<name>``
(registered, unexpired brokers, by id, with their container's internal address); the JSON is
upstream's ``BrokerMemberGroup`` (``cluster``, ``brokerName``, ``brokerAddrs``) plus the
member set's name, the smallest id and whether the group has acting master enabled.  A group
the nameserver does not know exits 1.
"""
from __future__ import annotations

from typing import Any

from container.cli import CliError
from container.cli_admin import _add, _emit, _nameserver, _run, broker_option, cluster_option, namesrv_text, table
from metadata.member_group import member_set_name


async def collect(args: Any) -> dict:
    client = _nameserver(args)
    try:
        group = await client.broker_member_group(args.broker, args.cluster or "")
    finally:
        await client.close()
    if not group.members:
        raise CliError(f"broker {args.broker} is not registered at nameserver {namesrv_text(args)}", 1)
    return {"cluster": group.cluster, "brokerName": group.broker_name, "memberSet": member_set_name(group.broker_name),
            "brokerAddrs": {str(i): a for i, a in group.members.items()}, "minBrokerId": group.min_broker_id}


def _render(document: dict) -> str:
    rows = [[broker_id, address] for broker_id, address in document["brokerAddrs"].items()]
    head = f"{document['brokerName']} ({document['cluster']}), member set {document['memberSet']}:"
    return head + "\n" + table(["BROKER ID", "ADDRESS"], rows)


def broker_member_group(args: Any) -> int:
    return _emit(args, _run(collect(args)), _render)


def register(subparsers: Any, admin_subparsers: Any) -> None:
    p = _add(admin_subparsers, "broker-member-group", broker_member_group,
             "a broker group's live members by id (acting master's member set)", hidden_aliases=("getBrokerMemberGroup",))
    cluster_option(p, default=None, help_text="cluster name (default: the one the broker is registered in)")
    broker_option(p, required=True, help_text="the broker group")
