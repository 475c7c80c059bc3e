"""Start one controller member: storage, Raft driver, gRPC services; ``start_controller``.

Used by ``relaymq controller`` (its own gRPC server on this member's peer port) and by the
nameserver when ``enableControllerInNamesrv = true`` (services added to the nameserver's
server).  The Raft transport and ControllerService share the port, as DLedger's remoting
server does.  ``await handle.stop()`` stops periodic work, the driver and, if we created
it, the server, then releases the store's lock.  The store directory is locked
(``store.directory_lock``) before the Raft log is read: a second member on the same
directory raises ``DirectoryLocked`` and reads nothing.
"""
from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass

import grpc

from ha.controller.liveness import BrokerLiveness
from ha.raft.types import RaftConfig
from proto import controller_pb2_grpc as pb_grpc
from scheduler.clock import Clock, SystemClock
from services.controller.config import ControllerConfig
from services.controller.controller import Controller
from services.controller.heap import watch_collections
from services.controller.machine import ControllerMachine
from services.controller.raft_driver import DriverLimits, RaftDriver
from services.access.acl_admin import add_acl_admin_service
from services.controller.acl import ControllerAcl
from services.controller.reassign import ControllerMoves
from ha.reassign.move import Settings
from services.controller.service import ControllerServicer
from services.controller.transport import RaftPeers, RaftTransportServicer
from services.controller.watchers import Watchers
from services.cluster_auth import server_interceptors
from services.request_guard import GuardedServer, RequestGuard
from services.status_metrics import STATUS, controller_samples
from store.directory_lock import DirectoryLock, lock_directory
from store.raft_storage import RaftStorage

log = logging.getLogger(__name__)
INBOX_CAPACITY = 10_000


@dataclass
class ControllerHandle:
    config: ControllerConfig
    controller: Controller
    peers: RaftPeers
    server: grpc.aio.Server | None  # ours to stop; None when embedded
    port: int
    lock: DirectoryLock | None = None
    metrics_source: int | None = None

    async def stop(self) -> None:
        STATUS.remove(self.metrics_source)
        await self.controller.stop()
        await self.peers.close()
        if self.server is not None:
            await self.server.stop(grace=0.5)
        if self.lock is not None:
            self.lock.release()


def raft_config(config: ControllerConfig) -> RaftConfig:
    return RaftConfig(node_id=config.self_peer.node_id, peers=tuple(sorted(p.node_id for p in config.peers)),
                      heartbeat_ticks=config.heartbeat_ticks, max_heartbeat_leak=config.max_heartbeat_leak,
                      election_jitter_ticks=config.election_jitter_ticks, pre_vote=config.pre_vote,
                      check_quorum=True)


def driver_limits(config: ControllerConfig) -> DriverLimits:
    """Each member's first compaction is offset by its place among the peers (see RaftDriver)."""
    ids = sorted(p.node_id for p in config.peers)
    stagger = ids.index(config.self_peer.node_id) * config.snapshot_every_entries // len(ids)
    return DriverLimits(config.tick_ms, INBOX_CAPACITY, config.snapshot_every_entries, stagger)


async def start_controller(config: ControllerConfig, server: grpc.aio.Server | None = None,
                           clock: Clock | None = None, seed: int | None = None,
                           guard: RequestGuard | None = None) -> ControllerHandle:
    """``guard`` counts and logs requests that do not parse (the nameserver's when embedded)."""
    clock = clock or SystemClock()
    guard = guard or RequestGuard(config.bad_request_log_interval_ms)
    lock = lock_directory(config.store_path, f"relaymq controller {config.self_id} of {config.group}")
    try:
        handle = await _start(config, server, clock, seed, guard)
    except BaseException:
        lock.release()
        raise
    handle.lock = lock
    handle.metrics_source = STATUS.add(lambda: controller_source(handle), asyncio.get_running_loop())
    return handle


def controller_source(handle: ControllerHandle):
    controller, config = handle.controller, handle.config
    node, machine = controller.driver.node, controller.machine
    return controller_samples(config.group, config.self_id, machine.serving, node.term, node.commit_index,
                              machine.elections, machine.leader_changes)


async def _start(config: ControllerConfig, server: grpc.aio.Server | None, clock: Clock, seed: int | None,
                 guard: RequestGuard) -> ControllerHandle:
    storage = RaftStorage(config.store_path)
    recovered = await asyncio.to_thread(storage.load)
    watch_collections()
    watchers = Watchers(config.max_watchers, config.watch_queue_capacity)
    liveness = BrokerLiveness(config.heartbeat_timeout_ms, config.max_brokers, pause_aware=True)
    machine = ControllerMachine(liveness, clock.monotonic_ms,
                                watchers.publish if config.notify_broker_role_changed else (lambda n, v: None))
    controller = Controller(config, clock, machine, watchers)
    me = config.self_peer
    peers = RaftPeers({p.node_id: p.address for p in config.peers if p.node_id != me.node_id}, config.group,
                      config.peer_queue_capacity)
    rng_seed = seed if seed is not None else zlib.crc32(f"{config.group}/{me.name}".encode()) ^ clock.now_ms()
    controller.driver = RaftDriver.create(raft_config(config), rng_seed, recovered, storage, peers.send, machine,
                                          clock, driver_limits(config))
    own_server = server is None
    if own_server:
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0),
                                          ("grpc.max_receive_message_length", config.max_message_bytes),
                                          ("grpc.max_send_message_length", config.max_message_bytes)],
                                 interceptors=server_interceptors())
    guarded = GuardedServer(server, guard)
    acl = ControllerAcl(controller)
    moves = ControllerMoves(controller, Settings(config.reassign_release_timeout_ms, config.reassign_open_timeout_ms))
    controller.on_stop.append(moves.close)
    pb_grpc.add_ControllerServiceServicer_to_server(ControllerServicer(controller, acl, moves), guarded)
    add_acl_admin_service(guarded, acl)  # users and ACLs committed here (services/controller/acl.py)
    pb_grpc.add_RaftTransportServicer_to_server(
        RaftTransportServicer(config.group, me.node_id, {p.node_id for p in config.peers}, controller.driver.deliver),
        guarded)
    port = me.port
    if own_server:
        port = server.add_insecure_port(f"{me.host}:{me.port}")
        if port == 0:
            raise OSError(f"controller {me.name}: cannot listen on {me.address}")
        await server.start()
    controller.start()
    log.info("controller %s of %s listening on %s:%s, store %s", me.name, config.group, me.host, port,
             config.store_path)
    return ControllerHandle(config, controller, peers, server if own_server else None, port)
