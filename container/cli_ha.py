"""``relaymq admin ha-status``: per broker group, the master and each slave's replication.

Rules: the members come from the nameserver's cluster info; each member's container is
asked for its broker status (``BrokerStatus``), whose ``ha`` part the replication driver
fills.  Lag in bytes is the master's max offset minus the slave's acknowledged offset;
lag in messages is the difference of the sums of every consume queue's max offset.  A
container that does not answer is shown as UNREACHABLE, never a traceback.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

from container.cli_admin import _add, _admin_call, _emit, _members, _run, table
from proto import admin_pb2 as apb
from services.admin.client import AdminError


async def _member_status(member: Any, timeout_ms: int) -> dict | None:
    try:
        reply = await _admin_call(member.address, "BrokerStatus",
                                  apb.AdminBrokerStatusRequest(broker_name=member.broker_name), timeout_ms)
    except AdminError:
        return None
    for broker in reply.brokers:
        if broker.broker_id == member.broker_id:
            return json.loads(broker.status_json or "{}").get("ha")
    return None


def _slave_row(member: Any, own: dict | None, master: dict | None) -> dict:
    seen = next((s for s in (master or {}).get("slaves", []) if s["slaveId"] == member.broker_id), None)
    row = {"brokerId": member.broker_id, "address": member.address,
           "state": own["state"] if own else "UNREACHABLE", "lastClose": own.get("lastClose", "") if own else "",
           "maxOffset": own["maxOffset"] if own else None, "confirmOffset": own["confirmOffset"] if own else None,
           "connected": bool(seen and seen["connected"]), "inSyncStateSet": bool(seen and seen["inSyncStateSet"]),
           "learner": bool(seen and seen["learner"]),
           "ackOffset": seen["ackOffset"] if seen else (own.get("ackedOffset") if own else None)}
    if master is not None and row["ackOffset"] is not None:
        row["lagBytes"] = max(0, master["maxOffset"] - row["ackOffset"])
    else:
        row["lagBytes"] = None
    if master is not None and own is not None:
        row["lagMessages"] = max(0, master["queueOffsetTotal"] - own["queueOffsetTotal"])
    else:
        row["lagMessages"] = None
    return row


async def collect(args: Any) -> list[dict]:
    members = [m for m in await _members(args, args.cluster) if not args.broker or m.broker_name == args.broker]
    statuses = await asyncio.gather(*(_member_status(m, args.timeout_ms) for m in members))
    groups: dict[tuple[str, str], dict] = {}
    for member, status in zip(members, statuses):
        group = groups.setdefault((member.cluster, member.broker_name),
                                  {"cluster": member.cluster, "brokerName": member.broker_name, "master": None,
                                   "slaves": [], "_members": []})
        group["_members"].append((member, status))
        if member.broker_id == 0:
            group["master"] = {"brokerId": 0, "address": member.address, **(status or {"state": "UNREACHABLE"})}
            group["master"].pop("slaves", None)
    for group in groups.values():
        replicas = sorted(group.pop("_members"), key=lambda pair: pair[0].broker_id)
        master_status = next((s for m, s in replicas if m.broker_id == 0), None)
        group["slaves"] = [_slave_row(m, s, master_status) for m, s in replicas if m.broker_id != 0]
    return [groups[key] for key in sorted(groups)]


def _render(document: dict) -> str:
    blocks = []
    for group in document["groups"]:
        master = group["master"] or {}
        head = (f"{group['brokerName']} ({group['cluster']}): master {master.get('address', 'none')} "
                f"{master.get('brokerRole', '')} max {master.get('maxOffset', '?')} confirm {master.get('confirmOffset', '?')} "
                f"SyncStateSet {master.get('syncStateSet', '?')}")
        rows = [[s["brokerId"], s["address"], s["state"], "yes" if s["connected"] else "no", s["ackOffset"],
                 s["lagBytes"], s["lagMessages"], "yes" if s["inSyncStateSet"] else ("learner" if s["learner"] else "no")] for s in group["slaves"]]
        blocks.append(head + "\n" + table(["SLAVE", "ADDRESS", "STATE", "CONNECTED", "ACK OFFSET", "LAG BYTES",
                                           "LAG MESSAGES", "IN SET"], rows))
    return "\n\n".join(blocks) or "no broker group registered"


def ha_status(args: Any) -> int:
    return _emit(args, {"groups": _run(collect(args))}, _render)


def register(subparsers: Any, admin_subparsers: Any) -> None:
    p = _add(admin_subparsers, "ha-status", ha_status, "per broker group: master, slaves' acked offsets, lag, connection",
             True)
    p.add_argument("-b", "--broker", help="only this broker name")
