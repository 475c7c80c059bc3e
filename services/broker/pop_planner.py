"""Which messages a receive takes, queue by queue; and how many a group could take here now.

Rules:
- A receive for any queue (``queue_id`` -1, what the official clients send) visits the
  topic's queues round robin per (group, topic), the retry topic first for a non-FIFO group,
  and spends its batch over them (``scheduler.pop.decisions`` decides each queue).  Each plan
  is applied at once (reserved) by the caller's ``apply``, before any await, so concurrent
  receives never take the same message.
- A queue the pop table has not seen starts at the group's committed offset, else at 0 when
  the queue was never trimmed, else at its end (a new group does not read a trimmed history).
  :meth:`PopPlanner.receivable` counts from the same place without creating the queue's state.
- A locked FIFO queue whose batch is still invisible gives nothing; the plan then says when
  the last of its invisibility ends (``redeliver_at_ms``, wall clock), so a long poll wakes
  for the redelivery instead of sleeping through it.
- :meth:`PopPlanner.receivable` is what another broker's probe asks (``backlog_board``): the
  messages past each queue's pop cursor, except in a locked FIFO queue (only its expired
  batch) or a queue at its in-flight limit; counted up to ``limit``.  The consume queue's end
  may lie past what replication made visible; the count is a hint, never a promise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from metadata.message_filter import MessageFilter
from metadata.names import retry_topic_for
from scheduler.pop.decisions import PopContext, PopPlan, plan_fifo_redelivery, plan_new
from scheduler.pop.records import QueueKey, Record
from scheduler.pop.table import PopTable, QueueState
from services.broker.api import ReceiveRequest
from services.broker.config import BrokerConfig
from services.broker.offset_keeper import OffsetKeeper
from services.broker.topics import TopicManager
from store.results import GetStatus


class PopState(Protocol):
    """The pop service's current table and offsets (both are replaced by recovery and adoption)."""
    table: PopTable
    keeper: OffsetKeeper


@dataclass(frozen=True)
class Plans:
    plans: list[PopPlan]
    redeliver_at_ms: int | None = None  # the earliest end of a locked FIFO batch's invisibility


class PopPlanner:
    def __init__(self, config: BrokerConfig, store, clock, topics: TopicManager, pop: PopState):
        self.config, self.store, self.clock, self.topics, self.pop = config, store, clock, topics, pop
        self._round_robin: dict[tuple[str, str], int] = {}

    def queue_keys(self, request: ReceiveRequest, fifo: bool, read_queues: int) -> list[QueueKey]:
        if request.queue_id >= 0:
            ids = [request.queue_id] if request.queue_id < read_queues else []
        else:
            start = self._round_robin.get((request.group, request.topic), 0)
            self._round_robin[(request.group, request.topic)] = start + 1
            ids = [(start + i) % read_queues for i in range(read_queues)]
        keys = [QueueKey(request.group, request.topic, queue_id) for queue_id in ids]
        retry = retry_topic_for(request.group, request.topic)
        if not fifo and self.topics.get(retry) is not None:
            keys.insert(0, QueueKey(request.group, retry, 0))
        return keys

    def initial_offset(self, key: QueueKey) -> int:
        committed = self.pop.keeper.get(key.topic, key.group, key.queue_id)
        if committed is not None:
            return committed
        never_trimmed = self.store.min_offset(key.topic, key.queue_id) == 0
        return 0 if never_trimmed else self.store.max_offset(key.topic, key.queue_id)

    def state(self, key: QueueKey) -> QueueState:
        state = self.pop.table.get(key)
        if state is None:
            state = self.pop.table.ensure(key, self.initial_offset(key))
        return state

    def plan(self, request: ReceiveRequest, message_filter: MessageFilter, fifo: bool, group_max_attempts: int,
             read_queues: int, allowed: set[QueueKey] | None, apply: Callable[[Record], None]) -> Plans:
        now = self.clock.now_ms()
        budget = min(request.batch_size, self.config.max_receive_batch_size)
        plans, redeliver_at = [], None
        for key in self.queue_keys(request, fifo, read_queues):
            if budget <= 0:
                break
            if allowed is not None and key not in allowed:
                continue
            invisible_ms = request.invisible_ms
            if request.auto_renew or invisible_ms <= 0:
                invisible_ms = invisible_ms if invisible_ms > 0 else self.config.pop_invisible_time_auto_renew_ms
            context = PopContext(now, invisible_ms, request.max_delivery_attempts or group_max_attempts,
                                 budget, self.config.pop_inflight_max_per_queue, fifo, message_filter)
            plan, held_until = self.plan_queue(key, context)
            if held_until is not None:
                redeliver_at = held_until if redeliver_at is None else min(redeliver_at, held_until)
            if plan.record is not None:
                apply(plan.record)  # reserve before any await
                plans.append(plan)
                budget -= len(plan.deliveries)
        return Plans(plans, redeliver_at)

    def plan_queue(self, key: QueueKey, context: PopContext) -> tuple[PopPlan, int | None]:
        """The queue's plan, and when a locked FIFO batch that gave nothing becomes visible."""
        state = self.state(key)
        next_seq = lambda: self.pop.table.next_seq(context.now_ms)  # noqa: E731
        if context.fifo and state.inflight:
            messages = {o: m for o, e in state.inflight.items() if (m := self.store.read_at(e.commit_offset)) is not None}
            plan = plan_fifo_redelivery(key, state, messages, context, next_seq)
            held = None if plan.record is not None else max(e.deadline_ms for e in state.inflight.values())
            return plan, held
        if state.unacked >= context.inflight_max:
            return PopPlan(None, ()), None
        # without a filter every message read is delivered: read no more than fit (decoding
        # popScanMax records to deliver 32 was most of a receive's cost)
        count = self.config.pop_scan_max
        if context.filter.everything:
            count = max(1, min(count, context.batch, context.inflight_max - state.unacked))
        result = self.store.get(key.topic, key.queue_id, state.pop_offset, count)
        if result.status is GetStatus.OFFSET_TOO_SMALL:  # trimmed by retention: skip to the oldest kept
            result = self.store.get(key.topic, key.queue_id, result.next_offset, count)
        return plan_new(key, state, result.messages, context, next_seq), None

    def receivable(self, group: str, topic: str, fifo: bool, read_queues: int, now_ms: int, limit: int) -> int:
        keys = [QueueKey(group, topic, queue_id) for queue_id in range(read_queues)]
        retry = retry_topic_for(group, topic)
        if not fifo and self.topics.get(retry) is not None:
            keys.append(QueueKey(group, retry, 0))
        count = 0
        for key in keys:
            state = self.pop.table.get(key)
            if state is not None and fifo and state.inflight:
                if all(entry.deadline_ms <= now_ms for entry in state.inflight.values()):
                    count += len(state.inflight)  # a batch waiting to be redelivered
                continue
            if state is not None and state.unacked >= self.config.pop_inflight_max_per_queue:
                continue
            cursor = state.pop_offset if state is not None else self.initial_offset(key)
            count += max(0, self.store.max_offset(key.topic, key.queue_id) - max(cursor, self.store.min_offset(key.topic, key.queue_id)))
            if count >= limit:
                return limit
        return count
