"""``relaymq admin ...`` and ``relaymq namesrv -c FILE``.

Rules:
- Flags are kebab-case and named after mqadmin's options (``-n/--namesrv``, ``-c/--cluster``,
  ``-t/--topic``, ``-g/--group``, ``-b/--broker``); the nameserver defaults to 127.0.0.1:9876
  and the cluster to DefaultCluster.
- Changes to topics and groups resolve the cluster's masters (id 0) through the nameserver
  and call each hosting container's admin endpoint with the broker's name.
- Output is an aligned table for people, or one JSON document with ``--json``.
- An unreachable nameserver or container, or a refusal, is one line on stderr and exit 1;
  bad arguments exit 2 (argparse).  Never a traceback.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
from typing import Any, Callable

from container.cli import CliError
from proto import admin_pb2 as apb
from services.admin.client import AdminClient, AdminError, AdminUnavailable
from services.nameserver.client import ClusterMember, NameserverClient, NameserverError, NameserverUnavailable

DEFAULT_NAMESRV = "127.0.0.1:9876"
DEFAULT_CLUSTER = "DefaultCluster"
TOPIC_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")


# ---------------------------------------------------------------- plumbing

def _run(coroutine: Any) -> Any:
    try:
        return asyncio.run(coroutine)
    except NameserverUnavailable as exc:
        raise CliError(f"cannot reach {exc}", 1) from None
    except NameserverError as exc:
        raise CliError(f"nameserver refused: {exc}", 1) from None
    except AdminUnavailable as exc:
        raise CliError(str(exc), 1) from None
    except AdminError as exc:
        raise CliError(f"admin refused: {exc}", 1) from None


def _nameserver(args: Any) -> NameserverClient:
    addresses = [a.strip() for a in args.namesrv.replace(",", ";").split(";") if a.strip()]
    if not addresses:
        raise CliError("--namesrv: no address given", 2)
    return NameserverClient(addresses, timeout_ms=args.timeout_ms)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def _emit(args: Any, document: Any, render: Callable[[Any], str]) -> int:
    print(json.dumps(document, indent=2, sort_keys=True) if args.json else render(document))
    return 0


async def _members(args: Any, cluster: str | None = None) -> list[ClusterMember]:
    client = _nameserver(args)
    try:
        members = list(await client.cluster_info())
    finally:
        await client.close()
    return [m for m in members if cluster is None or m.cluster == cluster]


async def _masters(args: Any) -> list[ClusterMember]:
    members = await _members(args, args.cluster)
    masters = [m for m in members if m.broker_id == 0 and (not args.broker or m.broker_name == args.broker)]
    if not masters:
        which = f"broker {args.broker} in cluster {args.cluster}" if args.broker else f"cluster {args.cluster}"
        raise CliError(f"{which} has no master registered at nameserver {args.namesrv}", 1)
    return masters


async def _admin_call(address: str, method: str, request: Any, timeout_ms: int) -> Any:
    client = AdminClient(address, timeout_ms)
    try:
        return await client.call(method, request)
    finally:
        await client.close()


async def _on_masters(args: Any, method: str, make_request: Callable[[str], Any]) -> list[str]:
    done = []
    for master in await _masters(args):
        reply = await _admin_call(master.address, method, make_request(master.broker_name), args.timeout_ms)
        done += list(reply.broker_names)
    return done


# ---------------------------------------------------------------- topics and groups

def update_topic(args: Any) -> int:
    topic = apb.AdminTopic(topic=args.topic, read_queue_nums=args.queues, write_queue_nums=args.queues,
                           perm=args.perm, message_type=args.type)
    done = _run(_on_masters(args, "CreateOrUpdateTopic",
                            lambda name: apb.AdminCreateOrUpdateTopicRequest(broker_name=name, topic=topic)))
    document = {"topic": args.topic, "type": args.type, "queues": args.queues, "perm": args.perm, "brokers": done}
    return _emit(args, document, lambda d: f"topic {d['topic']} ({d['type']}, {d['queues']} queues) updated on {', '.join(d['brokers'])}")


def delete_topic(args: Any) -> int:
    done = _run(_on_masters(args, "DeleteTopic", lambda name: apb.AdminDeleteTopicRequest(broker_name=name, topic=args.topic)))
    return _emit(args, {"topic": args.topic, "brokers": done},
                 lambda d: f"topic {d['topic']} deleted from {', '.join(d['brokers']) or 'no broker (it did not exist)'}")


def list_topic(args: Any) -> int:
    async def collect() -> list[dict]:
        rows = []
        for master in await _masters(args):
            reply = await _admin_call(master.address, "ListTopics", apb.AdminListTopicsRequest(broker_name=master.broker_name),
                                      args.timeout_ms)
            rows += [{"topic": t.topic, "brokerName": b.broker_name, "messageType": t.message_type,
                      "readQueueNums": t.read_queue_nums, "writeQueueNums": t.write_queue_nums, "perm": t.perm}
                     for b in reply.brokers for t in b.topics]
        return rows
    rows = _run(collect())
    return _emit(args, {"topics": rows}, lambda d: table(
        ["TOPIC", "BROKER", "TYPE", "READ", "WRITE", "PERM"],
        [[r["topic"], r["brokerName"], r["messageType"], r["readQueueNums"], r["writeQueueNums"], r["perm"]] for r in d["topics"]]))


def update_group(args: Any) -> int:
    if args.max_attempts is not None and not 1 <= args.max_attempts <= 65:
        raise CliError(f"--max-attempts: {args.max_attempts} must be between 1 and 65", 2)
    group = apb.AdminGroup(group=args.group, consume_message_orderly=args.fifo)
    if args.max_attempts is not None:
        group.retry_max_times = args.max_attempts - 1
    done = _run(_on_masters(args, "CreateOrUpdateGroup",
                            lambda name: apb.AdminCreateOrUpdateGroupRequest(broker_name=name, group=group)))
    document = {"group": args.group, "fifo": args.fifo, "maxAttempts": args.max_attempts, "brokers": done}
    return _emit(args, document, lambda d: f"group {d['group']} updated on {', '.join(d['brokers'])}")


def delete_group(args: Any) -> int:
    done = _run(_on_masters(args, "DeleteGroup", lambda name: apb.AdminDeleteGroupRequest(broker_name=name, group=args.group)))
    return _emit(args, {"group": args.group, "brokers": done},
                 lambda d: f"group {d['group']} deleted from {', '.join(d['brokers']) or 'no broker (it did not exist)'}")


# ---------------------------------------------------------------- routes and status

async def _route(args: Any):
    client = _nameserver(args)
    try:
        route = await client.query_route(args.topic)
    finally:
        await client.close()
    if route is None:
        raise CliError(f"topic {args.topic} has no route at nameserver {args.namesrv}", 1)
    return route


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
    return _emit(args, document, lambda d: table(
        ["CLUSTER", "BROKER", "ID", "ADDRESS", "CLIENT ENDPOINT", "TLS ENDPOINT", "READ", "WRITE", "PERM", "TYPE"], rows))


def topic_status(args: Any) -> int:
    async def collect() -> list[dict]:
        brokers = []
        for group in (await _route(args)).brokers:
            for broker_id, member in sorted(group.addresses.items()):  # the master and its slaves
                reply = await _admin_call(member.address, "TopicStatus",
                                          apb.AdminTopicStatusRequest(broker_name=group.broker_name, topic=args.topic),
                                          args.timeout_ms)
                brokers += [{"brokerName": b.broker_name, "brokerId": b.broker_id, "role": b.role, "address": member.address,
                             "queues": [{"queueId": q.queue_id, "minOffset": q.min_offset, "maxOffset": q.max_offset,
                                         "lastUpdateMs": q.last_update_ms} for q in b.queues]}
                            for b in reply.brokers if b.broker_id == broker_id]
        return brokers
    document = {"topic": args.topic, "brokers": _run(collect())}
    return _emit(args, document, lambda d: table(
        ["BROKER", "ID", "QUEUE", "MIN OFFSET", "MAX OFFSET", "LAST UPDATE MS"],
        [[b["brokerName"], b["brokerId"], q["queueId"], q["minOffset"], q["maxOffset"], q["lastUpdateMs"]]
         for b in d["brokers"] for q in b["queues"]]))


def consumer_progress(args: Any) -> int:
    async def targets() -> list[tuple[str, str]]:
        if args.topic:
            return [(g.broker_name, g.addresses[0].address) for g in (await _route(args)).brokers if 0 in g.addresses]
        return [(m.broker_name, m.address) for m in await _members(args, args.cluster) if m.broker_id == 0]

    async def collect() -> list[dict]:
        rows = []
        for broker_name, address in await targets():
            request = apb.AdminConsumerProgressRequest(broker_name=broker_name, group=args.group, topic=args.topic or "")
            reply = await _admin_call(address, "ConsumerProgress", request, args.timeout_ms)
            rows += [{"topic": q.topic, "brokerName": b.broker_name, "queueId": q.queue_id, "brokerOffset": q.broker_offset,
                      "consumerOffset": q.consumer_offset, "inflight": q.inflight, "lag": q.lag}
                     for b in reply.brokers for q in b.queues]
        return rows
    rows = _run(collect())
    document = {"group": args.group, "topic": args.topic, "queues": rows, "totalLag": sum(r["lag"] for r in rows)}
    return _emit(args, document, lambda d: table(
        ["TOPIC", "BROKER", "QUEUE", "BROKER OFFSET", "CONSUMER OFFSET", "INFLIGHT", "LAG"],
        [[r["topic"], r["brokerName"], r["queueId"], r["brokerOffset"], r["consumerOffset"], r["inflight"], r["lag"]]
         for r in d["queues"]]) + f"\ntotal lag: {d['totalLag']}")


def cluster_list(args: Any) -> int:
    members = _run(_members(args, args.cluster))
    brokers = [{"cluster": m.cluster, "brokerName": m.broker_name, "brokerId": m.broker_id, "address": m.address,
                "clientEndpoint": m.client_endpoint, "tlsClientEndpoint": m.tls_client_endpoint,
                "lastHeartbeatMs": m.last_heartbeat_ms,
                "heartbeatTimeoutMs": m.heartbeat_timeout_ms, "stateVersion": m.data_version.state_version,
                "topicCount": m.topic_count, "enableActingMaster": m.enable_acting_master} for m in members]
    clusters: dict[str, list[str]] = {}
    for b in brokers:
        names = clusters.setdefault(b["cluster"], [])
        if b["brokerName"] not in names:
            names.append(b["brokerName"])
    return _emit(args, {"clusters": clusters, "brokers": brokers}, lambda d: table(
        ["CLUSTER", "BROKER", "ID", "ADDRESS", "CLIENT ENDPOINT", "TLS ENDPOINT", "TOPICS", "STATE VERSION"],
        [[b["cluster"], b["brokerName"], b["brokerId"], b["address"], b["clientEndpoint"], b["tlsClientEndpoint"] or "-",
          b["topicCount"], b["stateVersion"]] for b in d["brokers"]]))


def broker_status(args: Any) -> int:
    async def collect() -> dict:
        address = args.container
        if not address:
            if not args.broker:
                raise CliError("broker-status needs --broker NAME (resolved through the nameserver) or --container HOST:PORT", 2)
            found = [m for m in await _members(args) if m.broker_name == args.broker and m.broker_id == args.broker_id]
            if not found:
                raise CliError(f"broker {args.broker} id {args.broker_id} is not registered at nameserver {args.namesrv}", 1)
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


# ---------------------------------------------------------------- brokers in a container

def add_broker(args: Any) -> int:
    reply = _run(_admin_call(args.container, "AddBroker", apb.AdminAddBrokerRequest(config_path=args.config_path), args.timeout_ms))
    return _emit(args, {"container": args.container, "canonicalName": reply.canonical_name},
                 lambda d: f"added broker {d['canonicalName']} to container {d['container']}")


def remove_broker(args: Any) -> int:
    request = apb.AdminRemoveBrokerRequest(cluster=args.cluster, broker_name=args.broker, broker_id=args.broker_id)
    _run(_admin_call(args.container, "RemoveBroker", request, args.timeout_ms))
    return _emit(args, {"container": args.container, "cluster": args.cluster, "brokerName": args.broker, "brokerId": args.broker_id},
                 lambda d: f"removed broker {d['cluster']}:{d['brokerName']}:{d['brokerId']} from container {d['container']}")


# ---------------------------------------------------------------- registration

def _common(parser: Any, cluster: bool = False) -> None:
    parser.add_argument("-n", "--namesrv", default=DEFAULT_NAMESRV, metavar="HOST:PORT",
                        help=f"nameserver address(es), ';'-separated (default {DEFAULT_NAMESRV})")
    if cluster:
        parser.add_argument("-c", "--cluster", default=DEFAULT_CLUSTER, help=f"cluster name (default {DEFAULT_CLUSTER})")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--timeout-ms", type=int, default=10_000, help="per-call deadline in ms (default 10000)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must not be negative")
    return value


def _add(admin: Any, name: str, handler: Callable[[Any], int], help_text: str, cluster: bool = False) -> Any:
    parser = admin.add_parser(name, help=help_text)
    _common(parser, cluster)
    parser.set_defaults(handler=handler)
    return parser


def register(subparsers: Any, admin_subparsers: Any) -> None:
    p = _add(admin_subparsers, "update-topic", update_topic, "create or update a topic on the cluster's masters", True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("--type", default="NORMAL", choices=TOPIC_TYPES, help="message type (default NORMAL)")
    p.add_argument("--queues", type=_positive, default=8, help="read and write queue numbers (default 8)")
    p.add_argument("--perm", type=int, default=6, choices=(2, 4, 6), help="2 write, 4 read, 6 read+write (default 6)")
    p.add_argument("-b", "--broker", help="only this broker name")
    p = _add(admin_subparsers, "delete-topic", delete_topic, "delete a topic from the cluster's masters", True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--broker", help="only this broker name")
    p = _add(admin_subparsers, "list-topic", list_topic, "list topics on the cluster's masters", True)
    p.add_argument("-b", "--broker", help="only this broker name")
    p = _add(admin_subparsers, "update-group", update_group, "create or update a consumer group on the cluster's masters", True)
    p.add_argument("-g", "--group", required=True)
    p.add_argument("--fifo", action="store_true", help="deliver in order (consumeMessageOrderly)")
    p.add_argument("--max-attempts", type=int, help="delivery attempts before the DLQ (retryMaxTimes + 1)")
    p.add_argument("-b", "--broker", help="only this broker name")
    p = _add(admin_subparsers, "delete-group", delete_group, "delete a consumer group from the cluster's masters", True)
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-b", "--broker", help="only this broker name")
    _add(admin_subparsers, "topic-route", topic_route, "show a topic's route").add_argument("-t", "--topic", required=True)
    _add(admin_subparsers, "topic-status", topic_status, "min and max offset per broker and queue").add_argument(
        "-t", "--topic", required=True)
    p = _add(admin_subparsers, "consumer-progress", consumer_progress, "per queue: broker offset, consumer offset, lag")
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic")
    p.add_argument("-c", "--cluster", help="only this cluster (when no --topic)")
    _add(admin_subparsers, "cluster-list", cluster_list, "brokers registered at the nameserver").add_argument(
        "-c", "--cluster", help="only this cluster")
    p = _add(admin_subparsers, "broker-status", broker_status, "a broker's runtime status")
    p.add_argument("-b", "--broker", help="broker name")
    p.add_argument("--broker-id", type=_positive, default=0)
    p.add_argument("--container", metavar="HOST:PORT", help="the container's internal address (skips the nameserver)")
    p = _add(admin_subparsers, "add-broker", add_broker, "add a broker to a running container")
    p.add_argument("--container", required=True, metavar="HOST:PORT", help="the container's internal (admin) address")
    p.add_argument("--config-path", required=True, help="broker config file, on the container's host")
    p = _add(admin_subparsers, "remove-broker", remove_broker, "remove a broker from a running container", True)
    p.add_argument("--container", required=True, metavar="HOST:PORT", help="the container's internal (admin) address")
    p.add_argument("-b", "--broker", required=True, help="broker name")
    p.add_argument("--broker-id", type=_positive, required=True)
    if "namesrv" not in subparsers.choices:
        parser = subparsers.add_parser("namesrv", help="run a standalone nameserver from a config file")
        parser.add_argument("-c", "--config", required=True, metavar="FILE", help="nameserver config (.toml or .properties)")
        parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
        parser.set_defaults(handler=run_namesrv_command)


# ---------------------------------------------------------------- relaymq namesrv

def _load_namesrv_config(path: str) -> tuple[Any, Any]:
    """(NamesrvConfig, controller config or None); ConfigError names the file, key and reason."""
    from container.config_loader import load_config_file
    from metadata.config import ConfigError, unknown_keys
    from services.nameserver.config import NamesrvConfig, namesrv_config

    values = load_config_file(path)
    config = namesrv_config(values, path)
    known: list[type] = [NamesrvConfig]
    controller = None
    if config.enable_controller_in_namesrv:
        try:
            from services.controller.config import ControllerConfig, controller_config
        except ImportError:
            raise ConfigError(path, "enableControllerInNamesrv", "this build has no controller") from None
        known.append(ControllerConfig)
        controller = controller_config(values, path)
    unknown = unknown_keys(values, *known)
    if unknown:
        raise ConfigError(path, unknown[0], "unknown key")
    return config, controller


async def _serve_namesrv(config: Any, controller: Any) -> None:
    from services.nameserver.server import NameserverStartError, start_nameserver

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        handle = await start_nameserver(config, controller_config=controller)
    except NameserverStartError as exc:
        raise CliError(f"listenPort: {exc}", 1) from None
    if config.metrics_port:
        from prometheus_client import start_http_server
        from services.metrics import REGISTRY

        start_http_server(config.metrics_port, addr=config.bind_address, registry=REGISTRY)
    print(f"relaymq: nameserver listening on {handle.address}", flush=True)
    try:
        await stop.wait()
    finally:
        await handle.stop()


def run_namesrv_command(args: Any) -> int:
    import logging
    import sys

    from metadata.config import ConfigError

    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config, controller = _load_namesrv_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc), 2) from None
    from store.directory_lock import DirectoryLocked

    try:
        import uvloop
        uvloop.run(_serve_namesrv(config, controller))
    except CliError as exc:
        raise CliError(f"{args.config}: {exc}", exc.code) from None
    except DirectoryLocked as exc:
        raise CliError(str(exc), 1) from None
    return 0
