"""One controller member: the request pipeline on top of the Raft driver.

Rules:
- Only a serving leader (its own no-op applied) takes requests; others raise
  ``NotLeaderError`` naming the leader they believe in.
- Requests queue (bounded) for one worker.  The worker decides a batch of up to
  ``controllerBatchMax`` requests in order against a copy of the applied tables (applying
  each decision's events to the copy, so later requests see earlier ones), proposes all
  events (or a read barrier when there are none), and replies only after every entry of
  the batch is applied.  This is RocketMQ's single-threaded event scheduler, pipelined.
- Heartbeats are recorded by every member in its own ``BrokerLiveness`` (not replicated).
- A broker is dead when its heartbeats stop for its timeout -- an expiry timer wakes at the
  next broker's deadline, not on a scan period -- or at once when its session (its watch
  stream naming it) ends.  Either way the leader then elects for the set at once if that
  broker was its master (controller-triggered), without waiting for the periodic scan.
- Periodic work (declared in ``PeriodicTasks``): the same expiry and, on a settled leader,
  controller-triggered elections for sets whose master is not alive (the safety net).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from ha.controller.codes import ResponseCode
from ha.controller.commands import decide
from ha.controller.events import encode_event
from ha.controller.liveness import Heartbeat
from ha.controller.requests import Reply, Request
from ha.controller.scan import elections_needed
from ha.raft.errors import NotLeader, RaftError
from scheduler.clock import Clock
from scheduler.periodic import PeriodicTasks
from services.controller.config import ControllerConfig
from services.controller.machine import READ_BARRIER, ControllerMachine
from services.controller.raft_driver import RaftDriver
from services.controller.shutdown import cancel_and_wait
from services.controller.watchers import Watchers

log = logging.getLogger(__name__)


class ControllerUnavailable(Exception):
    """The request could not be served here; ``code`` says why, for the gRPC reply."""

    def __init__(self, code: ResponseCode, remark: str, leader_name: str = "", leader_address: str = "") -> None:
        super().__init__(remark)
        self.code, self.remark = code, remark
        self.leader_name, self.leader_address = leader_name, leader_address


@dataclass
class _Pending:
    request: Request
    future: asyncio.Future


class Controller:
    def __init__(self, config: ControllerConfig, clock: Clock, machine: ControllerMachine, watchers: Watchers) -> None:
        self.config = config
        self.clock = clock
        self.machine = machine
        self.watchers = watchers
        self.driver: RaftDriver | None = None
        self._queue: asyncio.Queue = asyncio.Queue(maxsize=config.request_queue_capacity)
        self._worker: asyncio.Task | None = None
        self.periodic = PeriodicTasks(f"controller-{config.self_id}")
        self._names = {p.node_id: p for p in config.peers}
        self._expiry: asyncio.Task | None = None
        self._expiry_wake = asyncio.Event()
        self._electing: set[asyncio.Task] = set()
        self._sessions: dict[tuple[str, str, int], int] = {}
        self.on_stop: list = []  # coroutine functions awaited after the periodic work stopped

    # -- leadership -------------------------------------------------------------------------

    def leader(self) -> tuple[str, str]:
        """(leader name, address), empty when unknown."""
        leader_id = self.driver.node.leader_id if self.driver else None
        peer = self._names.get(leader_id) if leader_id is not None else None
        return (peer.name, peer.address) if peer else ("", "")

    def not_leader(self) -> ControllerUnavailable:
        name, address = self.leader()
        if self.machine.soft.role.name == "LEADER":
            return ControllerUnavailable(ResponseCode.CONTROLLER_NOT_LEADER,
                                         "the leader is not ready yet (applying its log)", name, address)
        return ControllerUnavailable(ResponseCode.CONTROLLER_NOT_LEADER,
                                     f"not the leader; the leader is {name or 'unknown'} {address}".strip(),
                                     name, address)

    # -- requests ---------------------------------------------------------------------------

    async def submit(self, request: Request) -> Reply:
        if not self.machine.serving:
            raise self.not_leader()
        future = asyncio.get_running_loop().create_future()
        # a caller that timed out or went leaves the outcome to nobody (a step-down fails it later):
        # retrieved here, not logged as "Future exception was never retrieved"
        future.add_done_callback(lambda done: done.cancelled() or done.exception())
        try:
            self._queue.put_nowait(_Pending(request, future))
        except asyncio.QueueFull:
            raise ControllerUnavailable(ResponseCode.SYSTEM_ERROR, "controller request queue is full") from None
        try:
            async with asyncio.timeout(self.config.request_timeout_ms / 1000):  # not wait_for: bpo-42130
                return await asyncio.shield(future)
        except TimeoutError:
            raise ControllerUnavailable(ResponseCode.SYSTEM_ERROR,
                                        f"not committed within {self.config.request_timeout_ms} ms") from None

    def heartbeat(self, beat: Heartbeat) -> bool:
        known = self.machine.liveness.is_alive(beat.cluster_name, beat.broker_name, beat.broker_id,
                                                self.clock.monotonic_ms())
        accepted = self.machine.liveness.heartbeat(beat, self.clock.monotonic_ms())
        if accepted and not known:
            self._expiry_wake.set()  # a new deadline may be the earliest
        return accepted

    # -- broker sessions and deaths ------------------------------------------------------------

    def session_started(self, cluster: str, broker_name: str, broker_id: int) -> None:
        key = (cluster, broker_name, broker_id)
        self._sessions[key] = self._sessions.get(key, 0) + 1

    def session_ended(self, cluster: str, broker_name: str, broker_id: int) -> None:
        """The broker's watch stream ended: when it was its last one, the broker is dead now."""
        key = (cluster, broker_name, broker_id)
        left = self._sessions.get(key, 1) - 1
        if left > 0:
            self._sessions[key] = left
            return
        self._sessions.pop(key, None)
        info = self.machine.liveness.session_ended(cluster, broker_name, broker_id, self.clock.monotonic_ms())
        if info is not None:
            log.info("broker %s/%s id %s at %s: session ended, not alive", cluster, broker_name, broker_id,
                     info.address)
            self._after_deaths([info])

    def _after_deaths(self, dead) -> None:
        """Elect at once for every set whose master just died (on the leader)."""
        if not self.machine.serving:
            return
        replicas = self.machine.replicas
        for info in dead:
            state = replicas.sync_state_info_table.get(info.broker_name)
            if state is not None and state.master_broker_id == info.broker_id:
                task = asyncio.get_running_loop().create_task(self._reelect_inactive_masters())
                self._electing.add(task)
                task.add_done_callback(self._electing.discard)
                return

    async def _work(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self.config.batch_max and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self._serve(batch)
            except asyncio.CancelledError:
                self._fail(batch, ControllerUnavailable(ResponseCode.SYSTEM_ERROR, "controller stopped"))
                raise

    async def _serve(self, batch: list[_Pending]) -> None:
        if not self.machine.serving:
            self._fail(batch, self.not_leader())
            return
        scratch = self.machine.replicas.copy()
        now = self.clock.monotonic_ms()
        replies, payloads = [], []
        for pending in batch:
            decision = decide(pending.request, scratch, self.machine.liveness, now,
                              self.config.enable_elect_unclean_master)
            for event in decision.events:
                scratch.apply(event)
                payloads.append(encode_event(event))
            replies.append(decision.reply)
        try:
            await self.driver.propose(payloads or [READ_BARRIER])
        except RaftError as exc:
            self._fail(batch, self.not_leader() if isinstance(exc, NotLeader) else ControllerUnavailable(
                ResponseCode.SYSTEM_ERROR, f"not committed: {exc}"))
            return
        for pending, reply in zip(batch, replies):
            if not pending.future.done():
                pending.future.set_result(reply)

    @staticmethod
    def _fail(batch: list[_Pending], error: ControllerUnavailable) -> None:
        for pending in batch:
            if not pending.future.done():
                pending.future.set_exception(error)

    # -- periodic ---------------------------------------------------------------------------

    def _expire_brokers(self) -> None:
        dead = self.machine.liveness.expire(self.clock.monotonic_ms())
        for info in dead:
            log.info("broker %s/%s id %s at %s is not alive", info.cluster_name, info.broker_name, info.broker_id,
                     info.address)
        self._after_deaths(dead)

    async def _run_expiry(self) -> None:
        """Expire each broker at its own deadline (heartbeat time + its timeout)."""
        loop = asyncio.get_running_loop()
        while True:
            self._expiry_wake.clear()
            deadline = self.machine.liveness.next_expiry_ms()
            wake = None
            if deadline is not None:
                delay = max(0.0, (deadline - self.clock.monotonic_ms()) / 1000)
                wake = loop.call_later(delay, self._expiry_wake.set)
            try:
                await self._expiry_wake.wait()
            finally:
                if wake is not None:
                    wake.cancel()
            self._expire_brokers()

    async def _reelect_inactive_masters(self) -> None:
        if not self.machine.serving:
            return
        for request in elections_needed(self.machine.replicas, self.machine.liveness, self.clock.monotonic_ms()):
            try:
                reply = await self.submit(request)
            except ControllerUnavailable as exc:
                log.info("re-election for %s not done: %s", request.broker_name, exc.remark)
                continue
            log.info("re-election for %s: %s master %s epoch %s", request.broker_name, reply.code.name,
                     reply.view.master_broker_id if reply.view else None,
                     reply.view.master_epoch if reply.view else None)

    def start(self) -> None:
        self.driver.start()
        self._worker = asyncio.get_running_loop().create_task(self._work(), name="controller-worker")
        self._expiry = asyncio.get_running_loop().create_task(self._run_expiry(), name="controller-expiry")
        self.periodic.declare("scan-not-active-broker", self.config.scan_not_active_broker_interval_ms,
                              self._expire_brokers, initial_delay_ms=2000)
        self.periodic.declare("scan-inactive-master", self.config.scan_inactive_master_interval_ms,
                              self._reelect_inactive_masters, initial_delay_ms=self.config.scan_inactive_master_interval_ms)
        self.periodic.start()

    async def stop(self) -> None:
        """Stop periodic work, the worker and the driver; a cancelled caller still stops them."""
        try:
            await self.periodic.stop()
            for stop in self.on_stop:
                await stop()
        finally:
            worker, self._worker = self._worker, None
            background = [t for t in (self._expiry, *self._electing) if t is not None]
            self._expiry = None
            try:
                await cancel_and_wait([worker, *background])
            finally:
                self._fail_queued()
                await self.driver.stop()

    def _fail_queued(self) -> None:
        while not self._queue.empty():
            pending = self._queue.get_nowait()
            if not pending.future.done():
                pending.future.set_exception(ControllerUnavailable(ResponseCode.SYSTEM_ERROR, "controller stopped"))
