"""Pop decisions: which messages a receive delivers, and what an ack or a change does.

Rules:
- Non-FIFO: deliver from the pop cursor forward, skipping (and consuming) tag mismatches,
  at most ``batch`` messages and at most ``inflight_max`` in flight per queue.  The attempt
  of a message is its RECONSUME_TIME + 1; a message whose attempt exceeds ``max_attempts``
  is dead-lettered instead of delivered.  Expired entries are handled by the revive scan
  (retry topic), never redelivered in place.
- FIFO (orderly groups): a queue with unacked messages is locked: only its expired in-flight
  entries are redelivered, in place, with attempt + 1 (dead-lettered past ``max_attempts``).
  A free queue delivers the longest run from the cursor in which no message group repeats,
  so at most one message of a message group is ever in flight.
- Every delivery gets a fresh seq (so a fresh receipt handle); a change gets a fresh seq and
  keeps the attempt.  Decisions return records; :class:`PopTable.apply` changes state.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, Mapping, Sequence

from metadata.message import Prop, StoredMessage
from metadata.message_filter import MessageFilter
from scheduler.pop.receipt import ReceiptHandle
from scheduler.pop.records import AckRecord, ChangeRecord, InFlight, PopRecord, QueueKey
from scheduler.pop.table import HandleCheck, PopTable, QueueState


class PopRejection(str, Enum):
    INVALID_RECEIPT_HANDLE = "INVALID_RECEIPT_HANDLE"


@dataclass(frozen=True)
class PopContext:
    now_ms: int
    invisible_ms: int
    max_attempts: int
    batch: int
    inflight_max: int
    fifo: bool
    filter: MessageFilter  # which messages are delivered (the rest are passed over)


@dataclass(frozen=True)
class Delivery:
    message: StoredMessage
    entry: InFlight
    dead_letter: bool = False  # attempts exhausted: move to the DLQ, then ack


@dataclass(frozen=True)
class PopPlan:
    record: PopRecord | None
    deliveries: tuple[Delivery, ...]


def attempt_of(message: StoredMessage) -> int:
    raw = message.properties.get(Prop.RECONSUME_TIMES, "0")
    return int(raw) + 1 if raw.isdigit() else 1


def _entry(message: StoredMessage, ctx: PopContext, seq: int, attempt: int) -> InFlight:
    return InFlight(message.queue_offset, seq, attempt, ctx.now_ms + ctx.invisible_ms, ctx.max_attempts,
                    message.commit_offset, ctx.fifo, message.properties.get(Prop.MESSAGE_GROUP, ""))


def plan_new(key: QueueKey, state: QueueState, messages: Sequence[StoredMessage], ctx: PopContext,
             next_seq: Callable[[], int]) -> PopPlan:
    """Deliver new messages (``messages`` are read from ``state.pop_offset`` on, unfiltered)."""
    if ctx.fifo and state.commit < state.pop_offset:
        return PopPlan(None, ())
    room = min(ctx.batch, ctx.inflight_max - state.unacked)
    deliveries: list[Delivery] = []
    groups: set[str] = set()
    to_offset = state.pop_offset
    for message in messages:
        if message.queue_offset < state.pop_offset:
            continue
        if len(deliveries) >= room:
            break
        if not ctx.filter.matches(message.tag, message.user_properties):
            to_offset = message.queue_offset + 1
            continue
        group = message.properties.get(Prop.MESSAGE_GROUP, "")
        if ctx.fifo and group in groups:
            break
        groups.add(group)
        attempt = attempt_of(message)
        deliveries.append(Delivery(message, _entry(message, ctx, next_seq(), attempt), attempt > ctx.max_attempts))
        to_offset = message.queue_offset + 1
    if to_offset == state.pop_offset:
        return PopPlan(None, ())
    record = PopRecord(key, state.pop_offset, to_offset, tuple(d.entry for d in deliveries))
    return PopPlan(record, tuple(deliveries))


def plan_fifo_redelivery(key: QueueKey, state: QueueState, messages: Mapping[int, StoredMessage], ctx: PopContext,
                         next_seq: Callable[[], int]) -> PopPlan:
    """Redeliver the expired in-flight entries of a locked FIFO queue, in offset order."""
    deliveries = []
    for offset in sorted(state.inflight):
        entry = state.inflight[offset]
        message = messages.get(offset)
        if entry.deadline_ms > ctx.now_ms or message is None or len(deliveries) >= ctx.batch:
            continue
        attempt = entry.attempt + 1
        new_entry = _entry(message, ctx, next_seq(), attempt)
        deliveries.append(Delivery(message, new_entry, attempt > max(ctx.max_attempts, 1)))
    if not deliveries:
        return PopPlan(None, ())
    record = PopRecord(key, state.pop_offset, state.pop_offset, tuple(d.entry for d in deliveries))
    return PopPlan(record, tuple(deliveries))


def decide_ack(table: PopTable, group: str, handle: ReceiptHandle | None) -> AckRecord | PopRejection | None:
    """An ack record to write, None when already consumed (OK), or a rejection."""
    if handle is None:
        return PopRejection.INVALID_RECEIPT_HANDLE
    check = table.check_handle(group, handle)
    if check is HandleCheck.ALREADY_ACKED:
        return None
    if check is HandleCheck.STALE:
        return PopRejection.INVALID_RECEIPT_HANDLE
    return AckRecord(QueueKey(group, handle.topic, handle.queue_id), handle.offset)


def decide_change(table: PopTable, group: str, handle: ReceiptHandle | None, invisible_ms: int,
                  now_ms: int) -> tuple[ChangeRecord, ReceiptHandle] | PopRejection:
    if handle is None or table.check_handle(group, handle) is not HandleCheck.CURRENT:
        return PopRejection.INVALID_RECEIPT_HANDLE
    seq = table.next_seq(now_ms)
    record = ChangeRecord(QueueKey(group, handle.topic, handle.queue_id), handle.offset, seq, now_ms + invisible_ms)
    return record, ReceiptHandle(handle.topic, handle.queue_id, handle.offset, seq)
