"""An in-memory BrokerApi and BrokerDirectory for testing the messaging servicer.

Not the real broker: just enough semantics to exercise the protocol end to end —
per-queue logs, pop-style receive with invisibility and redelivery (attempt + 1), server-side
DLQ past max attempts, FIFO one-in-flight per message group, DELAY timers with recall,
transaction halves with orphan checks pushed to a TransactionCheckSink, long polling.
Times: ``clock.now_ms()`` for visibility, ``clock.monotonic_ms()`` for deadlines.
"""
from __future__ import annotations

import asyncio
import itertools
import zlib
from dataclasses import dataclass, field, replace

from metadata.message import MessageType, Prop, StoredMessage
from metadata.message_filter import compile_filter
from metadata.names import dlq_topic
from metadata.status import Code, RequestRejected
from metadata.topic_config import PERM_READ_WRITE
from services.broker.api import (Delivery, FilterType, GroupSettings, QueueRoute, ReceiveRequest, SendItem,
                                 SendOutcome, TransactionCheck)


@dataclass
class _InFlight:
    message: StoredMessage
    group: str
    topic: str
    attempt: int
    invisible_until_ms: int


@dataclass
class _Half:
    item: SendItem
    created_ms: int
    checks: int = 0


@dataclass
class _GroupView:
    offsets: dict = field(default_factory=dict)  # queue id -> next offset
    retry: list = field(default_factory=list)  # (visible_at_ms, message, attempt)


class FakeBroker:
    def __init__(self, name: str, clock, topics: dict[str, MessageType | None], queue_nums: int = 4,
                 group_settings=None, check_after_ms: int = 1_000):
        self.name, self.broker_id, self._clock = name, 0, clock
        self.topics = dict(topics)  # None: MIXED
        self.queue_nums = queue_nums
        self._group_settings = group_settings or (lambda group: GroupSettings())
        self._logs: dict[tuple[str, int], list[StoredMessage]] = {}
        self._views: dict[tuple[str, str], _GroupView] = {}
        self._inflight: dict[str, _InFlight] = {}
        self._halves: dict[str, _Half] = {}
        self._timers: dict[str, tuple[int, SendItem]] = {}  # recall handle -> (due, item)
        self._ids = itertools.count(1)
        self._commit_offset = 0
        self._arrived = asyncio.Event()
        self.check_after_ms = check_after_ms
        self.sink = None
        self.calls: list[tuple] = []

    # ------------------------------------------------------------------ producing
    def _queue_for(self, item: SendItem) -> int:
        if item.message_group:
            return zlib.crc32(item.message_group.encode()) % self.queue_nums
        return next(self._ids) % self.queue_nums

    def _append(self, item: SendItem, topic: str | None = None, extra: dict | None = None) -> StoredMessage:
        topic = topic or item.draft.topic
        queue_id = self._queue_for(item) if topic == item.draft.topic else 0
        log = self._logs.setdefault((topic, queue_id), [])
        props = dict(item.draft.properties, **(extra or {}))
        draft = item.draft.with_changes(topic=topic, queue_id=queue_id, properties=props)
        stored = StoredMessage(draft, self._commit_offset, len(draft.body), len(log), self._clock.now_ms())
        self._commit_offset += len(draft.body)
        log.append(stored)
        self._arrived.set()
        return stored

    async def send(self, items):
        self.calls.append(("send", len(items)))
        outcomes = []
        for item in items:
            accepted = self.topics.get(item.draft.topic, "missing")
            if accepted == "missing":
                raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {item.draft.topic} not found")
            if accepted is not None and accepted != item.message_type:
                raise RequestRejected(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "message type does not match the topic")
            outcomes.append(self._send_one(item))
        return outcomes

    def _send_one(self, item: SendItem) -> SendOutcome:
        if item.message_type is MessageType.TRANSACTION:
            tx_id = f"TX{next(self._ids)}"
            self._halves[tx_id] = _Half(item, self._clock.now_ms())
            return SendOutcome(item.draft.message_id, 0, 0, transaction_id=tx_id)
        if item.message_type is MessageType.DELAY and item.delivery_timestamp_ms > self._clock.now_ms():
            handle = f"R{next(self._ids)}"
            self._timers[handle] = (item.delivery_timestamp_ms, item)
            return SendOutcome(item.draft.message_id, 0, 0, recall_handle=handle)
        stored = self._append(item)
        return SendOutcome(item.draft.message_id, stored.queue_id, stored.queue_offset,
                           recall_handle="R-delivered" if item.message_type is MessageType.DELAY else "")

    async def end_transaction(self, topic, message_id, transaction_id, commit, from_check):
        self.calls.append(("end_transaction", transaction_id, commit, from_check))
        half = self._halves.pop(transaction_id, None)
        if half is None or half.item.draft.message_id != message_id:
            raise RequestRejected(Code.INVALID_TRANSACTION_ID, "no such transaction")
        if commit:
            self._append(half.item)

    def check_orphans(self) -> int:
        pushed = 0
        for tx_id, half in list(self._halves.items()):
            if self._clock.now_ms() - half.created_ms >= self.check_after_ms * (half.checks + 1) and self.sink is not None:
                message = StoredMessage(half.item.draft, 0, len(half.item.draft.body), 0, half.created_ms)
                if self.sink.push_transaction_check(TransactionCheck(half.item.draft.topic, tx_id, message)):
                    half.checks += 1
                    pushed += 1
        return pushed

    async def recall(self, topic, recall_handle):
        timer = self._timers.pop(recall_handle, None)
        if timer is None:
            raise RequestRejected(Code.NOT_FOUND, "nothing to recall")
        return timer[1].draft.message_id

    def _release_due_timers(self) -> None:
        now = self._clock.now_ms()
        for handle, (due, item) in list(self._timers.items()):
            if due <= now:
                del self._timers[handle]
                self._append(item)

    # ------------------------------------------------------------------ consuming
    def _view(self, group: str, topic: str) -> _GroupView:
        return self._views.setdefault((group, topic), _GroupView())

    def _expire_inflight(self) -> None:
        now = self._clock.now_ms()
        for handle, flight in list(self._inflight.items()):
            if flight.invisible_until_ms <= now:
                del self._inflight[handle]
                self._view(flight.group, flight.topic).retry.append((now, flight.message, flight.attempt + 1))

    @staticmethod
    def _matches(message: StoredMessage, request: ReceiveRequest) -> bool:
        return compile_filter(request.filter.type is FilterType.SQL,
                              request.filter.expression).matches(message.tag, message.user_properties)

    def _busy_groups(self, group: str, topic: str) -> set[str]:
        return {f.message.properties.get(Prop.MESSAGE_GROUP) for f in self._inflight.values()
                if f.group == group and f.topic == topic}

    def _candidates(self, request: ReceiveRequest, view: _GroupView, fifo: bool):
        now = self._clock.now_ms()
        due = [entry for entry in view.retry if entry[0] <= now]
        for entry in due:
            view.retry.remove(entry)
            yield entry[1], entry[2]
        for queue_id in range(self.queue_nums):
            log = self._logs.get((request.topic, queue_id), [])
            while view.offsets.get(queue_id, 0) < len(log):
                message = log[view.offsets.get(queue_id, 0)]
                view.offsets[queue_id] = message.queue_offset + 1
                yield message, 1

    def _take(self, request: ReceiveRequest) -> list[Delivery]:
        self._release_due_timers()
        self._expire_inflight()
        settings = self._group_settings(request.group)
        max_attempts = request.max_delivery_attempts or settings.max_delivery_attempts
        view, busy, out, held = self._view(request.group, request.topic), self._busy_groups(request.group, request.topic), [], []
        for message, attempt in self._candidates(request, view, settings.fifo):
            group_key = message.properties.get(Prop.MESSAGE_GROUP)
            if not self._matches(message, request):
                continue
            if len(out) >= request.batch_size:
                held.append((0, message, attempt))
                break
            if settings.fifo and group_key in busy:
                held.append((0, message, attempt))
                continue
            if attempt > max_attempts and not settings.fifo:
                self._to_dlq(request.group, message)
                continue
            if settings.fifo and group_key is not None:
                busy.add(group_key)
            out.append(self._deliver(request, message, attempt))
        view.retry[:0] = held
        return out

    def _deliver(self, request: ReceiveRequest, message: StoredMessage, attempt: int) -> Delivery:
        handle = f"H{next(self._ids)}"
        until = self._clock.now_ms() + request.invisible_ms
        self._inflight[handle] = _InFlight(message, request.group, request.topic, attempt, until)
        origin = None
        if request.topic.startswith("%DLQ%"):
            origin = (message.properties.get(Prop.DLQ_ORIGIN_TOPIC, ""), message.properties.get(Prop.DLQ_ORIGIN_MESSAGE_ID, ""))
        return Delivery(message, handle, attempt, until, origin)

    def _to_dlq(self, group: str, message: StoredMessage) -> None:
        topic = dlq_topic(group)
        self.topics.setdefault(topic, None)
        item = SendItem.of(message.draft, MessageType.NORMAL)
        self._append(item, topic, {Prop.DLQ_ORIGIN_TOPIC: message.topic, Prop.DLQ_ORIGIN_MESSAGE_ID: message.message_id})

    async def receive(self, request: ReceiveRequest):
        self.calls.append(("receive", request))
        if request.topic not in self.topics:
            raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {request.topic} not found")
        while True:
            self._arrived.clear()
            found = self._take(request)
            left_ms = request.deadline_ms - self._clock.monotonic_ms()
            if found or left_ms <= 0:
                return found
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout=min(left_ms, 200) / 1000)
            except asyncio.TimeoutError:
                pass

    def _flight(self, group: str, topic: str, handle: str) -> _InFlight:
        flight = self._inflight.get(handle)
        if flight is None or flight.group != group or flight.topic != topic:
            raise RequestRejected(Code.INVALID_RECEIPT_HANDLE, "receipt handle is stale or unknown")
        return flight

    async def ack(self, group, topic, message_id, receipt_handle):
        self.calls.append(("ack", receipt_handle))
        self._flight(group, topic, receipt_handle)
        del self._inflight[receipt_handle]

    async def ack_many(self, group, topic, receipt_handles):
        results = []
        for receipt_handle in receipt_handles:
            try:
                await self.ack(group, topic, "", receipt_handle)
                results.append(None)
            except RequestRejected as rejection:
                results.append(rejection)
        return results

    async def change_invisible_duration(self, group, topic, message_id, receipt_handle, invisible_ms):
        self.calls.append(("change_invisible_duration", receipt_handle, invisible_ms))
        flight = self._inflight.pop(receipt_handle, None) or self._flight(group, topic, receipt_handle)
        handle = f"H{next(self._ids)}"
        self._inflight[handle] = replace(flight, invisible_until_ms=self._clock.now_ms() + invisible_ms)
        return handle

    async def forward_to_dead_letter_queue(self, group, topic, message_id, receipt_handle):
        self.calls.append(("forward_to_dead_letter_queue", receipt_handle))
        flight = self._flight(group, topic, receipt_handle)
        del self._inflight[receipt_handle]
        self._to_dlq(group, flight.message)

    async def query_offset(self, topic, queue_id, policy, timestamp_ms):
        if topic not in self.topics:
            raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        log = self._logs.get((topic, queue_id), [])
        if policy == "BEGINNING":
            return 0
        if policy == "END":
            return len(log)
        return next((m.queue_offset for m in log if m.store_timestamp_ms >= timestamp_ms), len(log))

    def group_settings(self, group: str) -> GroupSettings:
        return self._group_settings(group)

    def routes(self, topic: str, endpoint: tuple[str, int]) -> list[QueueRoute]:
        if topic not in self.topics:
            return []
        kind = self.topics[topic]
        accept = tuple(MessageType) if kind is None else (kind,)
        return [QueueRoute(topic, q, self.name, 0, PERM_READ_WRITE, accept, endpoint) for q in range(self.queue_nums)]


class FakeDirectory:
    def __init__(self, brokers: list[FakeBroker], endpoint: tuple[str, int] = ("127.0.0.1", 0)):
        self.brokers = brokers
        self.endpoint = endpoint

    def local_broker(self, broker_name: str):
        return next((b for b in self.brokers if b.name == broker_name), None)

    def local_master_for_topic(self, topic: str):
        return next((b for b in self.brokers if topic in b.topics), None)

    async def route(self, topic: str) -> list[QueueRoute]:
        return [route for broker in self.brokers for route in broker.routes(topic, self.endpoint)]
