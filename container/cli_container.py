"""``relaymq container -c FILE`` and ``relaymq namesrv -c FILE``: run a BrokerContainer or a
standalone nameserver until SIGTERM or SIGINT.

A bad file, key or value, or a busy port, is one line naming the file, the key and the
reason, and exit code 2; nothing is started and no data is touched.  A store another
process holds (``store.directory_lock``) is one line naming the directory and the holder's
pid, and exit code 1: the second process reads nothing of it.  SIGTERM and SIGINT
stop accepting, drain, flush and exit 0.
"""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import Any

from container.cli import CliError
from metadata.config import ConfigError
from store.directory_lock import DirectoryLocked

log = logging.getLogger("relaymq.container")


def register(subparsers, admin_subparsers) -> None:
    parser = subparsers.add_parser("container", help="run a BrokerContainer from a config file")
    parser.add_argument("-c", "--config", required=True, metavar="FILE", help="container config (.toml or .properties)")
    parser.add_argument("-b", "--broker-config-paths", metavar="PATHS", help="':'-separated broker files (overrides brokerConfigPaths)")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.set_defaults(handler=run_container_command)
    parser = subparsers.add_parser("namesrv", help="run a standalone nameserver from a config file")
    parser.add_argument("-c", "--config", required=True, metavar="FILE", help="nameserver config (.toml or .properties)")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.set_defaults(handler=run_namesrv_command)


def configure_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def build_container(config_path: str, broker_paths: str | None):
    from container.config import load_container_config
    from container.hosted_broker import bind_broker
    from container.runtime import BrokerContainer
    from container.security import load_accounts, load_acl_store, load_inner_credentials, load_tls_material
    from metadata.config import bind
    from services.messaging.config import MessagingConfig
    from services.nameserver.config import NamesrvConfig

    from services.controller.config import ControllerConfig

    from services.cluster_auth import ClusterAuthConfig, check_internal_binds, install, load_cluster_auth

    config, entries, values = load_container_config(config_path, broker_paths,
                                                    also=(MessagingConfig, NamesrvConfig, ControllerConfig,
                                                          ClusterAuthConfig))
    auth, credential = load_cluster_auth(values, config_path)
    binds = [("adminBindAddress", config.admin_bind_address)]
    if config.start_embedded_namesrv:
        binds.append(("bindAddress", bind(NamesrvConfig, values, config_path).bind_address))
        if config.enable_controller_in_namesrv and values.get("controllerDLegerPeers"):  # its own port, if it says so
            from services.controller.config import parse_peers
            me = str(values.get("controllerDLegerSelfId", "n0"))
            binds += [("controllerDLegerPeers", peer.host)
                      for peer in parse_peers(str(values["controllerDLegerPeers"]), config_path) if peer.name == me]
    check_internal_binds(config_path, auth, binds)
    if not entries and not config.controller_addr:  # with a controller, brokers may be moved to it (reassign-broker)
        raise ConfigError(config_path, None, "no brokers: add [[broker]] tables or brokerConfigPaths (or controllerAddr, "
                                             "for a container that brokers are moved to)")
    specs = [bind_broker(entry, config) for entry in entries]
    messaging = bind(MessagingConfig, values, config_path)
    tls = load_tls_material(config, config_path)
    accounts = load_accounts(messaging, config_path)
    controllers = next((spec.broker.controller_addresses for spec in specs if spec.broker.enable_controller_mode), None)
    acl_store = load_acl_store(messaging, config_path, controllers, config.store_path_root_dir)
    install(credential)  # this process's proof of membership (services.cluster_auth)
    return BrokerContainer(config, specs, messaging, config_path, nameserver_values=values, tls=tls, accounts=accounts,
                           acl_store=acl_store, inner_credentials=load_inner_credentials(messaging, config_path))


async def serve(container) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await container.start()
    except BaseException:
        await container.stop()
        raise
    from container.collector import freeze_startup_heap
    log.debug("objects frozen after start: %d", freeze_startup_heap())
    host = container.config.broker_container_ip
    tls = f", TLS clients to {host}:{container.ports['tls']}" if "tls" in container.ports else ""
    print(f"relaymq: container ready, clients connect to {host}:{container.ports['client']}{tls}", flush=True)
    await stop.wait()
    log.info("stopping: draining and flushing")
    await container.stop()


def run_container_command(args) -> int:
    configure_logging(args.log_level)
    from container.allocator import tune_allocator
    tuned = tune_allocator()
    if tuned:
        log.debug("malloc thresholds: %s", tuned)
    from container.collector import tune_collector
    log.debug("gc thresholds: %s", tune_collector())
    try:
        container = build_container(args.config, args.broker_config_paths)
        _run(serve(container))
    except ConfigError as exc:
        raise CliError(str(exc), 2) from None
    except DirectoryLocked as exc:
        raise CliError(str(exc), 1) from None
    return 0


def _run(coroutine) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep working without it
        asyncio.run(coroutine)
        return
    uvloop.run(coroutine)


# ---------------------------------------------------------------- relaymq namesrv

def _load_namesrv_config(path: str) -> tuple[Any, Any]:
    """(NamesrvConfig, controller config or None); ConfigError names the file, key and reason."""
    from container.config_loader import load_config_file
    from metadata.config import ConfigError, unknown_keys
    from services.nameserver.config import NamesrvConfig, namesrv_config

    from services.cluster_auth import ClusterAuthConfig, check_internal_binds, install, load_cluster_auth

    values = load_config_file(path)
    config = namesrv_config(values, path)
    known: list[type] = [NamesrvConfig, ClusterAuthConfig]
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
    auth, credential = load_cluster_auth(values, path)
    binds = [("bindAddress", config.bind_address)]
    if controller is not None:
        binds.append(("controllerDLegerPeers", controller.self_peer.host))
    check_internal_binds(path, auth, binds)
    install(credential)
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
    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config, controller = _load_namesrv_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc), 2) from None
    try:
        import uvloop
        uvloop.run(_serve_namesrv(config, controller))
    except CliError as exc:
        raise CliError(f"{args.config}: {exc}", exc.code) from None
    except DirectoryLocked as exc:
        raise CliError(str(exc), 1) from None
    return 0
