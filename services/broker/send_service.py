"""The send path: validate against the topic, choose the queue, store, answer.

Rules:
- The topic must exist (or be auto-created), be writable and accept the message type.
- Queue choice: round robin over the write queues, one turn per request: the NORMAL
  messages of one request go to one queue, as upstream's proxy sends a request's messages as
  one batch to the queue it selected (so a batch is one consume-queue write, not one per
  queue); FIFO maps the message group to a queue with a stable hash (CRC32, the same across
  restarts and processes), so one group's messages stay in one queue in send order.
- DELAY needs a delivery timestamp at most ``maxDelayTimeMills`` ahead (else
  ILLEGAL_DELIVERY_TIME); one already due is stored directly.  TRANSACTION goes to the half
  topic.  Everything else is put as is.
- Consecutive NORMAL and FIFO messages of one request are stored by one put (at most
  ``maxBatchPut``): one write, one group-committed fdatasync, offsets in request order;
  nothing of the run is stored if the store refuses any of it.
- A message id answered recently is answered again from the de-duplication memory (client
  retries), and a send still in progress with the same id is awaited, not duplicated (under
  ASYNC_FLUSH a put awaits nothing, so none is ever in progress when another call runs).  The
  memory is derived from the log: once the log is cut or the broker steps down (the store's
  derived generation moves) it is emptied, so a retry is stored again rather than answered
  for a record that may be gone.
"""
from __future__ import annotations

import asyncio
import zlib
from itertools import count, repeat
from typing import Sequence

from metadata.message import MessageDraft, MessageType
from metadata.status import Code, RequestRejected
from metadata.topic_config import TopicConfig
from services.broker.api import SendItem, SendOutcome
from services.broker.config import BrokerConfig
from services.broker.dedupe import SendDedupe
from services.broker.internal_put import rejection_for
from services.broker.timer_service import TimerService
from services.broker.topics import TopicManager
from services.broker.transaction_service import TransactionService
from store import record
from store.config import FlushDiskType
from store.errors import MessageTooLarge, StoreError
from store.put_rows import Row


_NORMAL, _FIFO = MessageType.NORMAL, MessageType.FIFO  # plain: stored as they are, so a request's share one put


_outcome = tuple.__new__  # (SendOutcome, fields): a named tuple made in C
_QUEUE_BITS = 32
_QUEUE_MASK = (1 << _QUEUE_BITS) - 1


def _remembered(outcome: SendOutcome) -> int | tuple:
    """What the de-duplication memory keeps of an outcome: a plain message's queue offset and
    queue id in one int (the memory holds up to sendDedupeMaxEntries of them: one small object
    each, services.broker.dedupe), anything else a plain tuple (the collector stops tracking
    those; named tuples it walks every full collection)."""
    if outcome.transaction_id or outcome.recall_handle:
        return tuple(outcome)
    return outcome.queue_offset << _QUEUE_BITS | outcome.queue_id


def _known(message_id: str, kept: int | tuple) -> SendOutcome:
    """The outcome the memory kept for ``message_id`` (:func:`_remembered`)."""
    if kept.__class__ is int:
        return _outcome(SendOutcome, (message_id, kept & _QUEUE_MASK, kept >> _QUEUE_BITS, "", ""))
    return _outcome(SendOutcome, kept)


class _Run:
    """Consecutive plain items of one topic that will share one put, with their message ids."""

    __slots__ = ("items", "topic", "message_ids", "ids")

    def __init__(self) -> None:
        self.items: list[SendItem] = []
        self.topic = ""
        self.message_ids: list[str] = []  # one per item, in order ("" for an item without one)
        self.ids: set[str] = set()  # the ids present: a repeat within the run goes alone


def fifo_queue(message_group: str, write_queues: int) -> int:
    return zlib.crc32(message_group.encode("utf-8")) % write_queues


class SendService:
    def __init__(self, config: BrokerConfig, store, clock, topics: TopicManager, timer: TimerService,
                 transactions: TransactionService):
        self.config, self.store, self.clock = config, store, clock
        self.topics, self.timer, self.transactions = topics, timer, transactions
        # outcomes are kept as ints and plain tuples (_remembered), which the garbage collector
        # does not walk: up to sendDedupeMaxEntries of them live at once (100k by default)
        self.dedupe: SendDedupe[int | tuple] = SendDedupe(config.send_dedupe_window_ms, config.send_dedupe_max_entries)
        self._generation = store.derived_generation  # the store's, when the outcomes remembered were written
        self._round_robin: dict[str, int] = {}
        self._max_batch_put = store.config.max_batch_put
        # ASYNC_FLUSH's put awaits nothing: no other task runs between it and its answer, so no
        # retry can meet its ids in progress, and they are not registered (a future and two
        # table updates a put)
        self._puts_at_once = (hasattr(store, "put_rows_now")
                              and getattr(store.config, "flush_disk_type", None) is FlushDiskType.ASYNC_FLUSH)
        # topic -> message id -> (the put's future of outcomes, this id's index in it); per topic,
        # as the de-duplication memory: a batch's ids are tested and registered without a
        # (topic, id) tuple each
        self._in_progress: dict[str, dict[str, tuple[asyncio.Future, int]]] = {}

    async def send(self, items: Sequence[SendItem]) -> list[SendOutcome]:
        """Consecutive plain messages share one store put (one write, one fdatasync); the rest
        (DELAY, TRANSACTION, ids already answered or in progress) go one by one, in order."""
        self.current_outcomes()
        whole = self._whole_run(items)
        if whole is not None:
            return await self._put_run(whole)
        outcomes: list[SendOutcome] = []
        run = _Run()
        now_ms = self.clock.now_ms()
        for item in items:
            if not self._joins_run(item, run, now_ms):
                outcomes += await self._put_run(run)
                run, now_ms = _Run(), self.clock.now_ms()
                if not self._joins_run(item, run, now_ms):
                    outcomes.append(await self._send_deduplicated(item))
        outcomes += await self._put_run(run)
        return outcomes

    def current_outcomes(self) -> SendDedupe[tuple]:
        """The de-duplication memory, emptied first if the log was cut or this broker stepped down
        since it was filled (every reader of it goes through here: sends and escapes)."""
        if self.store.derived_generation != self._generation:
            self._forget_outcomes()
        return self.dedupe

    def _forget_outcomes(self) -> None:
        """The log was cut, or this broker stepped down as master, since the outcomes remembered
        were written: their records may be gone, and a retry answered from memory would be
        acknowledged and lost (bench/chaos.py, partition of a master: a send written during the
        partition failed waiting for its slave, the log was cut below it on rejoining, and the
        client's retry, once the broker was master again, was answered OK from memory).  A
        retry is stored again instead: a duplicate at worst, never a loss."""
        self._generation = self.store.derived_generation
        self.dedupe.clear()

    def _whole_run(self, items: Sequence[SendItem]) -> _Run | None:
        """The request as one run, when all of it may share one put: plain messages with ids
        all different, none answered or in progress (a set test each, not :meth:`_joins_run`
        per message: about a tenth of a batch's Python).  None: go message by message."""
        if len(items) > self._max_batch_put:
            return None
        if len(items) == 1:  # what the official clients send: the same tests, without the sets
            return self._single_run(items[0])
        topic = items[0].topic
        message_ids = []
        for item in items:
            kind = item.message_type  # compared by identity: an Enum's hash is a Python call
            if (kind is not _NORMAL and kind is not _FIFO) or not item.message_id or item.topic != topic:
                return None
            message_ids.append(item.message_id)
        distinct = set(message_ids)
        if len(distinct) != len(message_ids) or not self.dedupe.knows_none(topic, distinct):
            return None
        progress = self._in_progress.get(topic)
        if progress and not progress.keys().isdisjoint(distinct):
            return None
        run = _Run()
        run.items, run.topic, run.message_ids, run.ids = list(items), topic, message_ids, distinct
        return run

    def _single_run(self, item: SendItem) -> _Run | None:
        kind, message_id = item.message_type, item.message_id
        if (kind is not _NORMAL and kind is not _FIFO) or not message_id:
            return None
        topic = item.topic
        progress = self._in_progress.get(topic)
        if (progress and message_id in progress) or self.dedupe.knows(topic, message_id):
            return None
        run = _Run()
        run.items, run.topic, run.message_ids, run.ids = [item], topic, [message_id], {message_id}
        return run

    def _joins_run(self, item: SendItem, run: _Run, now_ms: int) -> bool:
        """Add ``item`` to ``run`` if it may share the run's put; say whether it did."""
        message_type = item.message_type  # compared by identity: an Enum's hash is a Python call
        if (message_type is not _NORMAL and message_type is not _FIFO) or len(run.items) >= self._max_batch_put:
            return False
        topic, message_id = item.topic, item.message_id
        if run.items and topic != run.topic:
            return False
        if message_id:
            progress = self._in_progress.get(topic)
            if (message_id in run.ids or (progress and message_id in progress)
                    or self.dedupe.lookup(topic, message_id, now_ms) is not None):
                return False
            run.ids.add(message_id)
        run.items.append(item)
        run.topic = topic
        run.message_ids.append(message_id)
        return True

    async def _put_run(self, run: _Run) -> list[SendOutcome]:
        """One put for ``run``; its ids are in progress until it returns (a retry awaits it)."""
        if not run.items:
            return []
        now = self.clock.now_ms()
        rows = self._rows(run.items, now)
        if self._puts_at_once:
            try:
                _, placed = self.store.put_rows_now(rows)
            except StoreError as error:
                raise rejection_for(error) from error
            return self._answered(run, rows, placed, now)
        future = asyncio.get_running_loop().create_future()
        topic, message_ids = run.topic, run.message_ids
        progress = self._in_progress.get(topic)
        if progress is None:
            progress = self._in_progress[topic] = {}
        # every id, in C; an empty one is never looked up (_joins_run and _send_deduplicated
        # test the id first)
        progress.update(zip(message_ids, zip(repeat(future), count())))
        try:
            _, placed = await self.store.put_rows(rows)
            outcomes = self._answered(run, rows, placed, now)
            future.set_result(outcomes)
            return outcomes
        except BaseException as error:
            future.set_exception(rejection_for(error) if isinstance(error, StoreError) else error)
            future.exception()  # retrieved: a waiter gets it, nobody else has to
            if isinstance(error, StoreError):
                raise rejection_for(error) from error
            raise
        finally:
            self._done(topic, progress, message_ids)

    def _answered(self, run: _Run, rows: list[Row], placed: list, now_ms: int) -> list[SendOutcome]:
        """The run's outcomes, remembered (no stored message per record: 3 numbers are read)."""
        outcomes = [_outcome(SendOutcome, (message_id, row[1], where[2], "", ""))
                    for message_id, row, where in zip(run.message_ids, rows, placed)]
        kept = [where[2] << _QUEUE_BITS | row[1] for row, where in zip(rows, placed)]  # _remembered's ints
        self.dedupe.remember_many(run.topic, run.message_ids, kept, now_ms)
        return outcomes

    def _done(self, topic: str, progress: dict, message_ids: Sequence[str]) -> None:
        """``message_ids`` of ``topic`` are no longer in progress; a topic with none left is dropped."""
        for message_id in message_ids:
            progress.pop(message_id, None)
        if not progress and self._in_progress.get(topic) is progress:
            del self._in_progress[topic]

    async def _send_deduplicated(self, item: SendItem) -> SendOutcome:
        topic, message_id = item.topic, item.message_id
        known = self.dedupe.lookup(topic, message_id, self.clock.now_ms())
        if known is not None:
            return _known(message_id, known)
        progress = self._in_progress.get(topic)
        if message_id and progress and message_id in progress:
            future, index = progress[message_id]
            return (await asyncio.shield(future))[index]
        future = asyncio.get_running_loop().create_future()
        if message_id:
            if progress is None:
                progress = self._in_progress[topic] = {}
            progress[message_id] = (future, 0)
        try:
            outcome = await self._send_one(item)
            self.dedupe.remember(item.topic, item.message_id, _remembered(outcome), self.clock.now_ms())
            future.set_result([outcome])
            return outcome
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: a waiter gets it, nobody else has to
            raise
        finally:
            if message_id:
                self._done(topic, progress, (message_id,))

    def _queue(self, topic: TopicConfig, item: SendItem) -> int:
        if item.message_type is MessageType.FIFO:
            if not item.message_group:
                raise RequestRejected(Code.ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group")
            return fifo_queue(item.message_group, topic.write_queue_nums)
        turn = self._round_robin.get(topic.topic_name, 0)
        self._round_robin[topic.topic_name] = turn + 1
        return turn % topic.write_queue_nums

    def _due_ms(self, item: SendItem, now_ms: int) -> int:
        due = item.delivery_timestamp_ms
        if due is None:
            raise RequestRejected(Code.ILLEGAL_DELIVERY_TIME, "a DELAY message needs a delivery timestamp")
        if due - now_ms > self.config.max_delay_time_ms:
            raise RequestRejected(Code.ILLEGAL_DELIVERY_TIME,
                                  f"delivery timestamp is more than {self.config.max_delay_time_ms} ms ahead")
        return due

    def _placed(self, item: SendItem, now_ms: int) -> MessageDraft:
        """The draft with its queue chosen and its type (and FIFO group) among its properties."""
        topic = self.topics.for_send(item.topic, item.message_type, now_ms)
        return MessageDraft.owned(item.topic, self._queue(topic, item), item.body, item.born_timestamp_ms,
                                  item.born_host, item.properties(), dict(item.user_properties))

    def _rows(self, items: Sequence[SendItem], now_ms: int) -> list[Row]:
        """Each item for its queue as the store's row, its record's tail encoded from its fields
        (no draft, no properties dict); the topic is looked up once per (topic, type)."""
        configs: dict[tuple[str, str], TopicConfig] = {}
        normal_queues: dict[str, int] = {}  # topic -> the one queue of this run's NORMAL messages
        rows = []
        tail_of = record.encode_item_tail
        try:
            for item in items:
                name, message_type = item.topic, item.message_type
                key = (name, message_type._value_)  # the plain str: hashing the Enum is a Python call
                topic = configs.get(key)
                if topic is None:
                    topic = configs[key] = self.topics.for_send(name, message_type, now_ms)
                if message_type is _NORMAL:
                    queue = normal_queues.get(name)
                    if queue is None:
                        queue = normal_queues[name] = self._queue(topic, item)
                else:
                    queue = self._queue(topic, item)
                rows.append((name, queue, item.born_timestamp_ms, tail_of(item), item.tag))
        except ValueError as failure:  # a text past its u16 length: a long host, a draft's property key
            raise rejection_for(MessageTooLarge(f"message to {items[0].topic}: {failure}")) from None
        return rows

    async def _send_one(self, item: SendItem) -> SendOutcome:
        now = self.clock.now_ms()
        draft = self._placed(item, now)
        message_id = draft.message_id
        try:
            if item.message_type is MessageType.DELAY:
                due = self._due_ms(item, now)
                if due > now:
                    stored, handle = await self.timer.schedule(draft, due)
                    return SendOutcome(message_id, draft.queue_id, stored.queue_offset, recall_handle=handle)
            if item.message_type is MessageType.TRANSACTION:
                stored, transaction_id = await self.transactions.prepare(draft)
                return SendOutcome(message_id, draft.queue_id, stored.queue_offset, transaction_id=transaction_id)
            stored = (await self.store.put([draft]))[0]
            return SendOutcome(message_id, stored.queue_id, stored.queue_offset)
        except StoreError as error:
            raise rejection_for(error) from error
