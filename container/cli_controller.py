"""``relaymq controller -c FILE`` and the controller admin commands.

- ``controller``: run one standalone controller member until SIGTERM/SIGINT.  A bad file,
  key or value, or a busy port, is one line naming it and exit code 2.
- ``admin get-sync-state-set | get-controller-metadata | elect-master |
  clean-broker-metadata``: talk to the group's leader, found from any member given with
  ``--controller HOST:PORT[;HOST:PORT...]``.  Human output by default, ``--json`` for
  scripts.  A controller error code exits 1 with its RocketMQ name; no answer exits 3.
"""
from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

from container.cli import CliError
from metadata.config import ConfigError, unknown_keys
from store.directory_lock import DirectoryLocked

log = logging.getLogger("relaymq.controller")


def register(subparsers, admin_subparsers) -> None:
    parser = subparsers.add_parser("controller", help="run a standalone controller member")
    parser.add_argument("-c", "--config", required=True, metavar="FILE", help="controller config (.toml or .properties)")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.set_defaults(handler=run_controller_command)

    from container.cli import add_command
    from container.cli_admin import broker_name, cluster_name, host_ports, in_range

    def admin(name: str, help_text: str, handler, camel: str):
        sub = add_command(admin_subparsers, name, help_text, hidden_aliases=(camel,))
        sub.add_argument("--controller", "-a", default=None, type=host_ports, metavar="HOST:PORT[;HOST:PORT...]",
                         help="any controller member(s); the leader is found from them (default 127.0.0.1:9876, "
                              "the controller embedded in conf/controller-mode's nameserver)")
        sub.add_argument("--json", action="store_true", help="print one JSON document")
        sub.set_defaults(handler=handler)
        return sub

    # --broker is the broker name here as in every admin command; --broker-name and -bn, the
    # old spellings, stay accepted (hidden).  -b was the broker id(s) in elect-master and
    # clean-broker-metadata: it keeps that meaning there, hidden, so old scripts do what they did.
    admin("get-controller-metadata", "show the controller group's leader and peers", cmd_metadata, "getControllerMetaData")
    sub = admin("get-sync-state-set", "show broker sets' master, epochs and SyncStateSet", cmd_sync_state_set,
                "getSyncStateSet")
    sub.add_argument("--broker", "-b", "--broker-name", dest="broker", action="append", default=[], type=broker_name,
                     help="broker set (repeatable; default all)")
    sub = admin("elect-master", "elect a designated broker as master of its set", cmd_elect_master, "electMaster")
    sub.add_argument("--cluster", "-c", default=None, type=cluster_name, help="cluster name")
    sub.add_argument("--broker", "--broker-name", "-bn", dest="broker", required=True, type=broker_name, help="broker set")
    sub.add_argument("--broker-id", "-b", required=True, type=in_range(1, 2**31 - 1),
                     help="controller broker id to elect (>= 1)").hidden_option_strings = {"-b"}
    sub = admin("clean-broker-metadata", "remove broker ids (or a whole set) from the controller", cmd_clean,
                "cleanBrokerMetadata")
    sub.add_argument("--cluster", "-c", default=None, type=cluster_name, help="cluster name")
    sub.add_argument("--broker", "--broker-name", "-bn", dest="broker", required=True, type=broker_name, help="broker set")
    sub.add_argument("--broker-ids", "-b", default="", type=_broker_ids,
                     help="ids to clean, '1;2'; default the whole set").hidden_option_strings = {"-b"}
    sub.add_argument("--clean-living-broker", "-l", action="store_true", help="also clean brokers still alive")


def _broker_ids(text: str) -> str:
    import argparse

    parts = [p.strip() for p in text.split(";") if p.strip()]
    if not all(p.isdigit() and 0 < int(p) < 2**31 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not broker ids separated by ';' (each >= 1)")
    return ";".join(parts)


# -- running a member --------------------------------------------------------------------------

def load_values(path: str) -> dict:
    try:
        from container.config_loader import load_config_file
    except ImportError:  # pragma: no cover - the loader is part of the container package
        raise CliError("container.config_loader is missing", 2) from None
    return load_config_file(Path(path))


def build_config(path: str):
    from services.controller.config import ControllerConfig, controller_config

    from services.cluster_auth import ClusterAuthConfig, check_internal_binds, install, load_cluster_auth

    values = load_values(path)
    unknown = unknown_keys(values, ControllerConfig, ClusterAuthConfig)
    if unknown:
        raise ConfigError(path, unknown[0], "is not a controller key")
    config = controller_config(values, path)
    auth, credential = load_cluster_auth(values, path)
    check_internal_binds(path, auth, [("controllerDLegerPeers", config.self_peer.host)])
    install(credential)
    return config


async def serve_controller(config) -> None:
    from services.controller.server import start_controller

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    handle = await start_controller(config)
    if config.metrics_port:
        from prometheus_client import start_http_server
        from services.metrics import REGISTRY

        start_http_server(config.metrics_port, addr=config.self_peer.host, registry=REGISTRY)
    print(f"relaymq: controller {config.self_id} ready on {config.self_peer.host}:{handle.port} "
          f"(group {config.group}, store {config.store_path})", flush=True)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([stopping, handle.controller.driver.failed], return_when=asyncio.FIRST_COMPLETED)
        if handle.controller.driver.failed.done():
            raise CliError(f"controller {config.self_id}: raft loop crashed: "
                           f"{handle.controller.driver.failed.exception()!r}", 1)
    finally:
        stopping.cancel()
        log.info("stopping controller %s", config.self_id)
        await handle.stop()


def run_controller_command(args) -> int:
    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = build_config(args.config)
        asyncio.run(serve_controller(config))
    except ConfigError as exc:
        raise CliError(str(exc), 2) from None
    except DirectoryLocked as exc:
        raise CliError(str(exc), 1) from None
    except OSError as exc:
        raise CliError(f"{args.config}: {exc}", 2) from None
    return 0


# -- admin --------------------------------------------------------------------------------------

def _admin(args, work) -> int:
    from services.controller.client import ControllerClient, ControllerClientError, parse_addresses

    try:
        addresses = parse_addresses(";".join(args.controller or ["127.0.0.1:9876"]))
    except ValueError as exc:
        raise CliError(f"--controller: {exc}", 2) from None

    async def run():
        client = ControllerClient(addresses)
        try:
            return await work(client)
        finally:
            await client.close()
    try:
        document, text, ok = asyncio.run(run())
    except ControllerClientError as exc:
        raise CliError(str(exc), 3) from None
    print(json.dumps(document, indent=2, sort_keys=True) if args.json else text)
    return 0 if ok else 1


def _status(reply) -> tuple[dict, bool]:
    from proto import controller_pb2 as pb

    code = reply.status.code
    name = pb.ControllerStatus.Code.Name(code) if code in pb.ControllerStatus.Code.values() else str(code)
    return {"code": code, "codeName": name, "remark": reply.status.remark}, code == pb.ControllerStatus.SUCCESS


def _view(view) -> dict:
    return {"brokerName": view.broker_name, "masterBrokerId": view.master_broker_id if view.master_broker_id >= 0
            else None, "masterAddress": view.master_address, "masterEpoch": view.master_epoch,
            "syncStateSetEpoch": view.sync_state_set_epoch, "syncStateSet": sorted(view.sync_state_set),
            "members": {str(k): v for k, v in sorted(view.members.items())}}


def cmd_metadata(args) -> int:
    async def work(client):
        meta = await client.metadata()
        doc = {"group": meta.group, "leaderId": meta.leader_id or None, "leaderAddress": meta.leader_address or None,
               "answeredBy": meta.self_id, "isLeader": meta.is_leader, "term": meta.term,
               "commitIndex": meta.commit_index, "peers": [{"id": p.id, "address": p.address} for p in meta.peers]}
        text = (f"group {meta.group}\nleader {meta.leader_id or '(none)'} {meta.leader_address}\nterm {meta.term}\n"
                + "\n".join(f"peer {p.id} {p.address}" for p in meta.peers))
        return doc, text, True
    return _admin(args, work)


def cmd_sync_state_set(args) -> int:
    from proto import controller_pb2 as pb

    async def work(client):
        reply = await client.call("GetSyncStateData", pb.GetSyncStateDataRequest(broker_names=args.broker))
        status, ok = _status(reply)
        groups = [dict(_view(g.view), replicas=[{"brokerId": r.broker_id, "address": r.address, "alive": r.alive,
                                                 "inSync": r.in_sync} for r in g.replicas]) for g in reply.groups]
        lines = [f"error {status['codeName']}: {status['remark']}"] if not ok else []
        for g in groups:
            lines.append(f"{g['brokerName']}: master {g['masterBrokerId']} {g['masterAddress']} "
                         f"masterEpoch {g['masterEpoch']} syncStateSetEpoch {g['syncStateSetEpoch']}")
            lines += [f"  {r['brokerId']:>4} {r['address']:<24} {'in-sync' if r['inSync'] else 'not-in-sync':<12}"
                      f"{'alive' if r['alive'] else 'not-alive'}" for r in g["replicas"]]
        return {"status": status, "brokers": groups}, "\n".join(lines) or "(no broker sets)", ok
    return _admin(args, work)


def cmd_elect_master(args) -> int:
    from proto import controller_pb2 as pb

    async def work(client):
        reply = await client.call("ElectMaster", pb.ElectMasterRequest(
            cluster_name=args.cluster or "", broker_name=args.broker, broker_id=args.broker_id, designate_elect=True))
        status, ok = _status(reply)
        doc = {"status": status, "view": _view(reply.view) if reply.HasField("view") else None}
        text = (f"elected master {reply.view.master_broker_id} of {args.broker} at {reply.view.master_address}, "
                f"masterEpoch {reply.view.master_epoch}" if ok else f"error {status['codeName']}: {status['remark']}")
        return doc, text, ok
    return _admin(args, work)


def cmd_clean(args) -> int:
    from proto import controller_pb2 as pb

    async def work(client):
        reply = await client.call("CleanBrokerData", pb.CleanBrokerDataRequest(
            cluster_name=args.cluster or "", broker_name=args.broker, broker_ids_to_clean=args.broker_ids,
            clean_living_broker=args.clean_living_broker))
        status, ok = _status(reply)
        text = f"cleaned {args.broker_ids or 'all of'} {args.broker}" if ok else \
            f"error {status['codeName']}: {status['remark']}"
        return {"status": status}, text, ok
    return _admin(args, work)
