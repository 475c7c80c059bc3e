"""``relaymq admin``: mqadmin's everyday operations.

- ``reset-offset-by-time`` (resetOffsetByTime) and ``skip-accumulated-message``
  (skipAccumulatedMessage): a group's offsets of a topic, on the master of every broker group
  serving it.  A group whose master cannot be reached is named and the exit code is 1.
- ``query-msg-by-id`` (queryMsgById; the client protocol's message id) and
  ``query-msg-by-key`` (queryMsgByKey): a bounded scan of the topic, newest first, on each
  group's master (or, without one, a slave); "not found" says how much was read.
- ``consumer-connection`` / ``producer-connection``: the clients of every container of the
  cluster (a client connects to each container hosting a broker it uses), merged by id.
- ``get-broker-config`` / ``update-broker-config``: one broker's keys; only live keys change
  at runtime (until a restart), others are refused naming the file to edit.
Every argument is checked before anything is sent; ``--json`` prints one document.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
from typing import Any

from container import admin_view as view
from container.cli import CliError
from container.cli_admin import (_add, _admin_call, _emit, _run, broker_id_option, broker_option, cluster_option, host_port,
                                 in_range, name_option, namesrv_text, table)
from container.cli_status import _route, ask_groups, groups_of_cluster, groups_of_route, try_call
from proto import admin_pb2 as apb

MQADMIN_TIME = "%Y-%m-%d#%H:%M:%S:%f"


def timestamp_ms(text: str, now_ms: int | None = None) -> int:
    """Milliseconds since the epoch, ISO-8601 (local time unless it names a zone), mqadmin's
    ``yyyy-MM-dd#HH:mm:ss:SSS``, or ``now``."""
    value = text.strip()
    if value == "now":
        return now_ms if now_ms is not None else int(datetime.datetime.now().timestamp() * 1000)
    if value.isdigit():
        return int(value)
    for parse in (datetime.datetime.fromisoformat, lambda t: datetime.datetime.strptime(t, MQADMIN_TIME)):
        try:
            return int(parse(value).timestamp() * 1000)
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(f"{text!r} is not a time: give epoch milliseconds, ISO-8601 (2024-05-01T12:00:00), "
                                      f"mqadmin's 2024-05-01#12:00:00:000, or now")


def _one_line(text: str) -> str:
    if not text or len(text) > 1024 or any(ord(c) < 32 for c in text) or " " in text:
        raise argparse.ArgumentTypeError("must be 1 to 1024 characters, without spaces or control characters")
    return text


# ---------------------------------------------------------------- offsets

def _reset(args: Any, timestamp: int | None) -> int:
    async def collect() -> list[dict]:
        groups = groups_of_route(await _route(args))

        async def one(group: view.Group) -> dict:
            if 0 not in group.members:
                return {"brokerName": group.broker_name, "error": "no master registered"}
            request = apb.AdminResetOffsetRequest(broker_name=group.broker_name, group=args.group, topic=args.topic)
            if timestamp is None:
                request.to_max_offset = True
            else:
                request.timestamp_ms = timestamp
            reply = await try_call(group.members[0], "ResetOffset", request, args.timeout_ms)
            if isinstance(reply, view.Failure):
                return {"brokerName": group.broker_name, "error": reply.detail}
            return {"brokerName": reply.broker_name, "queues": [
                {"queueId": q.queue_id, "oldOffset": q.old_offset, "newOffset": q.new_offset} for q in reply.queues]}
        return list(await asyncio.gather(*(one(g) for g in groups)))
    brokers = _run(collect())
    failed = [b for b in brokers if "error" in b]
    document = {"group": args.group, "topic": args.topic, "timestampMs": timestamp, "brokers": brokers}
    rows = [[b["brokerName"], q["queueId"], q["oldOffset"], q["newOffset"]] for b in brokers for q in b.get("queues", [])]
    return _emit(args, document, lambda d: table(["BROKER", "QUEUE", "OLD OFFSET", "NEW OFFSET"], rows) + "".join(
        f"\nNOT reset on {b['brokerName']}: {b['error']}" for b in failed), 1 if failed else 0)


def reset_offset_by_time(args: Any) -> int:
    return _reset(args, args.timestamp)


def skip_accumulated(args: Any) -> int:
    return _reset(args, None)


# ---------------------------------------------------------------- messages

def _message_json(m: Any, show_body: bool) -> dict:
    document = {"brokerName": m.broker_name, "brokerId": m.broker_id, "topic": m.topic, "queueId": m.queue_id,
                "queueOffset": m.queue_offset, "commitOffset": m.commit_offset, "messageId": m.message_id, "tag": m.tag,
                "keys": m.keys, "bornTimestampMs": m.born_timestamp_ms, "storeTimestampMs": m.store_timestamp_ms,
                "bornHost": m.born_host, "bodySize": m.body_size, "properties": dict(m.properties),
                "userProperties": dict(m.user_properties)}
    if show_body:
        document["body"] = m.body.decode("utf-8", "replace")
    return document


def _query(args: Any, **match: str) -> int:
    async def collect() -> tuple[list[dict], int, bool, list[str]]:
        groups = groups_of_route(await _route(args))
        answers = await ask_groups(groups, lambda g, i, a: try_call(a, "QueryMessage", apb.AdminQueryMessageRequest(
            broker_name=g.broker_name, topic=args.topic, max_scan=args.max_scan, max_results=args.max_results,
            max_body_bytes=args.body_bytes, **match), args.timeout_ms))
        found, scanned, truncated, missing = [], 0, False, []
        for group, replies in zip(groups, answers):
            answered = sorted(i for i, r in replies.items() if not isinstance(r, view.Failure))
            if not answered:
                missing.append(group.broker_name)
                continue
            reply = replies[0 if 0 in answered else answered[0]]
            found += [_message_json(m, args.body_bytes > 0) for m in reply.messages]
            scanned, truncated = scanned + reply.scanned, truncated or reply.truncated
        return found, scanned, truncated, missing
    found, scanned, truncated, missing = _run(collect())
    document = {"topic": args.topic, **match, "messages": found, "scanned": scanned, "truncated": truncated,
                "unreachable": missing}

    def render(d: dict) -> str:
        lines = [table(["BROKER", "QUEUE", "OFFSET", "MESSAGE ID", "TAG", "KEYS", "STORE TIME MS", "BODY BYTES"],
                       [[m["brokerName"], m["queueId"], m["queueOffset"], m["messageId"], m["tag"] or "-", m["keys"] or "-",
                         m["storeTimestampMs"], m["bodySize"]] for m in d["messages"]])] if d["messages"] else ["no message found"]
        lines.append(f"scanned {d['scanned']} messages" + (" (stopped at --max-scan: older ones were not read)" if d["truncated"]
                                                          else " (the whole topic)"))
        lines += [f"{name}: no replica answered; not searched" for name in d["unreachable"]]
        return "\n".join(lines)
    return _emit(args, document, render, 0 if found or not missing else 1)


def query_by_id(args: Any) -> int:
    return _query(args, message_id=args.message_id)


def query_by_key(args: Any) -> int:
    return _query(args, key=args.key)


# ---------------------------------------------------------------- clients

def _connections(args: Any, client_type: str, group: str, topic: str) -> int:
    async def collect() -> tuple[dict[str, dict], list[str]]:
        addresses = sorted({a for g in await groups_of_cluster(args, args.cluster) for a in g.members.values()})
        request = apb.AdminClientConnectionsRequest(group=group, topic=topic, client_type=client_type)
        replies = await asyncio.gather(*(try_call(a, "ClientConnections", request, args.timeout_ms) for a in addresses))
        clients: dict[str, dict] = {}
        for address, reply in zip(addresses, replies):
            for c in [] if isinstance(reply, view.Failure) else reply.clients:
                entry = clients.setdefault(c.client_id, {"clientId": c.client_id, "clientType": c.client_type, "group": c.group,
                                                         "topics": set(), "containers": [], "idleMs": c.idle_ms})
                entry["topics"].update(c.topics)
                entry["containers"].append(address)
                entry["idleMs"] = min(entry["idleMs"], c.idle_ms)
        return clients, [a for a, r in zip(addresses, replies) if isinstance(r, view.Failure)]
    clients, unreachable = _run(collect())
    rows = [dict(c, topics=sorted(c["topics"])) for _, c in sorted(clients.items())]
    document = {"group": group, "topic": topic, "clients": rows, "unreachable": unreachable}
    return _emit(args, document, lambda d: "\n".join(
        [table(["CLIENT ID", "TYPE", "GROUP", "TOPICS", "CONTAINERS", "IDLE MS"],
               [[c["clientId"], c["clientType"] or "-", c["group"] or "-", ",".join(c["topics"]) or "-",
                 ",".join(c["containers"]), c["idleMs"]] for c in d["clients"]]) if d["clients"] else "no client connected"]
        + [f"container {a}: unreachable; its clients are not listed" for a in d["unreachable"]]))


def consumer_connection(args: Any) -> int:
    return _connections(args, "", args.group, args.topic or "")


def producer_connection(args: Any) -> int:
    return _connections(args, "PRODUCER", args.group or "", args.topic)


# ---------------------------------------------------------------- broker config

async def _broker_address(args: Any) -> str:
    if args.container:
        return args.container
    groups = [g for g in await groups_of_cluster(args, None) if g.broker_name == args.broker]
    address = next((g.members.get(args.broker_id) for g in groups if args.broker_id in g.members), None)
    if address is None:
        raise CliError(f"broker {args.broker} id {args.broker_id} is not registered at nameserver {namesrv_text(args)}", 1)
    return address


def _entries(reply: Any) -> list[dict]:
    return [{"key": e.key, "value": e.value, "unit": e.unit, "live": e.live} for e in reply.entries]


def get_broker_config(args: Any) -> int:
    async def collect() -> Any:
        request = apb.AdminGetBrokerConfigRequest(broker_name=args.broker, broker_id=args.broker_id)
        return await _admin_call(await _broker_address(args), "GetBrokerConfig", request, args.timeout_ms)
    reply = _run(collect())
    document = {"brokerName": reply.broker_name, "brokerId": reply.broker_id, "source": reply.source, "config": _entries(reply)}
    return _emit(args, document, lambda d: f"{d['brokerName']} id {d['brokerId']} (from {d['source']}; live: changeable "
                 f"with update-broker-config)\n" + table(["KEY", "VALUE", "UNIT", "LIVE"], [
                     [e["key"], e["value"], e["unit"] or "-", "live" if e["live"] else "-"] for e in d["config"]]))


def update_broker_config(args: Any) -> int:
    async def collect() -> Any:
        request = apb.AdminUpdateBrokerConfigRequest(broker_name=args.broker, broker_id=args.broker_id,
                                                     values={args.key: args.value})
        return await _admin_call(await _broker_address(args), "UpdateBrokerConfig", request, args.timeout_ms)
    try:
        reply = _run(collect())
    except CliError as exc:
        raise CliError(str(exc).replace("admin refused: ", ""), exc.code) from None
    document = {"brokerName": reply.broker_name, "brokerId": reply.broker_id, "changed": _entries(reply)}
    return _emit(args, document, lambda d: "\n".join(
        f"{d['brokerName']} id {d['brokerId']}: {e['key']} = {e['value']} (live until the broker restarts)"
        for e in d["changed"]))


# ---------------------------------------------------------------- registration

def _group_topic(parser: Any, group_required: bool = True, topic_required: bool = True) -> None:
    name_option(parser, "-g", "--group", required=group_required, help_text="consumer group")
    name_option(parser, "-t", "--topic", required=topic_required)


def _register_offsets_and_messages(a: Any) -> None:
    p = _add(a, "reset-offset-by-time", reset_offset_by_time, "move a group's offsets of a topic to a time, forward or back "
             "(mqadmin resetOffsetByTime)", hidden_aliases=("resetOffsetByTime",))
    _group_topic(p)
    p.add_argument("-s", "--timestamp", type=timestamp_ms, required=True,
                   help="epoch ms, ISO-8601 (local time unless it has a zone), yyyy-MM-dd#HH:mm:ss:SSS, or now")
    p = _add(a, "skip-accumulated-message", skip_accumulated, "move a group's offsets of a topic to the end, skipping "
             "everything accumulated (mqadmin skipAccumulatedMessage)", hidden_aliases=("skipAccumulatedMessage",))
    _group_topic(p)
    for name, handler, flag, dest, camel in (("query-msg-by-id", query_by_id, ("-i", "--message-id"), "message_id", "queryMsgById"),
                                             ("query-msg-by-key", query_by_key, ("-k", "--key"), "key", "queryMsgByKey")):
        p = _add(a, name, handler, f"look a message up by its {dest.replace('_', ' ')} (mqadmin {camel}; a bounded scan, "
                 f"newest first)", hidden_aliases=(camel,))
        name_option(p, "-t", "--topic", required=True)
        p.add_argument(*flag, dest=dest, type=_one_line, required=True)
        p.add_argument("--max-scan", type=in_range(1, 1_000_000), default=100_000,
                       help="messages read per broker group at most (default 100000)")
        p.add_argument("--max-results", type=in_range(1, 1000), default=32, help="matches per broker group (default 32)")
        p.add_argument("--body-bytes", type=in_range(0, 65536), default=0, help="show up to this many body bytes (default 0)")


def register(subparsers: Any, admin_subparsers: Any) -> None:
    a = admin_subparsers
    _register_offsets_and_messages(a)
    p = _add(a, "consumer-connection", consumer_connection, "clients of a consumer group, on every container "
             "(mqadmin consumerConnection)", hidden_aliases=("consumerConnection",))
    cluster_option(p, default=None, help_text="only this cluster's containers")
    _group_topic(p, topic_required=False)
    p = _add(a, "producer-connection", producer_connection, "producers publishing to a topic, on every container "
             "(mqadmin producerConnection)", hidden_aliases=("producerConnection",))
    cluster_option(p, default=None, help_text="only this cluster's containers")
    name_option(p, "-t", "--topic", required=True)
    name_option(p, "-g", "--group", help_text="(producers of the RocketMQ 5 protocol have no group; accepted for mqadmin)")
    for name, handler, camel in (("get-broker-config", get_broker_config, "getBrokerConfig"),
                                 ("update-broker-config", update_broker_config, "updateBrokerConfig")):
        p = _add(a, name, handler, f"{name.split('-')[0]} a broker's configuration (mqadmin {camel})", hidden_aliases=(camel,))
        broker_option(p, required=True)
        broker_id_option(p)
        p.add_argument("--container", type=host_port, metavar="HOST:PORT", help="the container's internal address (skips the nameserver)")
        if name.startswith("update"):
            p.add_argument("-k", "--key", required=True, type=_config_key, help="a live key (get-broker-config marks them)")
            p.add_argument("-v", "--value", required=True, type=_config_value)


def _config_key(text: str) -> str:
    if not text.isidentifier() or len(text) > 128:
        raise argparse.ArgumentTypeError(f"{text!r} is not a configuration key (RocketMQ's camelCase names)")
    return text


def _config_value(text: str) -> str:
    if len(text) > 4096 or any(ord(c) < 32 for c in text):
        raise argparse.ArgumentTypeError("must be at most 4096 characters without control characters")
    return text
