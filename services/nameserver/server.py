"""Starting and stopping a nameserver, standalone or mounted on a container's gRPC server.

Rules:
- ``start_nameserver(config)`` creates its own ``grpc.aio.Server`` on ``bindAddress:listenPort``
  (loopback by default) and owns it; given a ``server``, it only mounts the service and the
  caller owns the server's start and stop.
- The expiry scan is one declared periodic task (``scanNotActiveBroker``), stopped by
  :meth:`NameserverHandle.stop`.
- With ``enableControllerInNamesrv`` the controller is started on the same server through
  ``services.controller.server.start_controller(config, server)`` when that module exists.
- A port that cannot be bound raises :class:`NameserverStartError` naming the address.
"""
from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
from dataclasses import dataclass, field
from typing import Any

import grpc

from proto import nameserver_pb2_grpc as pb_grpc
from scheduler.clock import Clock, SystemClock
from scheduler.periodic import PeriodicTasks
from services.nameserver.config import NamesrvConfig
from services.nameserver.service import NameserverDriver, NameserverServicer
from services.cluster_auth import server_interceptors
from services.request_guard import GuardedServer, RequestGuard
from services.status_metrics import STATUS, nameserver_samples

log = logging.getLogger(__name__)


class NameserverStartError(RuntimeError):
    """The nameserver could not start (the message names the address and the reason)."""


@dataclass
class NameserverHandle:
    config: NamesrvConfig
    driver: NameserverDriver
    server: grpc.aio.Server
    port: int  # the bound port (0 when mounted on a server we do not own)
    owns_server: bool
    tasks: PeriodicTasks
    controller: Any = None
    metrics_source: int | None = None
    _stopped: bool = field(default=False, repr=False)

    @property
    def address(self) -> str:
        return f"{self.config.bind_address}:{self.port}"

    async def stop(self, grace_s: float = 1.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        STATUS.remove(self.metrics_source)
        await self.tasks.stop()
        if self.driver.notifier is not None:
            await self.driver.notifier.close()
        if self.controller is not None and hasattr(self.controller, "stop"):
            result = self.controller.stop()
            if inspect.isawaitable(result):
                await result
        if self.owns_server:
            await self.server.stop(grace_s)


def server_options(config: NamesrvConfig) -> list[tuple[str, int]]:
    return [("grpc.max_receive_message_length", config.max_message_bytes),
            ("grpc.max_send_message_length", config.max_message_bytes),
            ("grpc.so_reuseport", 0)]


async def start_nameserver(config: NamesrvConfig, server: grpc.aio.Server | None = None, *,
                           clock: Clock | None = None, controller_config: Any = None,
                           guard: RequestGuard | None = None) -> NameserverHandle:
    """``guard`` counts and logs requests that do not parse (the process's, or one of our own)."""
    driver = NameserverDriver(config, clock or SystemClock())
    guard = guard or RequestGuard(config.bad_request_log_interval_ms)
    owns_server = server is None
    if server is None:
        server = grpc.aio.server(options=server_options(config), maximum_concurrent_rpcs=config.max_concurrent_rpcs,
                                 interceptors=server_interceptors())
    pb_grpc.add_NameserverServiceServicer_to_server(NameserverServicer(driver), GuardedServer(server, guard))
    port = 0
    if owns_server:
        try:
            port = server.add_insecure_port(config.address)
        except RuntimeError as exc:
            raise NameserverStartError(f"cannot listen on {config.address}: {exc}") from None
        if port == 0:
            raise NameserverStartError(f"cannot listen on {config.address}: address in use or not available")
    tasks = PeriodicTasks("nameserver")
    interval = config.scan_not_active_broker_interval_ms
    tasks.declare("scanNotActiveBroker", interval, driver.scan_not_active, initial_delay_ms=interval)
    handle = NameserverHandle(config, driver, server, port, owns_server, tasks)
    handle.metrics_source = STATUS.add(lambda: nameserver_samples(driver.table.cluster_info()),
                                       asyncio.get_running_loop())
    if config.enable_controller_in_namesrv:
        handle.controller = await _maybe_start_controller(controller_config, server, guard)
    if owns_server:
        await server.start()
    tasks.start()
    log.info("nameserver listening on %s", handle.address if owns_server else "a shared server")
    return handle


async def _maybe_start_controller(controller_config: Any, server: grpc.aio.Server, guard: RequestGuard) -> Any:
    try:
        module = importlib.import_module("services.controller.server")
    except ImportError:
        log.warning("enableControllerInNamesrv is set but services.controller.server is not available; no controller")
        return None
    if controller_config is None:
        log.warning("enableControllerInNamesrv is set but no controller configuration was given; no controller")
        return None
    result = module.start_controller(controller_config, server, guard=guard)
    return await result if inspect.isawaitable(result) else result
