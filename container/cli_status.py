"""``relaymq admin`` queries: topic-list, topic-route, topic-status, consumer-progress,
cluster-list, broker-status.

Rules (container/admin_view.py holds the pure part):
- Members come from the nameserver; every replica is asked at once, each with the call's
  deadline.  A replica that does not answer is marked UNREACHABLE, a group without a
  registered master is marked so, and the query still answers with the rest, exit 0; the
  JSON document says ``"complete": false``.
- topic-status and consumer-progress ask a topic's groups' members as the nameserver
  registered them (their own ids), not as the route shows them: the acting-master rewrite
  moves an acting slave to id 0 there.  A slave acting for its absent master (its answer
  says so) serves its group: its queues and lag are reported, marked as served by it.
- Lag on a group nobody serves (no reachable master, no acting slave) is read from its
  slave and reported as stranded, never as 0.
- A name nobody knows (topic, consumer group, cluster, broker) is one line and exit 1.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

from container import admin_view as view
from container.cli import CliError
from container.cli_admin import (_add, _admin_call, _emit, _members, _nameserver, _run, cluster_option, namesrv_text,
                                table)
from proto import admin_pb2 as apb
from services.admin.client import AdminRejected, AdminUnavailable


async def try_call(address: str, method: str, request: Any, timeout_ms: int) -> Any:
    """The reply, or :class:`admin_view.Failure` when the container does not answer."""
    try:
        return await _admin_call(address, method, request, timeout_ms)
    except AdminUnavailable as exc:
        return view.Failure(str(exc))


async def _route(args: Any):
    client = _nameserver(args)
    try:
        route = await client.query_route(args.topic)
    finally:
        await client.close()
    if route is None:
        raise CliError(f"topic {args.topic} does not exist: no broker serves it (nameserver {namesrv_text(args)})", 1)
    return route


def groups_of_route(route: Any) -> list[view.Group]:
    return [view.Group(b.cluster, b.broker_name, {i: a.address for i, a in b.addresses.items()}) for b in route.brokers]


async def registered_groups_of_route(args: Any, route: Any) -> list[view.Group]:
    """The route's groups with the members the nameserver registered, by their own ids (a
    route shows a slave acting for its absent master as id 0)."""
    registered = {(g.cluster, g.broker_name): g.members for g in await groups_of_cluster(args, None)}
    return [view.Group(b.cluster, b.broker_name, registered.get((b.cluster, b.broker_name), {})) for b in route.brokers]


def acting_ids(replies: dict[int, Any], broker_name: str) -> set[int]:
    """The ids whose answer says they act for their absent master."""
    return {i for i, r in replies.items() if not isinstance(r, view.Failure)
            and any(b.acting and b.broker_id == i and b.broker_name == broker_name for b in r.brokers)}


def acting_ids_of_status(replies: dict[int, Any], broker_name: str) -> set[int]:
    """The ids whose BrokerStatus answer says they act for their absent master (cluster-list)."""
    return {i for i, r in replies.items() if not isinstance(r, view.Failure)
            and any(b.broker_name == broker_name and b.broker_id == i and json.loads(b.status_json or "{}").get("acting")
                    for b in r.brokers)}


async def groups_of_cluster(args: Any, cluster: str | None) -> list[view.Group]:
    members = await _members(args, cluster)
    if cluster and not members:
        raise CliError(f"cluster {cluster} is not registered at nameserver {namesrv_text(args)}", 1)
    groups: dict[tuple[str, str], dict[int, str]] = {}
    for m in members:
        groups.setdefault((m.cluster, m.broker_name), {})[m.broker_id] = m.address
    return [view.Group(c, n, ids) for (c, n), ids in sorted(groups.items())]


async def ask_groups(groups: list[view.Group], ask: Callable[[view.Group, int, str], Any]) -> list[dict[int, Any]]:
    """Every registered replica of every group at once: per group, id -> reply or Failure."""
    calls = [(index, g, i, a) for index, g in enumerate(groups) for i, a in sorted(g.members.items())]
    replies = await asyncio.gather(*(ask(g, i, a) for _, g, i, a in calls))
    answers: list[dict[int, Any]] = [{} for _ in groups]
    for (index, _, broker_id, _), reply in zip(calls, replies):
        answers[index][broker_id] = reply
    return answers


# ---------------------------------------------------------------- topic-list

async def _status_or_failure(address: str, broker_name: str, timeout_ms: int) -> Any:
    """A replica's BrokerStatus (whether it acts for its absent master), or Failure when it does
    not answer or refuses: topic-list then only does not know it acts."""
    try:
        return await try_call(address, "BrokerStatus", apb.AdminBrokerStatusRequest(broker_name=broker_name), timeout_ms)
    except AdminRejected as exc:
        return view.Failure(str(exc))


def topic_list(args: Any) -> int:
    async def collect() -> tuple[list[dict], list[view.GroupState]]:
        groups = [g for g in await groups_of_cluster(args, args.cluster) if not args.broker or g.broker_name == args.broker]
        if args.broker and not groups:
            raise CliError(f"broker {args.broker} is not registered in cluster {args.cluster}", 1)
        answers, statuses = await asyncio.gather(
            ask_groups(groups, lambda g, i, a: try_call(
                a, "ListTopics", apb.AdminListTopicsRequest(broker_name=g.broker_name), args.timeout_ms)),
            ask_groups(groups, lambda g, i, a: _status_or_failure(a, g.broker_name, args.timeout_ms)))
        rows, states = [], []
        for group, replies, status in zip(groups, answers, statuses):
            state = view.replica_states(group, replies, acting_ids_of_status(status, group.broker_name))
            states.append(state)
            answered = sorted(i for i, r in replies.items() if not isinstance(r, view.Failure))
            if not answered:
                continue
            source = 0 if 0 in answered else answered[0]  # the master's table, else a slave's copy
            rows += [{"topic": t.topic, "brokerName": b.broker_name, "messageType": t.message_type,
                      "readQueueNums": t.read_queue_nums, "writeQueueNums": t.write_queue_nums, "perm": t.perm,
                      "source": "master" if source == 0 else f"slave {source}"}
                     for b in replies[source].brokers for t in b.topics]
        return rows, states
    rows, states = _run(collect())
    document = {"topics": rows, "groups": [s.to_json() for s in states], "complete": all(s.servable for s in states)}
    return _emit(args, document, lambda d: "\n".join([table(
        ["TOPIC", "BROKER", "TYPE", "READ", "WRITE", "PERM", "SOURCE"],
        [[r["topic"], r["brokerName"], r["messageType"], r["readQueueNums"], r["writeQueueNums"], r["perm"], r["source"]]
         for r in d["topics"]])] + view.unreachable_lines(states)))


# ---------------------------------------------------------------- topic-route

def route_document(route: Any) -> dict:
    """mqadmin's TopicRouteData shape, plus the client endpoints (TLS ones for the members whose
    container has a TLS port) and message types."""
    brokers = [{"cluster": b.cluster, "brokerName": b.broker_name, "enableActingMaster": b.enable_acting_master,
                "brokerAddrs": {str(i): a.address for i, a in b.addresses.items()},
                "clientEndpoints": {str(i): a.client_endpoint for i, a in b.addresses.items()},
                "tlsClientEndpoints": {str(i): a.tls_client_endpoint for i, a in b.addresses.items() if a.tls_client_endpoint}}
               for b in route.brokers]
    queues = [{"brokerName": b.broker_name, "readQueueNums": b.queue_data.read_queue_nums, "perm": b.queue_data.perm,
               "writeQueueNums": b.queue_data.write_queue_nums, "messageType": b.queue_data.message_type,
               "topicSysFlag": 0} for b in route.brokers]
    return {"topic": route.topic, "brokerDatas": brokers, "queueDatas": queues}


def topic_route(args: Any) -> int:
    document = route_document(_run(_route(args)))
    rows = []
    for broker, queue in zip(document["brokerDatas"], document["queueDatas"]):
        for broker_id, address in broker["brokerAddrs"].items():
            rows.append([broker["cluster"], broker["brokerName"], broker_id, address, broker["clientEndpoints"][broker_id],
                         broker["tlsClientEndpoints"].get(broker_id, "-"),
                         queue["readQueueNums"], queue["writeQueueNums"], queue["perm"], queue["messageType"]])
    masterless = [b["brokerName"] for b in document["brokerDatas"] if "0" not in b["brokerAddrs"]]
    return _emit(args, document, lambda d: table(
        ["CLUSTER", "BROKER", "ID", "ADDRESS", "CLIENT ENDPOINT", "TLS ENDPOINT", "READ", "WRITE", "PERM", "TYPE"], rows)
        + "".join(f"\n{name}: no master registered; its queues cannot be written" for name in masterless))


# ---------------------------------------------------------------- topic-status

async def _topic_status_of(group: view.Group, broker_id: int, address: str, args: Any) -> Any:
    request = apb.AdminTopicStatusRequest(broker_name=group.broker_name, topic=args.topic)
    try:
        return await try_call(address, "TopicStatus", request, args.timeout_ms)
    except AdminRejected as exc:
        if "TOPIC_NOT_FOUND" in exc.details:
            return apb.AdminTopicStatusResponse(topic=args.topic)  # answered: no such topic on this replica
        raise


def topic_status(args: Any) -> int:
    async def collect() -> tuple[list[dict], list[view.GroupState]]:
        groups = await registered_groups_of_route(args, await _route(args))
        answers = await ask_groups(groups, lambda g, i, a: _topic_status_of(g, i, a, args))
        brokers, states = [], []
        for group, replies in zip(groups, answers):
            states.append(view.replica_states(group, replies, acting_ids(replies, group.broker_name)))
            for broker_id, reply in sorted(replies.items()):
                if isinstance(reply, view.Failure):
                    continue
                brokers += [{"brokerName": b.broker_name, "brokerId": b.broker_id, "role": b.role, "acting": b.acting,
                             "address": group.members[broker_id],
                             "queues": [{"queueId": q.queue_id, "minOffset": q.min_offset, "maxOffset": q.max_offset,
                                         "lastUpdateMs": q.last_update_ms} for q in b.queues]}
                            for b in reply.brokers if b.broker_id == broker_id]
        return brokers, states
    brokers, states = _run(collect())
    # complete: every group answered, from every registered replica and its master
    document = {"topic": args.topic, "brokers": brokers, "groups": [s.to_json() for s in states],
                "complete": all(r["state"] == view.OK for s in states for r in s.replicas)}
    return _emit(args, document, lambda d: "\n".join([table(
        ["BROKER", "ID", "QUEUE", "MIN OFFSET", "MAX OFFSET", "LAST UPDATE MS", "SERVED BY"],
        [[b["brokerName"], b["brokerId"], q["queueId"], q["minOffset"], q["maxOffset"], q["lastUpdateMs"],
          _served_by(b)] for b in d["brokers"] for q in b["queues"]])] + view.unreachable_lines(states)))


def _served_by(broker: dict) -> str:
    if broker["acting"]:
        return "acting slave"
    return "master" if broker["brokerId"] == view.MASTER_ID else "-"


# ---------------------------------------------------------------- consumer-progress

def _progress_rows(reply: Any, broker_id: int) -> list[dict]:
    return [{"topic": q.topic, "brokerName": b.broker_name, "brokerId": b.broker_id, "queueId": q.queue_id,
             "brokerOffset": q.broker_offset, "consumerOffset": q.consumer_offset, "inflight": q.inflight, "lag": q.lag}
            for b in reply.brokers if b.broker_id == broker_id for q in b.queues]


def _known(reply: Any, broker_id: int) -> tuple[bool, int]:
    mine = [b for b in reply.brokers if b.broker_id == broker_id]
    return any(b.group_known for b in mine), sum(len(b.queues) for b in mine)


def consumer_progress(args: Any) -> int:
    async def collect() -> dict:
        groups = (await registered_groups_of_route(args, await _route(args)) if args.topic
                  else await groups_of_cluster(args, args.cluster))
        answers = await ask_groups(groups, lambda g, i, a: try_call(a, "ConsumerProgress", apb.AdminConsumerProgressRequest(
            broker_name=g.broker_name, group=args.group, topic=args.topic or ""), args.timeout_ms))
        states = [view.replica_states(g, r, acting_ids(r, g.broker_name)) for g, r in zip(groups, answers)]
        answered = [(g, i, r) for g, replies in zip(groups, answers) for i, r in replies.items()
                    if not isinstance(r, view.Failure)]
        if view.unknown_group([_known(r, i) for _, i, r in answered]):
            where = f"topic {args.topic}" if args.topic else f"cluster {args.cluster or '(all)'}"
            raise CliError(f"consumer group {args.group} does not exist on any broker of {where} that answered", 1)
        rows = {g.broker_name: {i: _progress_rows(r, i) for i, r in replies.items() if not isinstance(r, view.Failure)}
                for g, replies in zip(groups, answers)}
        return view.progress_document(args.group, args.topic, states, rows)
    document = _run(collect())
    return _emit(args, document, lambda d: "\n".join([table(
        ["TOPIC", "BROKER", "QUEUE", "BROKER OFFSET", "CONSUMER OFFSET", "INFLIGHT", "LAG", "SOURCE"],
        [[r["topic"], r["brokerName"], r["queueId"], r["brokerOffset"], r["consumerOffset"], r["inflight"], r["lag"],
          r["source"] + (" (stranded)" if r["stranded"] else "")] for r in d["queues"]])] + view.progress_footer(d)))


# ---------------------------------------------------------------- cluster-list

def cluster_list(args: Any) -> int:
    async def collect() -> tuple[list, dict[str, Any]]:
        members = await _members(args, args.cluster)
        if args.cluster and not members:
            raise CliError(f"cluster {args.cluster} is not registered at nameserver {namesrv_text(args)}", 1)
        addresses = sorted({m.address for m in members})
        replies = await asyncio.gather(*(try_call(a, "BrokerStatus", apb.AdminBrokerStatusRequest(), args.timeout_ms)
                                         for a in addresses))
        return members, dict(zip(addresses, replies))
    members, probes = _run(collect())
    brokers = [{"cluster": m.cluster, "brokerName": m.broker_name, "brokerId": m.broker_id, "address": m.address,
                "clientEndpoint": m.client_endpoint, "tlsClientEndpoint": m.tls_client_endpoint,
                "lastHeartbeatMs": m.last_heartbeat_ms, "heartbeatTimeoutMs": m.heartbeat_timeout_ms,
                "stateVersion": m.data_version.state_version, "topicCount": m.topic_count,
                "enableActingMaster": m.enable_acting_master,
                "state": view.UNREACHABLE if isinstance(probes[m.address], view.Failure) else view.OK} for m in members]
    clusters: dict[str, list[str]] = {}
    for b in brokers:
        if b["brokerName"] not in clusters.setdefault(b["cluster"], []):
            clusters[b["cluster"]].append(b["brokerName"])
    groups = [view.Group(c, n, {b["brokerId"]: b["address"] for b in brokers if (b["cluster"], b["brokerName"]) == (c, n)})
              for c, names in clusters.items() for n in names]
    replies = [{b["brokerId"]: probes[b["address"]] for b in brokers
                if b["brokerName"] == g.broker_name and b["cluster"] == g.cluster} for g in groups]
    states = [view.replica_states(g, r, acting_ids_of_status(r, g.broker_name)) for g, r in zip(groups, replies)]
    document = {"clusters": clusters, "brokers": brokers, "groups": [s.to_json() for s in states],
                "complete": all(r["state"] == view.OK for s in states for r in s.replicas)}
    return _emit(args, document, lambda d: "\n".join([table(
        ["CLUSTER", "BROKER", "ID", "ADDRESS", "CLIENT ENDPOINT", "TLS ENDPOINT", "TOPICS", "STATE VERSION", "STATE"],
        [[b["cluster"], b["brokerName"], b["brokerId"], b["address"], b["clientEndpoint"], b["tlsClientEndpoint"] or "-",
          b["topicCount"], b["stateVersion"], b["state"]] for b in d["brokers"]])] + view.unreachable_lines(states)))


# ---------------------------------------------------------------- broker-status

def broker_status(args: Any) -> int:
    async def collect() -> dict:
        address = args.container
        if not address:
            if not args.broker:
                raise CliError("broker-status needs --broker NAME (resolved through the nameserver) or --container HOST:PORT", 2)
            found = [m for m in await _members(args) if m.broker_name == args.broker and m.broker_id == args.broker_id]
            if not found:
                raise CliError(f"broker {args.broker} id {args.broker_id} is not registered at nameserver {namesrv_text(args)}", 1)
            address = found[0].address
        reply = await _admin_call(address, "BrokerStatus", apb.AdminBrokerStatusRequest(broker_name=args.broker or ""),
                                  args.timeout_ms)
        return {"container": json.loads(reply.container_json or "{}"), "address": address,
                "brokers": [{"brokerName": b.broker_name, "brokerId": b.broker_id, "cluster": b.cluster, "role": b.role,
                             "status": json.loads(b.status_json or "{}")} for b in reply.brokers]}
    document = _run(collect())
    return _emit(args, document, lambda d: "\n\n".join(
        f"{b['brokerName']} (id {b['brokerId']}, {b['role']}, cluster {b['cluster']}) at {d['address']}\n"
        + table(["KEY", "VALUE"], [[k, json.dumps(v) if isinstance(v, (dict, list)) else v] for k, v in sorted(b["status"].items())])
        for b in d["brokers"]))


# ---------------------------------------------------------------- registration

def register(subparsers: Any, admin_subparsers: Any) -> None:
    from container.cli_admin import broker_id_option, broker_option, host_port, name_option

    p = _add(admin_subparsers, "topic-list", topic_list, "topics of every broker group (mqadmin topicList)",
             aliases=("list-topic",), hidden_aliases=("topicList",))
    cluster_option(p)
    broker_option(p, help_text="only this broker group")
    p = _add(admin_subparsers, "topic-route", topic_route, "a topic's route (mqadmin topicRoute)", hidden_aliases=("topicRoute",))
    name_option(p, "-t", "--topic", required=True)
    p = _add(admin_subparsers, "topic-status", topic_status, "min and max offset per replica and queue (mqadmin topicStatus)",
             hidden_aliases=("topicStatus",))
    name_option(p, "-t", "--topic", required=True)
    p = _add(admin_subparsers, "consumer-progress", consumer_progress,
             "per queue: broker offset, consumer offset, lag (mqadmin consumerProgress)", hidden_aliases=("consumerProgress",))
    name_option(p, "-g", "--group", required=True)
    name_option(p, "-t", "--topic")
    cluster_option(p, default=None, help_text="only this cluster (when no --topic)")
    p = _add(admin_subparsers, "cluster-list", cluster_list, "brokers registered at the nameserver, and which answer "
             "(mqadmin clusterList)", hidden_aliases=("clusterList",))
    cluster_option(p, default=None, help_text="only this cluster")
    p = _add(admin_subparsers, "broker-status", broker_status, "a broker's runtime status (mqadmin brokerStatus)",
             hidden_aliases=("brokerStatus",))
    broker_option(p)
    broker_id_option(p)
    p.add_argument("--container", type=host_port, metavar="HOST:PORT", help="the container's internal address (skips the nameserver)")
