"""A compare-and-set write of consumer offsets: what the broker decides before any I/O.

This is the write side of ``relaymq offset-diff --apply`` for live replicas (admin RPC
``WriteConsumerOffsets``): a plan was made against one DataVersion of a master's offset
table, and is written only if the table is still at that version.

Rules, checked in this order; the first that fails decides and nothing is written:
- Compare-and-set: the table's current DataVersion (one that covers every commit so far)
  must equal the expected one, else :class:`Moved` (``MOVED_SINCE_PLAN``) with both versions.
- Every queue is checked before anything is written (all or nothing), and the first queue
  in request order that fails names the :class:`WriteRefusal`:
  - its topic exists on the broker (``TOPIC_NOT_FOUND``);
  - its queue id is below the topic's queue count, the larger of read and write queue nums
    (``QUEUE_NOT_FOUND``);
  - its offset is at most the queue's max offset, the next offset to be written
    (``OFFSET_BEYOND_MAX``).  Committing the max offset means "everything consumed"; a
    larger offset would silently skip messages that are not written yet, and the offset
    diff already flags such plans ``beyond_max`` (needs a human);
  - its offset is at least the queue's committed offset (``OFFSET_BEHIND_COMMITTED``):
    the write never moves a consumer backwards, like the safe merge it applies.  A reset
    backwards would have to undo acknowledged pop state, which is final by design
    (``scheduler.pop.table``); it is not what this write is for.
- Accepted: the new DataVersion is ``current.next_version(now_ms)`` (stateVersion kept,
  counter + 1), newer than the planned one, so slaves adopt the table by metadata sync.

Pure: the broker gathers the facts (:class:`QueueFacts`) and the clock reading.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Mapping, Sequence, Union

from metadata.data_version import DataVersion

QueueRef = tuple[str, str, int]  # (topic, group, queue id)


@dataclass(frozen=True)
class QueueOffset:
    topic: str
    group: str
    queue_id: int
    offset: int

    @property
    def ref(self) -> QueueRef:
        return self.topic, self.group, self.queue_id

    def describe(self) -> str:
        return f"{self.topic}@{self.group} queue {self.queue_id}"


@dataclass(frozen=True)
class QueueFacts:
    """What the broker knows about one requested queue when the write is decided."""

    queue_nums: int | None  # of the topic; None: the topic does not exist
    max_offset: int  # next offset to be written in the queue
    committed: int | None  # the group's committed offset; None: never committed


class WriteRefusal(str, Enum):
    TOPIC_NOT_FOUND = "TOPIC_NOT_FOUND"
    QUEUE_NOT_FOUND = "QUEUE_NOT_FOUND"
    OFFSET_BEYOND_MAX = "OFFSET_BEYOND_MAX"
    OFFSET_BEHIND_COMMITTED = "OFFSET_BEHIND_COMMITTED"


@dataclass(frozen=True)
class Refused:
    reason: WriteRefusal
    detail: str


@dataclass(frozen=True)
class Moved:
    expected: DataVersion
    current: DataVersion

    def describe(self) -> str:
        return f"MOVED_SINCE_PLAN: expected dataVersion {self.expected.to_json()}, current {self.current.to_json()}"


@dataclass(frozen=True)
class Accepted:
    offsets: tuple[QueueOffset, ...]
    data_version: DataVersion


OffsetWriteDecision = Union[Accepted, Moved, Refused]


def _refusal(item: QueueOffset, facts: QueueFacts) -> Refused | None:
    if facts.queue_nums is None:
        return Refused(WriteRefusal.TOPIC_NOT_FOUND, f"{item.describe()}: topic {item.topic} does not exist")
    if item.queue_id >= facts.queue_nums:
        return Refused(WriteRefusal.QUEUE_NOT_FOUND, f"{item.describe()}: topic {item.topic} has {facts.queue_nums} queues")
    if item.offset > facts.max_offset:
        return Refused(WriteRefusal.OFFSET_BEYOND_MAX,
                       f"{item.describe()}: offset {item.offset} is beyond the queue's max offset {facts.max_offset}")
    if facts.committed is not None and item.offset < facts.committed:
        return Refused(WriteRefusal.OFFSET_BEHIND_COMMITTED,
                       f"{item.describe()}: offset {item.offset} is behind the committed offset {facts.committed}")
    return None


def decide_offset_write(expected: DataVersion, current: DataVersion, offsets: Sequence[QueueOffset],
                        facts: Mapping[QueueRef, QueueFacts], now_ms: int) -> OffsetWriteDecision:
    """Accept, or say why not; ``facts`` holds every requested queue (the caller's duty)."""
    assert offsets, "an empty write is refused at the edge"
    assert len({item.ref for item in offsets}) == len(offsets), "duplicate queues are refused at the edge"
    if current != expected:
        return Moved(expected, current)
    refusals = [refused for item in offsets if (refused := _refusal(item, facts[item.ref])) is not None]
    if refusals:
        more = f" (and {len(refusals) - 1} more refused queues)" if len(refusals) > 1 else ""
        return Refused(refusals[0].reason, refusals[0].detail + more)
    return Accepted(tuple(offsets), current.next_version(now_ms))
