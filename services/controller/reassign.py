"""The controller leader's driver of broker moves (issue 26, docs/reassign.md).

A driver around :mod:`ha.reassign.move` (which decides) and the member's Raft driver (which
commits).  Rules:
- Only a serving leader starts, cancels or drives a move; each decision is taken on the
  applied record, under one lock, and committed (a ``MoveRecord``) before its actions go out.
  A new leader drives every move in progress from its record alone: the current step's
  action is sent again (every container step is idempotent per move).
- Containers report themselves (``ReportContainer``, every ``brokerHeartbeatInterval``);
  the last report of each is kept in memory.  A move's target must have reported within
  :data:`LIVE_MS`; its source is the container that last reported the broker, live or not
  (a stopped or dead source is moved away from, fenced, after ``reassignReleaseTimeoutMillis``).
- Before a move is planned or committed the target checks the storage (``CheckStore``: it sees
  the store the source owns, and its directory takes a durable atomic rename); a move it
  refuses, or does not answer, is refused with the reason.
- Containers are named by their client endpoint (what cluster-list shows, and their name in
  the store's claims); the reports give the internal address their ReassignService is on.
- A container call that fails for want of an answer is tried again after
  :data:`RETRY_PAUSE_S`; the step's timeout (:func:`ha.reassign.move.tick`) bounds it.
- Moves are counted in the metrics: started, and finished by outcome with their duration.
"""
from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

import grpc

from ha.controller.events import encode_event
from ha.raft.errors import RaftError
from ha.reassign import move as moves
from ha.reassign.move import Move, MoveRefused, Settings, Step
from ha.reassign.table import MoveRecord, move_to_json
from proto import reassign_pb2 as rpb
from proto import reassign_pb2_grpc as rpb_grpc
from services.cluster_auth import internal_channel
from services.metrics import BROKER_MOVE_SECONDS, BROKER_MOVES, labelled

log = logging.getLogger(__name__)
LIVE_MS = 3000          # a container that reported within this long is live
RETRY_PAUSE_S = 0.3
MAX_CONTAINERS = 10_000
TICK_MS = 100
CHECK_TIMEOUT_S = 5.0


class NotCommitted(Exception):
    """The move was not started, cancelled or advanced: not the leader, or the commit failed."""


@dataclass(frozen=True)
class ContainerReport:
    endpoint: str
    admin_address: str
    brokers: tuple[str, ...]
    shared: dict            # broker -> (ownership epoch, its keys as JSON)
    at_ms: int              # monotonic, this member's clock

    def to_json(self, now_ms: int) -> dict:
        return {"endpoint": self.endpoint, "admin": self.admin_address, "brokers": list(self.brokers),
                "shared": {name: epoch for name, (epoch, _) in sorted(self.shared.items())},
                "ageMs": max(0, now_ms - self.at_ms), "live": now_ms - self.at_ms <= LIVE_MS}


class ControllerMoves:
    def __init__(self, controller, settings: Settings = Settings()) -> None:
        """``controller``: the member (:class:`services.controller.controller.Controller`)."""
        self._controller = controller
        self.settings = settings
        self.reports: dict[str, ContainerReport] = {}
        self._lock = asyncio.Lock()
        self._inflight: set[tuple] = set()
        self._tasks: set[asyncio.Task] = set()
        self._channels: dict[str, grpc.aio.Channel] = {}
        controller.periodic.declare("moves", TICK_MS, self._drive)

    # ---- containers

    def report(self, endpoint: str, admin_address: str, brokers: tuple[str, ...], shared: dict) -> None:
        if endpoint not in self.reports and len(self.reports) >= MAX_CONTAINERS:
            del self.reports[min(self.reports.values(), key=lambda r: r.at_ms).endpoint]
        self.reports[endpoint] = ContainerReport(endpoint, admin_address, brokers, shared,
                                                 self._controller.clock.monotonic_ms())

    def _serves(self, endpoint: str, broker: str, serves: bool) -> None:
        """A container's report as a move step just made it (its next report says the same)."""
        report = self.reports.get(endpoint)
        if report is not None:
            brokers = set(report.brokers) | {broker} if serves else set(report.brokers) - {broker}
            self.reports[endpoint] = ContainerReport(report.endpoint, report.admin_address, tuple(sorted(brokers)),
                                                     report.shared, report.at_ms)

    def _live(self) -> dict[str, ContainerReport]:
        now = self._controller.clock.monotonic_ms()
        return {e: r for e, r in self.reports.items() if now - r.at_ms <= LIVE_MS}

    def listing(self) -> tuple[dict, list[dict]]:
        now = self._controller.clock.monotonic_ms()
        return (self._controller.machine.reassignments.to_json(),
                [r.to_json(now) for _, r in sorted(self.reports.items())])

    # ---- operator calls

    async def start(self, broker: str, to: str, execute: bool) -> Move:
        """The move of ``broker`` to the container at ``to`` as planned, committed when
        ``execute``.  Raises :class:`MoveRefused` (why it cannot start) or :class:`NotCommitted`."""
        async with self._lock:
            self._check_leader()
            now = self._controller.clock.now_ms()
            holders = sorted((r for r in self.reports.values() if broker in r.brokers), key=lambda r: -r.at_ms)
            if not holders:
                raise MoveRefused(f"no container has reported serving {broker} to this controller")
            source = holders[0]
            if broker not in source.shared:
                raise MoveRefused(f"{broker} on {source.endpoint} is not on shared storage (sharedStorage = true): "
                                  "it cannot move without copying")
            hosts = {e: frozenset(r.brokers) for e, r in self._live().items()}
            hosts[source.endpoint] = frozenset(source.brokers)
            applied = self._controller.machine.reassignments
            epochs = [source.shared[broker][0]] + [m.epoch for m in applied.finished if m.broker == broker]
            decided = moves.start(broker, source.endpoint, to, max(epochs), hosts, applied.moving(), now,
                                  source.shared[broker][1])
            await self._check_store(decided.move)
            if not execute:
                return decided.move
            await self._commit(decided.move)
        labelled(BROKER_MOVES, "started").inc()
        log.warning("move of %s from %s to %s committed at ownership epoch %d", broker, source.endpoint, to,
                    decided.move.epoch)
        self._carry_out(decided.move, decided.actions)
        return decided.move

    async def _check_store(self, move: Move) -> None:
        """The target sees the source's store and it takes a durable atomic rename (docs/reassign.md)."""
        stub = rpb_grpc.ReassignServiceStub(self._channel(self.reports[move.target].admin_address))
        try:
            await stub.CheckStore(rpb.CheckStoreRequest(broker_name=move.broker, broker_entry_json=move.entry,
                                                        owner=move.source), timeout=CHECK_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            raise MoveRefused(f"{move.target} cannot take the store over: {exc.details()}" if exc.code() in (
                grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT) else
                f"{move.target} did not answer the storage check: {exc.code().name}") from None

    async def cancel(self, broker: str) -> tuple[Move, str]:
        """(the move after the cancel, why it was refused or "")."""
        async with self._lock:
            self._check_leader()
            move = self._controller.machine.reassignments.active.get(broker)
            if move is None:
                finished = [m for m in self._controller.machine.reassignments.finished if m.broker == broker]
                if finished:
                    return finished[-1], f"the move of {broker} already ended ({finished[-1].step.value})"
                raise MoveRefused(f"{broker} has no move in progress")
            decided = moves.cancel(move, self._controller.clock.now_ms())
            if decided.refused:
                return move, decided.refused
            await self._commit(decided.move)
        self._carry_out(decided.move, decided.actions)
        return decided.move, ""

    # ---- the driver

    async def _drive(self) -> None:
        if not self._controller.machine.serving:
            return
        for move in list(self._controller.machine.reassignments.active.values()):
            async with self._lock:
                current = self._controller.machine.reassignments.active.get(move.broker)
                if current is None or not self._controller.machine.serving:
                    continue
                decided = moves.tick(current, self.settings, self._controller.clock.now_ms())
                if decided.move != current:
                    await self._commit(decided.move)
                    log.warning("move of %s: %s -> %s (%s)", current.broker, current.step.value, decided.move.step.value,
                                decided.move.why)
                    current = decided.move
            self._carry_out(current, moves.resume(current))

    def _carry_out(self, move: Move, actions) -> None:
        for action in actions:
            key = (move.broker, move.epoch, move.step, type(action).__name__)
            if key in self._inflight:
                continue
            self._inflight.add(key)
            task = asyncio.get_running_loop().create_task(self._act(move, action, key))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _act(self, move: Move, action, key: tuple) -> None:
        try:
            if isinstance(action, moves.Finished):
                self._finished(move, action)
                return
            report = await self._call(move, action)
            if report is not None:
                await self._decide(move, report)
        except (NotCommitted, MoveRefused) as exc:
            log.info("move of %s: %s", move.broker, exc)
            await asyncio.sleep(RETRY_PAUSE_S)
        except grpc.aio.AioRpcError as exc:
            log.info("move of %s: %s to the container failed: %s %s", move.broker, type(action).__name__,
                     exc.code().name, exc.details())
            await asyncio.sleep(RETRY_PAUSE_S)
        finally:
            self._inflight.discard(key)

    async def _call(self, move: Move, action):
        """Carry ``action`` out; the report to decide on (a function of the applied move), or None."""
        if isinstance(action, moves.Flip):
            return lambda current, now: moves.target_serving(current, now)
        container = self.reports.get(action.container)
        if container is None:
            raise MoveRefused(f"{action.container} has not reported to this controller")
        stub = rpb_grpc.ReassignServiceStub(self._channel(container.admin_address))
        if isinstance(action, moves.AskRelease):
            reply = await stub.Release(rpb.ReleaseRequest(broker_name=move.broker, epoch=action.epoch,
                                                          target_endpoint=move.target),
                                       timeout=self.settings.release_timeout_ms / 1000)
            self._serves(move.source, move.broker, False)
            return lambda current, now: moves.source_released(current, reply.sealed_end, now, reply.broker_entry_json)
        if isinstance(action, moves.AskResume):
            await stub.Resume(rpb.ResumeRequest(broker_name=move.broker, epoch=action.epoch,
                                                broker_entry_json=move.entry), timeout=self.settings.open_timeout_ms / 1000)
            return None
        opening = rpb.OpenRequest(broker_name=move.broker, epoch=action.epoch, broker_entry_json=move.entry)
        if isinstance(action, moves.AskOpen) and action.handed_end is not None:
            opening.handed_end = action.handed_end
        try:
            await stub.Open(opening, timeout=self.settings.open_timeout_ms / 1000)
        except grpc.aio.AioRpcError as exc:
            if isinstance(action, moves.AskOpen) and exc.code() in (grpc.StatusCode.FAILED_PRECONDITION,
                                                                    grpc.StatusCode.INVALID_ARGUMENT):
                why = f"{exc.code().name}: {exc.details()}"
                return lambda current, now: moves.target_failed(current, why, now)
            raise
        self._serves(action.container, move.broker, True)
        if isinstance(action, moves.AskOpen):
            return lambda current, now: moves.target_opened(current, now)
        return lambda current, now: moves.source_took_back(current, now)  # AskTakeBack

    async def _decide(self, move: Move, report) -> None:
        async with self._lock:
            self._check_leader()
            current = self._controller.machine.reassignments.active.get(move.broker)
            if current is None or current.epoch != move.epoch:
                return  # the move ended or another began meanwhile
            decided = report(current, self._controller.clock.now_ms())
            if decided.move == current:
                return
            await self._commit(decided.move)
        log.warning("move of %s: %s -> %s%s", move.broker, current.step.value, decided.move.step.value,
                    f" ({decided.move.why})" if decided.move.why and decided.move.why != current.why else "")
        self._carry_out(decided.move, decided.actions)

    def _finished(self, move: Move, finished: moves.Finished) -> None:
        outcome = {Step.DONE: "completed", Step.ROLLED_BACK: "rolled_back", Step.CANCELLED: "cancelled"}[finished.step]
        labelled(BROKER_MOVES, outcome).inc()
        labelled(BROKER_MOVE_SECONDS, outcome).observe(finished.duration_ms / 1000)
        log.warning("move of %s from %s to %s ended %s in %d ms%s", move.broker, move.source, move.target,
                    finished.step.value, finished.duration_ms, f" ({move.why})" if move.why else "")

    # ---- commits

    def _check_leader(self) -> None:
        if not self._controller.machine.serving:
            raise NotCommitted(f"NOT_LEADER: {self._controller.not_leader().remark}")

    async def _commit(self, move: Move) -> None:
        timeout_ms = self._controller.config.request_timeout_ms
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                await self._controller.driver.propose([encode_event(MoveRecord(move))])
        except RaftError as exc:
            raise NotCommitted(f"NOT_COMMITTED: {exc}") from None
        except TimeoutError:
            raise NotCommitted(f"NOT_COMMITTED: not applied within controllerRequestTimeoutMills ({timeout_ms} ms); "
                               "it may still commit") from None

    def _channel(self, address: str) -> grpc.aio.Channel:
        if address not in self._channels:
            self._channels[address] = internal_channel(address)
        return self._channels[address]

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for channel in self._channels.values():
            await channel.close()


def move_json(move: Move) -> str:
    body = move_to_json(move)
    body.pop("entry", None)  # the broker's keys stay between the controller and the containers
    body["serving"] = move.serving
    return json.dumps(body, sort_keys=True)


def shared_of(request) -> dict:
    return {b.name: (b.ownership_epoch, b.entry_json) for b in request.shared}

