"""Pop log records: what the broker appends to ``rmq_sys_REVIVE_LOG`` for every pop decision.

Rules:
- Five records: :class:`PopRecord` (deliveries from one queue and how far the pop cursor
  moved; offsets in ``[from_offset, to_offset)`` that are not entries were filtered out and
  count as consumed), :class:`ChangeRecord` (new seq and deadline of one in-flight entry),
  :class:`AckRecord`, :class:`SkipRecord` (everything below an offset is consumed: an
  admin offset write, forward only) and :class:`ResetRecord` (an operator's reset of the
  queue to an offset, forward or back: ``relaymq admin reset-offset-by-time``).  They are applied by
  :class:`scheduler.pop.table.PopTable` idempotently, so replaying any suffix of the log over
  a snapshot gives the same state.
- Bodies are compact JSON (metadata.compact_json: orjson); :func:`decode_record` returns None for a body it does not know
  (a record from a newer version is skipped, not fatal).
- :func:`encode_records` writes a run of acks of one queue as one body (``"t": "acks"``):
  an AckMessage of 32 handles is one record, not 32 (one record is also all-or-nothing in a
  crash).  Consecutive skips share one body (``"t": "skips"``) of at most
  ``SKIPS_PER_BODY``, so an admin write of many queues stays within a put's record count.
  :func:`decode_records` gives back the single records, in order.
"""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple, Sequence, Union

from metadata import compact_json
from metadata.frozen_values import quick_init

REVIVE_TOPIC = "rmq_sys_REVIVE_LOG"
SKIPS_PER_BODY = 1000  # a body of 1000 skips of the longest names is about 400 KB, under maxMessageSize


class QueueKey(NamedTuple):
    """A consumer group's queue.  A named tuple, not a dataclass: it keys every pop table
    lookup, and a frozen dataclass hashes through a Python ``__hash__`` (a dict lookup by one
    cost 0.13 us, by a named tuple 0.05)."""

    group: str
    topic: str  # the stored topic (a %RETRY% topic for retried messages)
    queue_id: int


@quick_init
@dataclass(frozen=True)
class InFlight:
    offset: int
    seq: int
    attempt: int  # delivery attempt of the current delivery, 1-based
    deadline_ms: int  # wall clock
    max_attempts: int
    commit_offset: int  # where the record is in the commit log (to read it back)
    fifo: bool = False
    message_group: str = ""

    def to_json(self) -> tuple:
        """The fields in order, one tuple made in C (a snapshot of 160,000 in-flight entries: 48
        ms on the event loop, against 95 for a list built in Python); :meth:`from_json` reads it."""
        return in_flight_json(self)

    @classmethod
    def from_json(cls, value: list) -> "InFlight":
        o, s, a, d, m, c, f, g = value
        return cls(int(o), int(s), int(a), int(d), int(m), int(c), bool(f), str(g))


# an entry's fields in order (InFlight.to_json); a table snapshot maps it over every entry
in_flight_json = attrgetter("offset", "seq", "attempt", "deadline_ms", "max_attempts", "commit_offset", "fifo",
                               "message_group")


@quick_init
@dataclass(frozen=True)
class PopRecord:
    key: QueueKey
    from_offset: int
    to_offset: int
    entries: tuple[InFlight, ...]


@quick_init
@dataclass(frozen=True)
class ChangeRecord:
    key: QueueKey
    offset: int
    seq: int
    deadline_ms: int


@quick_init
@dataclass(frozen=True)
class AckRecord:
    key: QueueKey
    offset: int


@dataclass(frozen=True)
class SkipRecord:
    """Every offset below ``offset`` is consumed (in flight or not)."""

    key: QueueKey
    offset: int


@dataclass(frozen=True)
class ResetRecord:
    """The queue starts over at ``offset``: nothing in flight, nothing acked beyond it.  ``seq``
    (from the same sequence as delivery seqs) orders it against deliveries: a pop record
    whose entries are older than the reset was decided before it and is ignored."""

    key: QueueKey
    offset: int
    seq: int


Record = Union[PopRecord, ChangeRecord, AckRecord, SkipRecord, ResetRecord]


def encode_record(record: Record) -> bytes:
    key = [record.key.group, record.key.topic, record.key.queue_id]
    if isinstance(record, PopRecord):
        body = {"t": "pop", "k": key, "f": record.from_offset, "to": record.to_offset,
                "e": [entry.to_json() for entry in record.entries]}
    elif isinstance(record, ChangeRecord):
        body = {"t": "chg", "k": key, "o": record.offset, "s": record.seq, "d": record.deadline_ms}
    elif isinstance(record, SkipRecord):
        body = {"t": "skip", "k": key, "o": record.offset}
    elif isinstance(record, ResetRecord):
        body = {"t": "reset", "k": key, "o": record.offset, "s": record.seq}
    else:
        body = {"t": "ack", "k": key, "o": record.offset}
    return compact_json.dumps(body)


def encode_records(records: Sequence[Record]) -> list[bytes]:
    """Bodies for ``records`` in order; consecutive acks of one queue share one body."""
    bodies: list[bytes] = []
    index = 0
    while index < len(records):
        record = records[index]
        end = index + 1
        if isinstance(record, AckRecord):
            while end < len(records) and isinstance(records[end], AckRecord) and records[end].key == record.key:
                end += 1
        elif isinstance(record, SkipRecord):
            while end < len(records) and end - index < SKIPS_PER_BODY and isinstance(records[end], SkipRecord):
                end += 1
        if end - index == 1:
            bodies.append(encode_record(record))
        elif isinstance(record, SkipRecord):
            skips = [[skip.key.group, skip.key.topic, skip.key.queue_id, skip.offset] for skip in records[index:end]]
            bodies.append(compact_json.dumps({"t": "skips", "s": skips}))
        else:
            key = [record.key.group, record.key.topic, record.key.queue_id]
            offsets = [ack.offset for ack in records[index:end]]
            bodies.append(compact_json.dumps({"t": "acks", "k": key, "os": offsets}))
        index = end
    return bodies


def decode_records(body: bytes) -> tuple[Record, ...]:
    """The records of one body (several for ``"acks"``); () for a body we do not know."""
    try:
        value = compact_json.loads(body)
        if isinstance(value, dict) and value.get("t") == "acks":
            key = QueueKey(str(value["k"][0]), str(value["k"][1]), int(value["k"][2]))
            return tuple(AckRecord(key, int(offset)) for offset in value["os"])
        if isinstance(value, dict) and value.get("t") == "skips":
            return tuple(SkipRecord(QueueKey(str(g), str(t), int(q)), int(o)) for g, t, q, o in value["s"])
    except (ValueError, KeyError, TypeError, IndexError):
        return ()
    record = _record(value)
    return () if record is None else (record,)


def decode_record(body: bytes) -> Record | None:
    try:
        value = compact_json.loads(body)
    except ValueError:
        return None
    return _record(value)


def _record(value) -> Record | None:
    try:
        key = QueueKey(str(value["k"][0]), str(value["k"][1]), int(value["k"][2]))
        kind = value["t"]
        if kind == "pop":
            entries = tuple(InFlight.from_json(e) for e in value["e"])
            return PopRecord(key, int(value["f"]), int(value["to"]), entries)
        if kind == "chg":
            return ChangeRecord(key, int(value["o"]), int(value["s"]), int(value["d"]))
        if kind == "ack":
            return AckRecord(key, int(value["o"]))
        if kind == "skip":
            return SkipRecord(key, int(value["o"]))
        if kind == "reset":
            return ResetRecord(key, int(value["o"]), int(value["s"]))
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    return None
