"""Pop decisions: which messages a receive delivers, and what an ack or a change does.

Rules:
- Non-FIFO: deliver from the pop cursor forward, skipping (and consuming) tag mismatches,
  at most ``batch`` messages and at most ``inflight_max`` in flight per queue.  The attempt
  of a message is its RECONSUME_TIME + 1; a message whose attempt exceeds ``max_attempts``
  is dead-lettered instead of delivered.  Expired entries are handled by the revive scan
  (retry topic), never redelivered in place.
- FIFO (orderly groups), as RocketMQ's orderly pop (``PopMessageProcessor`` with
  ``ConsumerOrderInfoManager``): a free queue delivers consecutive messages from the cursor,
  up to the batch, and is then locked: nothing new leaves it until every message of the
  batch is acked.  While any unacked message of the queue is still invisible (a consumer
  holds it, or extended it with ChangeInvisibleDuration) nothing is redelivered either; once
  all of them are visible again they are redelivered in place, in offset order, up to the
  batch, with attempt + 1 (each dead-lettered past ``max_attempts`` on its own).  So the
  messages of a queue -- and with them each message group, which a queue holds whole -- are
  handed out in order, and never two deliveries of one queue are in flight at once.
- Every delivery gets a fresh seq (so a fresh receipt handle); a change gets a fresh seq and
  keeps the attempt.  Decisions return records; :class:`PopTable.apply` changes state.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, Mapping, Sequence

from metadata.frozen_values import quick_init
from metadata.message import Prop, StoredMessage
from metadata.message_filter import MessageFilter
from scheduler.pop.receipt import ReceiptHandle
from scheduler.pop.records import AckRecord, ChangeRecord, InFlight, PopRecord, QueueKey
from scheduler.pop.table import HandleCheck, PopTable, QueueState


class PopRejection(str, Enum):
    INVALID_RECEIPT_HANDLE = "INVALID_RECEIPT_HANDLE"


@quick_init
@dataclass(frozen=True)
class PopContext:
    now_ms: int
    invisible_ms: int
    max_attempts: int
    batch: int
    inflight_max: int
    fifo: bool
    filter: MessageFilter  # which messages are delivered (the rest are passed over)


@quick_init
@dataclass(frozen=True)
class Delivery:
    message: StoredMessage
    entry: InFlight
    dead_letter: bool = False  # attempts exhausted: move to the DLQ, then ack


@quick_init
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
    to_offset = state.pop_offset
    for message in messages:
        if message.queue_offset < state.pop_offset:
            continue
        if len(deliveries) >= room:
            break
        if not ctx.filter.matches(message.tag, message.user_properties):
            to_offset = message.queue_offset + 1
            continue
        attempt = attempt_of(message)
        deliveries.append(Delivery(message, _entry(message, ctx, next_seq(), attempt), attempt > ctx.max_attempts))
        to_offset = message.queue_offset + 1
    if to_offset == state.pop_offset:
        return PopPlan(None, ())
    record = PopRecord(key, state.pop_offset, to_offset, tuple(d.entry for d in deliveries))
    return PopPlan(record, tuple(deliveries))


def plan_fifo_redelivery(key: QueueKey, state: QueueState, messages: Mapping[int, StoredMessage], ctx: PopContext,
                         next_seq: Callable[[], int]) -> PopPlan:
    """Redeliver the in-flight entries of a locked FIFO queue, in offset order, once none of
    them is invisible any more (one still held keeps the whole queue waiting: redelivering a
    later message while an earlier one is processed would reorder its message group)."""
    if any(entry.deadline_ms > ctx.now_ms for entry in state.inflight.values()):
        return PopPlan(None, ())
    deliveries = []
    for offset in sorted(state.inflight):
        entry = state.inflight[offset]
        message = messages.get(offset)
        if message is None:
            continue
        if len(deliveries) >= ctx.batch:
            break
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
