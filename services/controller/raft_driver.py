"""The asyncio driver around one ``RaftNode``: ticks, persistence, transport, apply.

Rules (STYLE.md "durability order"):
- One task owns the node.  Ticks, peer messages and proposals reach it through a bounded
  inbox; nothing else touches the node.
- For each Ready: save hard state, entries and snapshot durably (``RaftStorage.save`` fsyncs,
  in a worker thread), then send the messages, then restore/apply, then ``advance``.
  While a save is in flight the loop keeps ticking and taking inputs (their messages wait
  for the next Ready), and sends only the leader heartbeats the core releases early
  (``heartbeats_before_persist``): a slow fsync must not silence a healthy leader.
- Time the loop could not observe does not count: after a stall (a long GC, a busy
  machine) one tick is taken, not a burst, so a follower does not campaign and a leader
  does not step down only because its own process was not scheduled.
- Snapshots are encoded off the event loop: the machine hands a detached copy's encoder,
  a worker thread runs it, and the result comes back through the inbox to ``compact``.
  A compaction is due after ``snapshot_every_entries`` applied entries *and* at least as
  many applied bytes as the last snapshot had, so rewriting the log file costs amortised
  O(1) per byte appended however large the tables grow.  Members start counting at
  different points (``compaction_stagger_entries``, set from the member's place among its
  peers) so that they do not all encode a snapshot at the same index: on a small machine
  three simultaneous encodings starved a leader's loop long enough to depose it.
- A proposal's future resolves only when an entry at its index is applied: with the index
  when the entry is the one proposed (same term), with ``ProposalLost`` when another entry
  took its place; every pending future fails with ``NotLeader`` when this node stops
  being leader.
- Time comes from the ``Clock`` (monotonic); randomness from the seeded rng passed in.
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
from services.controller.heap import FREEZE_EVERY_ENTRIES, collect_and_freeze
from services.controller.shutdown import cancel_and_wait

log = logging.getLogger(__name__)


class ProposalLost(RaftError):
    """The proposed entry was replaced by another leader's entry at the same index."""

    def __init__(self, index: int) -> None:
        super().__init__(f"proposal at index {index} was overwritten by a new leader")
        self.index = index


class StateMachine(Protocol):
    def apply_entry(self, entry: Entry) -> None: ...

    def snapshot_encoder(self) -> Callable[[], bytes]:
        """A function returning the snapshot of the state now, safe to run in another thread."""

    def restore(self, data: bytes) -> None: ...

    def role_changed(self, soft: SoftState, term: int) -> None: ...


class Storage(Protocol):
    def save_ready(self, ready: Ready) -> None: ...


@dataclass(frozen=True)
class DriverLimits:
    tick_ms: int
    inbox_capacity: int
    snapshot_every_entries: int
    compaction_stagger_entries: int = 0  # the first compaction waits this many more entries


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
        self._compacting: asyncio.Task | None = None
        self._applied_since_compaction = -limits.compaction_stagger_entries
        self._applied_bytes_since_compaction = 0
        self._last_snapshot_bytes = 0
        self._applied_since_freeze = 0
        self._next_tick_ms = 0
        self._soft = SoftState(None, Role.FOLLOWER)
        self.stalls = 0  # times the loop found itself more than a tick late

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
        """Cancel and await the loop and any snapshot encoding; a caller's own cancel propagates."""
        tasks = [t for t in (self._task, self._compacting) if t is not None]
        self._task = self._compacting = None
        try:
            await cancel_and_wait(tasks)
        finally:
            self._fail_pending(NotLeader(None))

    # -- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        self._next_tick_ms = self._clock.monotonic_ms() + self._limits.tick_ms
        await self._drain_ready()
        while True:
            self._take_inputs(await self._next_input(self._until_tick_s()))
            self._tick_if_due()
            await self._drain_ready()

    def _until_tick_s(self) -> float:
        return max(0, self._next_tick_ms - self._clock.monotonic_ms()) / 1000

    def _take_inputs(self, item) -> None:
        if item is not None:
            self._handle(item)
        while not self._inbox.empty():
            self._handle(self._inbox.get_nowait())

    def _tick_if_due(self) -> None:
        now, tick_ms = self._clock.monotonic_ms(), self._limits.tick_ms
        if now < self._next_tick_ms:
            return
        late_ms = now - self._next_tick_ms
        self.node.tick()
        self._next_tick_ms += tick_ms
        if late_ms >= tick_ms:  # a stall: what we could not observe does not count as silence
            self.stalls += 1
            self._next_tick_ms = now + tick_ms
            if late_ms >= 3 * tick_ms:
                log.warning("raft loop of node %s stalled %d ms (ticks skipped, not replayed)",
                            self.node.id, late_ms)

    async def _next_input(self, timeout_s: float, persisting: asyncio.Future | None = None):
        """The next inbox item, or None when ``timeout_s`` passes (or ``persisting`` ends) first.

        Not ``asyncio.wait_for``: on Python 3.11 it returns the item and swallows a
        cancellation that lands in the same loop iteration as a peer message (bpo-42130),
        so ``stop()`` waited forever on a loop that kept running.  ``asyncio.timeout``
        re-raises a cancellation that is not its own; a timeout that races the item leaves
        the item in the queue (``Queue.get`` takes it only when it resumes).
        """
        if persisting is None:
            try:
                async with asyncio.timeout(timeout_s):
                    return await self._inbox.get()
            except TimeoutError:
                return None
        getter = asyncio.ensure_future(self._inbox.get())
        try:
            done, _ = await asyncio.wait({getter, persisting}, timeout=timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():
                getter.cancel()  # not resumed yet: the item (if any) stays in the queue
        return getter.result() if getter in done else None

    def _handle(self, item) -> None:
        kind, payload, future = item
        if kind == "step":
            self.node.step(payload)
        elif kind == "compact":
            self._compacted(*payload)
        else:
            self._handle_proposal(payload, future)

    def _handle_proposal(self, payload: list[bytes], future: asyncio.Future) -> None:
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
            if self._applied_since_freeze >= FREEZE_EVERY_ENTRIES:
                self._applied_since_freeze = 0
                collect_and_freeze()

    async def _persist(self, ready: Ready) -> None:
        """Save ``ready`` in a worker thread; meanwhile keep time, take inputs, send early heartbeats."""
        if ready.hard_state is None and not ready.entries and ready.snapshot is None and ready.compaction is None:
            return
        saving = asyncio.ensure_future(asyncio.to_thread(self._storage.save_ready, ready))
        while not saving.done():
            self._take_inputs(await self._next_input(self._until_tick_s(), saving))
            self._tick_if_due()
            early = self.node.heartbeats_before_persist()
            if early:
                self._send(early)
        saving.result()

    def _apply(self, ready: Ready) -> None:
        if ready.soft_state is not None and ready.soft_state != self._soft:
            was_leader = self._soft.role == Role.LEADER
            log.info("raft node %s: %s -> %s in term %s, leader %s", self.node.id, self._soft.role.name,
                     ready.soft_state.role.name, self.node.term, ready.soft_state.leader_id)
            self._soft = ready.soft_state
            if was_leader and ready.soft_state.role != Role.LEADER:
                self._fail_pending(NotLeader(ready.soft_state.leader_id))
            self._machine.role_changed(ready.soft_state, self.node.term)
        if ready.snapshot is not None:
            self._machine.restore(ready.snapshot.data)
            collect_and_freeze()
        for entry in ready.committed_entries:
            self._machine.apply_entry(entry)
            self._applied_since_compaction += 1
            self._applied_bytes_since_compaction += len(entry.data)
            self._applied_since_freeze += 1
            pending = self._pending.pop(entry.index, None)
            if pending is not None and not pending[1].done():
                term, future = pending
                if term == entry.term:
                    future.set_result(entry.index)
                else:
                    future.set_exception(ProposalLost(entry.index))

    # -- compaction -------------------------------------------------------------------------

    def _maybe_compact(self) -> None:
        if self._compacting is not None \
                or self._applied_since_compaction < self._limits.snapshot_every_entries \
                or self._applied_bytes_since_compaction < self._last_snapshot_bytes:
            return
        self._applied_since_compaction = self._applied_bytes_since_compaction = 0
        index, encode = self.node.applied_index, self._machine.snapshot_encoder()
        self._compacting = asyncio.get_running_loop().create_task(self._encode_snapshot(index, encode),
                                                                  name=f"raft-{self.node.id}-snapshot")
        self._compacting.add_done_callback(self._encoding_ended)

    def _encoding_ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:  # a bug; log it, try again later
            log.error("raft node %s: snapshot encoding failed", self.node.id, exc_info=task.exception())
            if self._compacting is task:
                self._compacting = None

    async def _encode_snapshot(self, index: int, encode: Callable[[], bytes]) -> None:
        started = self._clock.monotonic_ms()
        data = await asyncio.to_thread(encode)
        log.info("raft node %s: snapshot at index %s, %d bytes, encoded in %d ms", self.node.id, index,
                 len(data), self._clock.monotonic_ms() - started)
        await self._inbox.put(("compact", (index, data), None))

    def _compacted(self, index: int, data: bytes) -> None:
        self._compacting = None
        self._last_snapshot_bytes = len(data)
        self.node.compact(index, data)
        collect_and_freeze()  # keep full GCs short (services/controller/heap.py)

    def _fail_pending(self, exc: Exception) -> None:
        pending, self._pending = self._pending, {}
        for _, future in pending.values():
            if not future.done():
                future.set_exception(exc)

