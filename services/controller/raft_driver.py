"""The asyncio driver around one ``RaftNode``: ticks, persistence, transport, apply.

Rules (STYLE.md "durability order"):
- One task owns the node.  Ticks, peer messages and proposals reach it through a bounded
  inbox; nothing else touches the node, so a Ready is always persisted, sent, applied and
  advanced before the node sees the next input.
- For each Ready: save hard state, entries and snapshot durably (``RaftStorage.save`` fsyncs,
  in a worker thread), then send the messages, then restore/apply, then ``advance``.
- A proposal's future resolves only when an entry at its index is applied: with the index
  when the entry is the one proposed (same term), with ``ProposalLost`` when another entry
  took its place; every pending future fails with ``NotLeader`` when this node stops
  being leader.
- Time comes from the ``Clock`` (monotonic); randomness from the seeded rng passed in.
- The state machine is compacted into a snapshot every ``snapshot_every_entries`` applied.
"""
from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import Callable, Protocol

from ha.raft.errors import NotLeader, RaftError
from ha.raft.node import RaftNode
from ha.raft.types import Entry, Message, RaftConfig, Ready, Role, SoftState
from scheduler.clock import Clock

log = logging.getLogger(__name__)


class ProposalLost(RaftError):
    """The proposed entry was replaced by another leader's entry at the same index."""

    def __init__(self, index: int) -> None:
        super().__init__(f"proposal at index {index} was overwritten by a new leader")
        self.index = index


class StateMachine(Protocol):
    def apply_entry(self, entry: Entry) -> None: ...

    def snapshot(self) -> bytes: ...

    def restore(self, data: bytes) -> None: ...

    def role_changed(self, soft: SoftState, term: int) -> None: ...


class Storage(Protocol):
    def save_ready(self, ready: Ready) -> None: ...


@dataclass(frozen=True)
class DriverLimits:
    tick_ms: int
    inbox_capacity: int
    snapshot_every_entries: int


class RaftDriver:
    def __init__(self, node: RaftNode, storage, send: Callable[[tuple[Message, ...]], None],
                 machine: StateMachine, clock: Clock, limits: DriverLimits) -> None:
        self.node = node
        self._storage = storage
        self._send = send
        self._machine = machine
        self._clock = clock
        self._limits = limits
        self._inbox: asyncio.Queue = asyncio.Queue(maxsize=limits.inbox_capacity)
        self._pending: dict[int, tuple[int, asyncio.Future]] = {}
        self._task: asyncio.Task | None = None
        self._applied_since_compaction = 0
        self._soft = SoftState(None, Role.FOLLOWER)

    @classmethod
    def create(cls, config: RaftConfig, seed: int, recovered, storage, send, machine, clock, limits) -> "RaftDriver":
        return cls(RaftNode(config, random.Random(seed), recovered), storage, send, machine, clock, limits)

    # -- inputs (any task) ------------------------------------------------------------------

    def deliver(self, message: Message) -> None:
        """A peer's message; dropped when the inbox is full (Raft tolerates loss)."""
        try:
            self._inbox.put_nowait(("step", message, None))
        except asyncio.QueueFull:
            log.warning("raft inbox full: dropping %s from %s", message.kind.name, message.src)

    async def propose(self, payloads: list[bytes]) -> list[int]:
        """Append ``payloads``; resolve once each is applied.  Raises NotLeader/ProposalLost."""
        future = asyncio.get_running_loop().create_future()
        await self._inbox.put(("propose", payloads, future))
        entry_futures = await future
        return list(await asyncio.gather(*entry_futures))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"raft-{self.node.id}")
        self._task.add_done_callback(self._ended)
        self.failed = asyncio.get_running_loop().create_future()

    def _ended(self, task: asyncio.Task) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:  # a bug: the member must not limp on without its Raft loop
            log.critical("raft loop of node %s crashed", self.node.id, exc_info=error)
            self._fail_pending(NotLeader(None))
            if not self.failed.done():
                self.failed.set_exception(error)

    async def stop(self) -> None:
        task, self._task = self._task, None
        try:
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    if asyncio.current_task().cancelling():
                        raise  # our caller is cancelled too (a deadline): not ours to swallow
        finally:
            self._fail_pending(NotLeader(None))

    # -- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        next_tick = self._clock.monotonic_ms() + self._limits.tick_ms
        await self._drain_ready()
        while True:
            item = await self._next_input(max(0, next_tick - self._clock.monotonic_ms()) / 1000)
            if item is not None:
                self._handle(item)
                while not self._inbox.empty():
                    self._handle(self._inbox.get_nowait())
            now = self._clock.monotonic_ms()
            while now >= next_tick:
                self.node.tick()
                next_tick += self._limits.tick_ms
                if now - next_tick > 10 * self._limits.tick_ms:  # stalled: don't burst ticks
                    next_tick = now + self._limits.tick_ms
            await self._drain_ready()

    async def _next_input(self, timeout_s: float):
        """The next inbox item, or None when ``timeout_s`` passes first.

        Not ``asyncio.wait_for``: on Python 3.11 it returns the item and swallows a
        cancellation that lands in the same loop iteration as a peer message (bpo-42130),
        so ``stop()`` waited forever on a loop that kept running.  ``asyncio.timeout``
        re-raises a cancellation that is not its own; a timeout that races the item leaves
        the item in the queue (``Queue.get`` takes it only when it resumes).
        """
        try:
            async with asyncio.timeout(timeout_s):
                return await self._inbox.get()
        except TimeoutError:
            return None

    def _handle(self, item) -> None:
        kind, payload, future = item
        if kind == "step":
            self.node.step(payload)
            return
        futures = []
        try:
            for data in payload:
                index = self.node.propose(data)
                entry_future = asyncio.get_running_loop().create_future()
                self._pending[index] = (self.node.term, entry_future)
                futures.append(entry_future)
        except RaftError as exc:
            for entry_future in futures:
                entry_future.set_exception(exc)
                entry_future.exception()  # retrieved: the caller sees exc itself
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(futures)

    async def _drain_ready(self) -> None:
        while self.node.has_ready():
            ready = self.node.ready()
            await self._persist(ready)
            if ready.messages:
                self._send(ready.messages)
            self._apply(ready)
            self.node.advance(ready)
            self._maybe_compact()

    async def _persist(self, ready: Ready) -> None:
        if ready.hard_state is None and not ready.entries and ready.snapshot is None and ready.compaction is None:
            return
        await asyncio.to_thread(self._storage.save_ready, ready)

    def _apply(self, ready: Ready) -> None:
        if ready.soft_state is not None and ready.soft_state != self._soft:
            was_leader = self._soft.role == Role.LEADER
            self._soft = ready.soft_state
            if was_leader and ready.soft_state.role != Role.LEADER:
                self._fail_pending(NotLeader(ready.soft_state.leader_id))
            self._machine.role_changed(ready.soft_state, self.node.term)
        if ready.snapshot is not None:
            self._machine.restore(ready.snapshot.data)
        for entry in ready.committed_entries:
            self._machine.apply_entry(entry)
            self._applied_since_compaction += 1
            pending = self._pending.pop(entry.index, None)
            if pending is not None and not pending[1].done():
                term, future = pending
                if term == entry.term:
                    future.set_result(entry.index)
                else:
                    future.set_exception(ProposalLost(entry.index))

    def _maybe_compact(self) -> None:
        if self._applied_since_compaction < self._limits.snapshot_every_entries:
            return
        self._applied_since_compaction = 0
        self.node.compact(self.node.applied_index, self._machine.snapshot())

    def _fail_pending(self, exc: Exception) -> None:
        pending, self._pending = self._pending, {}
        for _, future in pending.values():
            if not future.done():
                future.set_exception(exc)
