"""The pop state of every (group, stored topic, queue): cursors, in-flight entries, acks.

Rules (invariants asserted in :meth:`QueueState.check`):
- ``commit <= pop_offset``; every offset in ``[commit, pop_offset)`` is either in flight or
  acked; ``commit`` is the first offset not acked: everything before it is consumed, and it is
  the consumer offset written to consumerOffset.json.
- Acked is final: a pop record for an acked offset (or one below ``commit``) is ignored; an
  in-flight entry is only replaced by one with a larger seq.  A skip only ever raises
  ``commit`` (everything below its offset becomes consumed, in flight or not, and the pop
  cursor moves up to it if behind); a skip at or below ``commit`` changes nothing.  These rules make
  :meth:`PopTable.apply` idempotent and order-tolerant, which is what lets the broker replay
  any suffix of the pop log over a snapshot.
- A reset (an operator moving the queue to an offset, forward or back) replaces the queue's
  state: commit and pop cursor at its offset, nothing in flight or acked.  It is ordered by
  its ``seq`` (same sequence as deliveries): a reset at or below the queue's last reset seq
  is ignored (replays are idempotent), and a pop record decided before it (an entry seq
  below the reset's, or starting past the pop cursor: a gap only a rewind leaves) is
  ignored, so a replay of the log over a snapshot gives the state the live process had.
- ``seq`` values are unique and grow: :meth:`PopTable.next_seq` never returns a value at or
  below one seen (``now_ms * 1000`` seeds it so that a restart after a lost log tail does not
  reuse the seq of a handle already given out).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Iterator, Sequence

from metadata.frozen_values import quick_init
from scheduler.pop.expiry import ExpiryIndex
from scheduler.pop.receipt import ReceiptHandle
from scheduler.pop.records import (AckRecord, ChangeRecord, InFlight, PopRecord, QueueKey, Record, ResetRecord,
                                   SkipRecord, in_flight_json)


class HandleCheck(str, Enum):
    CURRENT = "CURRENT"  # the handle of the latest delivery of an in-flight message
    ALREADY_ACKED = "ALREADY_ACKED"  # consumed already: an ack is OK, a change is not
    STALE = "STALE"  # an older delivery's handle, or unknown: INVALID_RECEIPT_HANDLE


@quick_init
@dataclass(frozen=True)
class OffsetCommit:
    topic: str
    group: str
    queue_id: int
    offset: int


@dataclass
class QueueState:
    commit: int
    pop_offset: int
    inflight: dict[int, InFlight] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    reset_seq: int = 0  # seq of the last reset applied (0: never reset)

    def check(self) -> None:
        """Every invariant, over every entry: O(in flight + acked) (a loaded snapshot, tests)."""
        assert self.commit <= self.pop_offset, (self.commit, self.pop_offset)
        assert all(self.commit <= o < self.pop_offset for o in self.inflight)
        assert not (set(self.inflight) & self.acked)

    def check_changed(self, offsets: Sequence[int]) -> None:
        """The invariants where ``offsets`` just changed, and the queue's bounds: O(changed).

        Why not :meth:`check` after every change: it walks every in-flight entry, so with
        thousands in flight (popInflightMaxPerQueue allows 20,000) each receive and each ack
        batch paid for all of them: an ack cost 1.6 us a message with 128 in flight, 7.3 with
        5,000 and 26 with 20,000 (bench/bench_pop_table.py).  Entries are kept in offset order
        (new ones come from the pop cursor, which only grows; a change replaces one in place; a
        skip filters in order; a reset starts empty), so the first and the last bound them all.
        """
        assert self.commit <= self.pop_offset, (self.commit, self.pop_offset)
        inflight, acked = self.inflight, self.acked
        if inflight:
            assert self.commit <= next(iter(inflight)) and next(reversed(inflight)) < self.pop_offset
        for offset in offsets:
            assert not (offset in inflight and offset in acked), offset

    def is_consumed(self, offset: int) -> bool:
        return offset < self.commit or offset in self.acked

    def advance_commit(self) -> bool:
        moved = False
        while self.commit < self.pop_offset and self.commit in self.acked:
            self.acked.discard(self.commit)
            self.commit += 1
            moved = True
        return moved

    @property
    def unacked(self) -> int:
        return len(self.inflight)


class PopTable:
    def __init__(self) -> None:
        self.queues: dict[QueueKey, QueueState] = {}
        self.last_seq = 0
        self.expiry = ExpiryIndex(self._in_flight_as, self._every_in_flight)
        self.changes = 0  # every call that may change the document counts: see signature()

    def signature(self) -> int:
        """Equal for two moments of this table with the same document in between (the count only
        grows, and every method that writes a queue state or the seq counts): a periodic snapshot
        of an idle broker need not take the document (160,000 in flight: 49 ms) nor write it."""
        return self.changes

    def _in_flight_as(self, key: QueueKey, entry: InFlight) -> bool:
        state = self.queues.get(key)
        return state is not None and state.inflight.get(entry.offset) is entry

    def _every_in_flight(self) -> Iterator[tuple[QueueKey, InFlight]]:
        for key, state in self.queues.items():
            for entry in state.inflight.values():
                yield key, entry

    def next_seq(self, now_ms: int) -> int:
        self.changes += 1
        self.last_seq = max(self.last_seq + 1, now_ms * 1000)
        return self.last_seq

    def get(self, key: QueueKey) -> QueueState | None:
        return self.queues.get(key)

    def ensure(self, key: QueueKey, init_offset: int) -> QueueState:
        state = self.queues.get(key)
        if state is None:
            state = self.queues[key] = QueueState(init_offset, init_offset)
            self.changes += 1
        return state

    def check_handle(self, group: str, handle: ReceiptHandle) -> HandleCheck:
        state = self.queues.get(QueueKey(group, handle.topic, handle.queue_id))
        if state is None:
            return HandleCheck.STALE
        entry = state.inflight.get(handle.offset)
        if entry is not None:
            return HandleCheck.CURRENT if entry.seq == handle.seq else HandleCheck.STALE
        if state.is_consumed(handle.offset) and handle.offset < state.pop_offset:
            return HandleCheck.ALREADY_ACKED
        return HandleCheck.STALE

    def apply(self, record: Record) -> list[OffsetCommit]:
        return self.apply_all((record,))

    def apply_all(self, records: Sequence[Record]) -> list[OffsetCommit]:
        """:meth:`apply` each record in order; the invariants of each queue touched are checked
        once, after the last (an ack of 32 handles checks its queue once, not 32 times)."""
        self.changes += 1
        commits: list[OffsetCommit] = []
        touched: dict[int, tuple[QueueState, list[int]]] = {}  # id -> (state, offsets changed)
        for record in records:
            state, moved = self._apply_one(record)
            if state is None:
                continue
            changed = touched.get(id(state))
            if changed is None:
                changed = touched[id(state)] = (state, [])
            kind = type(record)
            if kind is AckRecord:
                changed[1].append(record.offset)
            elif kind is PopRecord:
                changed[1].extend(entry.offset for entry in record.entries)
            if moved:
                key = record.key
                commits.append(OffsetCommit(key.topic, key.group, key.queue_id, state.commit))
        for state, offsets in touched.values():
            state.check_changed(offsets)
        return commits

    def _apply_one(self, record: Record) -> tuple[QueueState | None, bool]:
        """Apply without checking: the state changed (None if none did) and whether its commit moved."""
        if type(record) is AckRecord:  # the most applied, one per message acked: tested first
            state = self.queues.get(record.key)
            if state is None or state.is_consumed(record.offset) or record.offset >= state.pop_offset:
                return None, False
            state.inflight.pop(record.offset, None)
            state.acked.add(record.offset)
            return state, state.advance_commit()
        if isinstance(record, PopRecord):
            self.last_seq = max([self.last_seq] + [e.seq for e in record.entries])
            state = self.ensure(record.key, record.from_offset)
            moved = self._apply_pop(state, record)
            self.expiry.add(record.key, record.entries)  # those not kept in flight drop out when due
            return state, moved
        if isinstance(record, ChangeRecord):
            self.last_seq = max(self.last_seq, record.seq)
            state = self.queues.get(record.key)
            entry = state.inflight.get(record.offset) if state else None
            if entry is not None and entry.seq < record.seq:
                # a change keeps the attempt: the next delivery counts it
                changed = state.inflight[record.offset] = replace(entry, seq=record.seq, deadline_ms=record.deadline_ms)
                self.expiry.add(record.key, (changed,))
            return None, False
        if isinstance(record, SkipRecord):
            return self._apply_skip(record)
        assert isinstance(record, ResetRecord), f"not a pop-log record: {record!r}"
        return self._apply_reset(record)

    def _apply_skip(self, record: SkipRecord) -> tuple[QueueState | None, bool]:
        """O(in flight + acked) whatever the distance skipped (a PopRecord would ack one by one)."""
        state = self.queues.get(record.key)
        if state is None:
            return self.ensure(record.key, record.offset), True
        if record.offset <= state.commit:
            return None, False
        state.inflight = {offset: entry for offset, entry in state.inflight.items() if offset >= record.offset}
        state.acked = {offset for offset in state.acked if offset >= record.offset}
        state.commit = record.offset
        state.pop_offset = max(state.pop_offset, record.offset)
        state.advance_commit()
        return state, True

    def _apply_reset(self, record: ResetRecord) -> tuple[QueueState | None, bool]:
        self.last_seq = max(self.last_seq, record.seq)
        state = self.queues.get(record.key)
        if state is not None and record.seq <= state.reset_seq:
            return None, False
        moved = state is None or state.commit != record.offset
        state = self.queues[record.key] = QueueState(record.offset, record.offset, reset_seq=record.seq)
        return state, moved

    @staticmethod
    def _apply_pop(state: QueueState, record: PopRecord) -> bool:
        if state.reset_seq and (record.from_offset > state.pop_offset
                                or any(e.seq < state.reset_seq for e in record.entries)):
            return False  # decided before the queue was reset
        if record.to_offset > state.pop_offset:
            chosen = {e.offset for e in record.entries}
            for offset in range(max(state.pop_offset, record.from_offset), record.to_offset):
                if offset not in chosen:
                    state.acked.add(offset)
            state.pop_offset = record.to_offset
        for entry in record.entries:
            if state.is_consumed(entry.offset) or entry.offset >= state.pop_offset:
                continue
            current = state.inflight.get(entry.offset)
            if current is None or current.seq < entry.seq:
                state.inflight[entry.offset] = entry
        return state.advance_commit()

    def expired(self, now_ms: int, limit: int) -> list[tuple[QueueKey, InFlight]]:
        """Non-FIFO in-flight entries past their deadline, earliest first, at most ``limit``
        (scheduler.pop.expiry: O(expired), not O(in flight))."""
        return self.expiry.due(now_ms, limit)

    def items(self) -> Iterator[tuple[QueueKey, QueueState]]:
        return iter(list(self.queues.items()))

    def drop_group(self, group: str) -> None:
        for key in [k for k in self.queues if k.group == group]:
            del self.queues[key]
            self.changes += 1

    def to_document(self) -> dict[str, Any]:
        return document_of(self.capture())

    def capture(self) -> "PopCapture":
        """What the document holds now, in copies made by C calls (160,000 in flight: a few ms):
        :func:`document_of` turns it into the document later, on any thread, while this table
        moves on (entries and keys are immutable)."""
        queues = [(key, state.commit, state.pop_offset, state.reset_seq, set(state.acked), list(state.inflight.values()))
                  for key, state in self.queues.items()]
        return PopCapture(self.last_seq, queues)

    @classmethod
    def from_document(cls, document: Any) -> "PopTable":
        table = cls()
        table.last_seq = int(document.get("lastSeq", 0))
        for row in document.get("queues", []):
            state = QueueState(int(row["c"]), int(row["p"]), acked={int(o) for o in row["a"]},
                               reset_seq=int(row.get("r", 0)))
            for raw in row["i"]:
                entry = InFlight.from_json(raw)
                state.inflight[entry.offset] = entry
            state.check()
            table.queues[QueueKey(str(row["g"]), str(row["t"]), int(row["q"]))] = state
        table.expiry.rebuild()
        return table


ROW_SLICE = 8192  # in-flight entries turned into lists per C call: the GIL is let go between slices


@dataclass(frozen=True)
class PopCapture:
    last_seq: int
    queues: list  # (key, commit, pop offset, reset seq, acked, in-flight entries), copies


def document_of(capture: PopCapture) -> dict[str, Any]:
    """The table's document (popState.json's table part) from a capture: in a worker thread, a
    large table's rows are made a slice at a time, so the event loop gets the GIL in between."""
    rows = []
    for key, commit, pop_offset, reset_seq, acked, entries in capture.queues:
        flat: list = []
        for start in range(0, len(entries), ROW_SLICE):
            flat += map(in_flight_json, entries[start:start + ROW_SLICE])
        row = {"g": key.group, "t": key.topic, "q": key.queue_id, "c": commit, "p": pop_offset, "a": sorted(acked),
               "i": flat}
        if reset_seq:
            row["r"] = reset_seq
        rows.append(row)
    return {"lastSeq": capture.last_seq, "queues": rows}
