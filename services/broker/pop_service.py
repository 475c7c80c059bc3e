"""The pop driver: receive, ack, change invisible duration, DLQ forward and revive, durably.

Durability design (close to RocketMQ's own pop checkpoints):
- Every pop decision is a small record (``scheduler.pop.records``) appended to the system
  topic ``rmq_sys_REVIVE_LOG`` of the same commit log, so it is group-committed and flushed
  under the store's flushDiskType like any message (and replicated with it later).
- A receive reserves its messages in memory first (so concurrent receives never deliver the
  same message twice), then writes its pop record, and answers only after the write returned.
  An ack, a change and a DLQ forward write their record first and apply it after: an
  answered ack is as durable as a send.
- Every ``flushConsumerOffsetInterval`` the table is snapshot to ``config/popState.json``
  together with the pop-log offset it covers (the snapshot is taken right after applying the
  log up to that offset), then ``consumerOffset.json`` is written.  On start the snapshot is
  loaded and the pop log is replayed from its offset; application is idempotent
  (``PopTable`` rules), so replaying records already reflected is harmless.  The snapshot
  keeps an anchor (the record below its offset); one written before the log was cut below
  it is not trusted, and the table is rebuilt from the log (``system_log.cut_below``).
- After a crash: an unacked message is in flight in the snapshot or the log (it expires and
  is redelivered) or was never recorded (the cursor is behind it: delivered again).  An
  answered ack is in the log.  Under ASYNC_FLUSH the window is the store's flush interval.
- An admin offset write (:meth:`PopService.write_offsets`, ``relaymq offset-diff --apply``)
  is a compare-and-set on the offset table's DataVersion; it raises the pop state with skip
  records and writes both files before it answers, with no await between compare and set.
- Expired non-FIFO entries are revived: copied to the retry topic of (group, original topic)
  (or ``%DLQ%<group>`` past max attempts) and acked, in that order (a crash in between
  duplicates, never loses).  A receive reads the retry topic of its own topic only, through
  the same filter (TAG or SQL92, metadata.message_filter) as the topic, so a redelivery never reaches a consumer of another topic
  of the group or one whose filter does not match.
- Acting slave (RIP-32): receives, acks, invisibility changes and DLQ forwards are served
  as on a master, but their records go to the slave's pop journal (fsynced, outside its
  commit log: ``services.acting.pop_journal``), replayed after the snapshot on start.  Revive
  escapes retry and dead-letter copies to a live master (``services.acting.escape``) and acks
  the originals only after the target stored them; with no target they stay in flight,
  expired, and are tried again.  The pop state carries a DataVersion, bumped to a new state
  version when the slave starts acting and at every snapshot while it acts, so a returning
  master adopts the slave's state (receipt handles it gave out stay valid there).
"""
from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Protocol, Sequence

from ha.acting.escape_target import EscapeKind
from metadata.consumer_offsets import ConsumerOffsetTable
from metadata.consumer_offsets import parse_document as parse_offsets
from metadata.data_version import DataVersion
from metadata.message import MessageDraft, StoredMessage
from metadata.message_filter import FilterSyntaxError, MessageFilter, compile_filter
from metadata.names import dlq_topic, retry_topic_for
from metadata.offset_write import Accepted, OffsetWriteDecision, QueueFacts, QueueOffset, decide_offset_write
from metadata.replica_metadata import Adopt, Adoption, SyncDirection, VersionedDocument, adopted_offsets, decide_adoption
from metadata.status import Code, RequestRejected
from scheduler.pop.decisions import PopPlan, PopRejection, decide_ack, decide_change
from scheduler.pop.receipt import ReceiptHandle, decode
from scheduler.pop.records import (REVIVE_TOPIC, AckRecord, InFlight, QueueKey, Record, ResetRecord, SkipRecord, decode_records,
                                   encode_records)
from scheduler.pop.table import HandleCheck, PopTable
from services.acting.escape import EscapedItem, EscapeFailed
from services.acting.pop_journal import PopJournal
from services.broker import requeue
from services.broker.api import Delivery, FilterType, ReceiveRequest
from services.broker.config import BrokerConfig
from services.broker.config_files import Deferred, Write, read_document, write_document
from services.broker.groups import GroupManager
from services.broker.internal_put import put_retrying
from services.broker.long_poll import AppendNotifier
from services.broker.pop_log_writer import PopLogWriter
from services.broker.pop_planner import PopPlanner
from services.broker.pop_state_file import deferred_document, same_state
from services.broker.system_log import anchors, cut_below
from services.broker.offset_keeper import OffsetKeeper
from services.broker.topics import TopicManager
from store.errors import StoreError
from store.results import GetStatus

log = logging.getLogger(__name__)

POP_STATE_FILE = "popState.json"
JOURNAL_FILE = "actingPopJournal.bin"
OFFSET_FILE = "consumerOffset.json"
LOG_READ_BATCH = 1024
_NO_PROPERTIES = MappingProxyType({})


class BacklogHint(Protocol):
    """Whether another broker of a topic holds messages a group could receive now
    (services.messaging.backlog_probe, scheduler.pop.backlog_board)."""

    def elsewhere(self, topic: str, group: str, here: str) -> bool: ...

    def waiting(self, topic: str, group: str, here: str, change: int) -> None: ...


class PopService:
    def __init__(self, config: BrokerConfig, store, clock, topics: TopicManager, groups: GroupManager,
                 notifier: AppendNotifier, config_dir: Path):
        self.config, self.store, self.clock = config, store, clock
        self.topics, self.groups, self.notifier = topics, groups, notifier
        self.state_path = config_dir / POP_STATE_FILE
        self.offset_path = config_dir / OFFSET_FILE
        self.table = PopTable()
        self.keeper = OffsetKeeper(config.consumer_offset_update_version_step)
        self.log_offset = 0  # next pop-log record to apply
        self._generation = store.derived_generation  # the store's, when the table was built from its log
        self._rebuilding = False  # from the start of the log; the acting journal follows the log's end
        self.planner = PopPlanner(config, store, clock, topics, self)
        self.backlog_hint: BacklogHint | None = None  # the container's BacklogProbe: a backlog on another broker
        self.data_version = DataVersion()  # of the pop state; moves only while acting (and by adoption)
        self._written: tuple | None = None  # what popState.json holds: _state_signature() when written
        self.journal = PopJournal(config_dir / JOURNAL_FILE)
        self.bridge = None  # services.acting.escape.EscapeBridge while this slave acts
        self.fifo_gate = None  # services.acting.fifo_lock.FifoLocks (lockInStrictMode)
        self.serving: Callable[[], bool] = lambda: True  # the broker serves pop calls now (master, or acting)
        self.writer = PopLogWriter(self._put_records, lambda: self.serving(), lambda: RequestRejected(
            Code.FORBIDDEN, f"broker {self.config.broker_name} stopped serving pop calls"))

    # ---- recovery and snapshot -------------------------------------------------------------
    def recover(self) -> int:
        offsets = read_document(self.offset_path, parse_offsets)
        if offsets is not None:
            self.keeper = OffsetKeeper(self.config.consumer_offset_update_version_step, offsets)
        state = read_document(self.state_path, lambda doc: doc)
        if state is not None:
            self.table = PopTable.from_document(state)
            self.log_offset = int(state.get("reviveOffset", 0))
            self.data_version = DataVersion.from_json(state.get("dataVersion", {}), "pop dataVersion")
            if cut_below(self.store, {REVIVE_TOPIC: self.log_offset}, state.get("anchors")):
                log.warning("broker %s: %s was written before the pop log was cut below its cursor; the pop "
                            "state is rebuilt from the log", self.config.broker_name, self.state_path.name)
                self.table, self.log_offset = PopTable(), 0
        applied = self.catch_up()
        acted = self.journal.replay()  # an acting slave's records, newer than its log
        self._apply_all(acted)
        return applied + len(acted)

    def catch_up(self) -> int:
        """Apply pop-log records from the cursor to the end of the log; returns how many.  After
        the store invalidated what was derived from it (a truncation, or this broker stepped
        down as master), the table is rebuilt from the whole log first: a cursor past a cut
        would skip the records a new master wrote at those offsets (found by bench/chaos.py: a
        partitioned master's pop records were cut when it rejoined as a slave; promoted again,
        it held a FIFO queue's commit below offsets the other master had acked and never
        delivered that queue again), and records applied in memory whose writes never landed
        would stay applied."""
        return self._catch_up(None)[0]

    @property
    def rebuilding(self) -> bool:
        """The table is not its log's yet: the store invalidated it, or a rebuild in steps
        (Broker.catch_up_in_steps) has not reached the log's end."""
        return self._rebuilding or self.store.derived_generation != self._generation

    def catch_up_some(self, batches: int | None) -> bool:
        """:meth:`catch_up` with at most ``batches`` reads of the log; True once at its end."""
        return self._catch_up(batches)[1]

    def _catch_up(self, batches: int | None) -> tuple[int, bool]:
        applied = read = 0
        if self.store.derived_generation != self._generation:
            self._generation = self.store.derived_generation
            log.warning("broker %s: pop state rebuilt from the pop log (the log was cut, or the broker stepped "
                        "down as master)", self.config.broker_name)
            self.table, self.log_offset = PopTable(), 0
            self._rebuilding = True
        while batches is None or read < batches:
            result = self.store.get(REVIVE_TOPIC, 0, self.log_offset, LOG_READ_BATCH)
            if result.status is GetStatus.OFFSET_TOO_SMALL:  # trimmed by retention
                self.log_offset = result.next_offset
                continue
            if not result.messages:
                if self._rebuilding:  # an acting slave's records, newer than its log (as in recover)
                    self._rebuilding = False
                    self._apply_all(self.journal.replay())
                return applied, True
            self.log_offset, read = result.next_offset, read + 1
            for message in result.messages:
                records = decode_records(message.body)
                self._apply_all(records)
                applied += len(records)
        return applied, False

    def persist(self, write: Write = write_document, periodic: bool = False) -> None:
        """``periodic``: popState.json is left as it is when it holds this state already."""
        self.catch_up()
        self._write_state_files(write, periodic)

    def forget_written(self) -> None:
        """A write handed out did not reach the disk: the next snapshot writes the state."""
        self._written = None

    def _state_signature(self) -> tuple:
        return self.table, self.table.signature(), self.log_offset, self.data_version

    def _write_state_files(self, write: Write = write_document, periodic: bool = False) -> None:
        """popState.json (the pop table and the log offset it covers), then consumerOffset.json
        if it changed; each write is atomic and fsynced (config_files)."""
        if self.bridge is not None:
            self.data_version = self.data_version.next_version(self.clock.now_ms())
        signature = self._state_signature()
        if not periodic or self._written is None or not same_state(signature, self._written):
            write(self.state_path, self._deferred_state_document())
            self._written = signature
        offsets = self.keeper.table_to_persist(self.clock.now_ms())
        if offsets is not None:  # 80,000 offsets: 85 ms of text, made in the snapshot's worker thread
            write(self.offset_path, Deferred(offsets.to_document))

    def adopt_offsets(self, remote: ConsumerOffsetTable, direction: SyncDirection = SyncDirection.FROM_MASTER) -> Adoption:
        """Take a peer's offset table with its DataVersion when ``decide_adoption`` says so;
        the file is written before the table is used."""
        local = self.keeper.versioned_table(self.clock.now_ms())
        decision = decide_adoption(local.data_version, remote.data_version, direction)
        if isinstance(decision, Adopt):
            table = adopted_offsets(local, remote, direction)
            write_document(self.offset_path, table.to_document())
            self.keeper.adopt(table)
        return decision

    async def write_offsets(self, expected: DataVersion, offsets: Sequence[QueueOffset]) -> OffsetWriteDecision:
        """An admin compare-and-set write of consumer offsets (``metadata.offset_write``).

        Decided, applied to the pop table (skips: everything below each offset is consumed, so
        receives continue from there and no later ack commits a lower offset) and written to
        popState.json then consumerOffset.json with no await in between: no commit can slip
        between the compare and the set, and the reply leaves after both fsyncs.  Then the
        skips go to the pop log too, for the slaves' pop state (replaying them here is a no-op)."""
        self.catch_up()
        now = self.clock.now_ms()
        current = self.keeper.versioned_table(now).data_version
        facts = {item.ref: self._queue_facts(item) for item in offsets}
        decision = decide_offset_write(expected, current, offsets, facts, now)
        if not isinstance(decision, Accepted):
            return decision
        skips = [SkipRecord(QueueKey(item.group, item.topic, item.queue_id), item.offset) for item in decision.offsets]
        # a skip can land past its offset when the offsets after it were acked already
        commits = {(c.topic, c.group, c.queue_id): c.offset for c in self.table.apply_all(skips)}
        written = tuple(replace(item, offset=commits.get(item.ref, item.offset)) for item in decision.offsets)
        self.keeper.write({item.ref: item.offset for item in written}, decision.data_version)
        self._write_state_files()
        try:
            await self._write(skips, applied=True)
        except StoreError as error:  # durable here; the slaves' pop state gets the skips with the next write
            log.warning("offset write: %d skips not appended to the pop log (slaves' pop state keeps the old offsets): %s",
                        len(skips), error)
        return Accepted(written, decision.data_version)

    async def reset_offsets(self, group: str, topic: str, targets: dict[int, int]) -> list[tuple[int, int, int]]:
        """An operator's reset (``reset-offset-by-time``, ``skip-accumulated-message``): each queue
        of ``targets`` starts over at its offset, forward or back, with nothing in flight.

        Applied to the pop table and the offset table (DataVersion bumped, so slaves adopt it),
        both files written before the reply, then the resets go to the pop log for the slaves'
        pop state.  Returns (queue id, old committed offset, new offset) per queue.  Messages
        in flight at the reset are delivered again if at or past the new offset (their old
        receipt handles go stale)."""
        self.catch_up()
        now = self.clock.now_ms()
        seq = self.table.next_seq(now)
        old = {queue_id: self.committed_offset(group, topic, queue_id) or 0 for queue_id in targets}
        resets = [ResetRecord(QueueKey(group, topic, queue_id), offset, seq) for queue_id, offset in sorted(targets.items())]
        self.table.apply_all(resets)
        version = self.keeper.versioned_table(now).data_version.next_version(now)
        self.keeper.write({(topic, group, queue_id): offset for queue_id, offset in targets.items()}, version)
        self._write_state_files()
        try:
            await self._write(resets, applied=True)
        except StoreError as error:  # durable here; the slaves' pop state gets the resets with the next write
            log.warning("offset reset: %d resets not appended to the pop log: %s", len(resets), error)
        log.info("offsets of %s on %s reset: %s", group, topic,
                 ", ".join(f"queue {q} {old[q]} -> {o}" for q, o in sorted(targets.items())))
        return [(queue_id, old[queue_id], offset) for queue_id, offset in sorted(targets.items())]

    def _queue_facts(self, item: QueueOffset) -> QueueFacts:
        config = self.topics.get(item.topic)
        return QueueFacts(config.queue_nums if config is not None else None, self.store.max_offset(item.topic, item.queue_id),
                          self.committed_offset(item.group, item.topic, item.queue_id))

    def _apply(self, record: Record) -> None:
        self._apply_all((record,))

    def _apply_all(self, records: Sequence[Record]) -> None:
        commits = self.table.apply_all(records)
        if commits:
            now = self.clock.now_ms()
            for commit in commits:
                self.keeper.commit(commit.topic, commit.group, commit.queue_id, commit.offset, now)

    def _state_document(self) -> dict:
        return {**self.table.to_document(), **self._state_fields()}

    def _state_fields(self) -> dict:
        return {"reviveOffset": self.log_offset, "dataVersion": self.data_version.to_json(),
                "anchors": anchors(self.store, {REVIVE_TOPIC: self.log_offset})}

    def _deferred_state_document(self) -> Deferred:
        return deferred_document(self.table.capture(), self._state_fields())

    def versioned_state(self) -> VersionedDocument:
        """The caught-up pop state (table and log cursor) with its DataVersion, for a hand-over."""
        self.catch_up()
        document = self._state_document()
        return VersionedDocument(self.data_version, {k: v for k, v in document.items() if k not in ("dataVersion", "anchors")})

    def adopt_state(self, remote: VersionedDocument, direction: SyncDirection) -> Adoption:
        """Take a peer's pop state when ``decide_adoption`` says so, then apply this log's records
        past its cursor (a returning master's own records the peer never copied)."""
        decision = decide_adoption(self.data_version, remote.data_version, direction)
        if isinstance(decision, Adopt):
            self.table = PopTable.from_document(remote.document)
            self.log_offset = int(remote.document.get("reviveOffset", 0))
            self.data_version = remote.data_version
            write_document(self.state_path, self._state_document())
            self._written = self._state_signature()
            self.catch_up()
        return decision

    def start_acting(self, bridge) -> None:
        self.catch_up()
        self.open_state_version()
        self.bridge = bridge
        self._write_state_files()

    def open_state_version(self, state_version: int | None = None) -> None:
        """The pop state and the offsets move to ``state_version`` (None: the next one; see
        ``DataVersion.opening``); the caller writes them."""
        now = self.clock.now_ms()
        self.data_version = self.data_version.opening(now, state_version)
        self.keeper.open_state_version(now, state_version)

    def stop_acting(self) -> None:
        """The snapshot holds every journal record from here on: the journal can go."""
        self._write_state_files()
        self.bridge = None
        self.journal.clear()

    async def _write(self, records: Sequence[Record], applied: bool) -> None:
        """Append ``records`` to the pop log (services.broker.pop_log_writer: in order, and
        after any applied record a failed put left behind).  ``applied``: the caller applied
        them already (a receive reserves first; skips, resets); otherwise (ack, change) it
        applies them as soon as this returns, with no await in between."""
        if self.bridge is not None:  # acting: never the slave's own log; no await, so a switch never splits it
            self.journal.append(records)
            return
        await self.writer.write(records, applied)

    async def _put_records(self, records: list[Record], applied: bool) -> None:
        """One put of the writer's.  When every record in it was applied before the write (a
        receive's reservations), the cursor moves past them, so :meth:`persist` does not read
        them back.  Records applied only once written (acks, changes) are not applied yet
        when the put returns: moving the cursor past them let a snapshot taken before their
        callers resumed hold a cursor past an ack its table lacked, and a broker killed then
        delivered that acked message again (tests/integration/test_broker_crash.py, about one
        run in twenty).  Those are read back and applied again (idempotent) by the next
        catch-up."""
        now = self.clock.now_ms()
        drafts = [MessageDraft.trusted(REVIVE_TOPIC, 0, body, now, "", _NO_PROPERTIES, _NO_PROPERTIES)
                  for body in encode_records(records)]
        stored = await put_retrying(self.store, drafts, self.config.internal_put_retries,
                                    self.config.internal_put_retry_backoff_ms, "pop log")
        if applied and stored and stored[0].queue_offset <= self.log_offset:  # contiguous: all below applied
            self.log_offset = max(self.log_offset, stored[-1].queue_offset + 1)

    # ---- receive ---------------------------------------------------------------------------
    async def receive(self, request: ReceiveRequest) -> list[Delivery]:
        message_filter = self._filter(request)
        group = self.groups.get_or_create(request.group, self.clock.now_ms())
        if not group.consume_enable:
            raise RequestRejected(Code.FORBIDDEN, f"consumer group {request.group} is disabled")
        topic = self.topics.for_receive(request.topic)
        long_poll_ms = min(request.long_poll_ms, self.config.long_polling_max_ms)
        wait_until = min(request.deadline_ms, self.clock.monotonic_ms() + long_poll_ms)
        hint = self.backlog_hint if request.yields_to_backlog_elsewhere else None
        counted = False  # in the hint's count of receives waiting here
        timed_out = False  # the whole long poll was waited: one last look, then empty
        woken = False  # looking again after a wake: what it takes, it passes the wake on (long_poll)
        try:
            while True:
                if not self.serving():  # a long poll that outlived the acting slave's turn ends empty
                    return []
                allowed = None  # FIFO under lockInStrictMode: only the queues whose lock quorum this replica holds
                if group.consume_message_orderly and self.fifo_gate is not None and self.fifo_gate.strict:
                    allowed = await self.fifo_gate.acquire([QueueKey(request.group, request.topic, queue_id)
                                                            for queue_id in range(topic.read_queue_nums)])
                waiter = self.notifier.register((request.topic, retry_topic_for(request.group, request.topic)),
                                                request.group, request.queue_id)
                try:
                    found = self.planner.plan(request, message_filter, group.consume_message_orderly,
                                              group.max_delivery_attempts, topic.read_queue_nums, allowed, self._apply)
                    if found.plans:
                        if woken:
                            self.notifier.pass_on(waiter)
                        return await self._deliver(request.group, found.plans)
                    remaining = wait_until - self.clock.monotonic_ms()
                    if timed_out or remaining <= 0 or (hint is not None and hint.elsewhere(request.topic, request.group, self.config.broker_name)):
                        return []  # nothing here; the client's next receive goes to the next broker's queue
                    if hint is not None and not counted:
                        hint.waiting(request.topic, request.group, self.config.broker_name, +1)
                        counted = True
                    wait_ms = remaining
                    if found.redeliver_at_ms is not None:  # a locked FIFO batch becomes visible then
                        wait_ms = min(remaining, max(1, found.redeliver_at_ms - self.clock.now_ms()))
                    woken = await waiter.wait(wait_ms)
                    timed_out = not woken and wait_ms == remaining
                finally:
                    waiter.close()
        finally:
            if counted:
                hint.waiting(request.topic, request.group, self.config.broker_name, -1)

    @staticmethod
    def _filter(request: ReceiveRequest) -> MessageFilter:
        try:
            return compile_filter(request.filter.type is FilterType.SQL, request.filter.expression)
        except FilterSyntaxError as failure:
            raise RequestRejected(Code.ILLEGAL_FILTER_EXPRESSION, str(failure)) from None

    async def _deliver(self, group: str, plans: list[PopPlan]) -> list[Delivery]:
        await self._write([plan.record for plan in plans], applied=True)
        deliveries, dead = [], []
        for plan in plans:
            for item in plan.deliveries:
                if item.dead_letter:
                    dead.append((plan.record.key, item.entry, item.message))
                    continue
                handle = ReceiptHandle(plan.record.key.topic, plan.record.key.queue_id, item.entry.offset, item.entry.seq)
                deliveries.append(Delivery(requeue.consumer_view(item.message), handle.encode(), item.entry.attempt,
                                           item.entry.deadline_ms, requeue.dead_letter_origin(item.message)))
        if dead:
            try:
                await self._dead_letter(group, dead)
            except EscapeFailed as failure:  # reserved: they expire and the revive tries again
                log.debug("receive: dead-letter copies wait: %s", failure)
        return deliveries

    # ---- ack, change, forward ---------------------------------------------------------------
    async def ack(self, group: str, receipt_handle: str) -> None:
        (rejection,) = await self.ack_many(group, [receipt_handle])
        if rejection is not None:
            raise rejection

    async def ack_many(self, group: str, receipt_handles: Sequence[str]) -> list[RequestRejected | None]:
        """Ack in one pop-log put (one write, one shared fdatasync), then apply; per handle None
        (acked, or already) or why it was refused."""
        records: list[AckRecord] = []
        results: list[RequestRejected | None] = []
        for receipt_handle in receipt_handles:
            decision = decide_ack(self.table, group, decode(receipt_handle))
            if isinstance(decision, PopRejection):
                results.append(RequestRejected(Code.INVALID_RECEIPT_HANDLE, "receipt handle is stale, expired or unknown"))
                continue
            results.append(None)
            if decision is not None:
                records.append(decision)
        if records:
            await self._ack_all(records)
        return results

    async def change_invisible(self, group: str, receipt_handle: str, invisible_ms: int) -> str:
        decision = decide_change(self.table, group, decode(receipt_handle), invisible_ms, self.clock.now_ms())
        if isinstance(decision, PopRejection):
            raise RequestRejected(Code.INVALID_RECEIPT_HANDLE, "receipt handle is stale, expired or unknown")
        record, handle = decision
        await self._write([record], applied=False)
        self._apply(record)
        return handle.encode()

    async def forward_to_dead_letter(self, group: str, receipt_handle: str) -> None:
        handle = decode(receipt_handle)
        check = self.table.check_handle(group, handle) if handle is not None else HandleCheck.STALE
        if check is HandleCheck.ALREADY_ACKED:
            return
        if check is HandleCheck.STALE:
            raise RequestRejected(Code.INVALID_RECEIPT_HANDLE, "receipt handle is stale, expired or unknown")
        key = QueueKey(group, handle.topic, handle.queue_id)
        entry = self.table.get(key).inflight[handle.offset]
        message = self.store.read_at(entry.commit_offset)
        try:
            await self._dead_letter(group, [(key, entry, message)])
        except EscapeFailed as failure:
            raise RequestRejected(Code.HA_NOT_AVAILABLE, f"dead-letter queue not reachable now: {failure}") from None

    async def _dead_letter(self, group: str, items: list[tuple[QueueKey, InFlight, StoredMessage | None]]) -> None:
        drafts = [requeue.dead_letter_draft(m, group, e.attempt) for _, e, m in items if m is not None]
        if self.bridge is not None:
            escaped = [EscapedItem(f"{self.config.broker_name}:dlq:{k.group}:{k.topic}:{k.queue_id}:{e.offset}",
                                   EscapeKind.DEAD_LETTER, requeue.dead_letter_draft(m, group, e.attempt))
                       for k, e, m in items if m is not None]
            if escaped:
                origin = next(requeue.origin_topic(m) for _, _, m in items if m is not None)
                await self.bridge.escape(EscapeKind.DEAD_LETTER, origin, escaped)
        else:
            self.topics.ensure_system_topic(dlq_topic(group), self.clock.now_ms())
            if drafts:
                await put_retrying(self.store, drafts, self.config.internal_put_retries,
                                   self.config.internal_put_retry_backoff_ms, "dlq")
        await self._ack_all([AckRecord(key, entry.offset) for key, entry, _ in items])

    async def _ack_all(self, records: list[AckRecord]) -> None:
        await self._write(records, applied=False)
        held = {key for key in {record.key for record in records} if self._holds_back(key)}  # per queue, not per ack
        self._apply_all(records)
        for topic, group in {(key.topic, key.group) for key in held if not self._holds_back(key)}:
            self.notifier.wake_topic(topic, group=group)  # a FIFO batch acked whole (or room in flight): its group goes on

    def _holds_back(self, key: QueueKey) -> bool:
        """The queue delivers nothing new now: a FIFO batch in flight, or the in-flight limit reached."""
        state = self.table.get(key)
        return state is not None and bool(state.inflight) and (
            next(iter(state.inflight.values())).fifo or state.unacked >= self.config.pop_inflight_max_per_queue)

    # ---- revive -------------------------------------------------------------------------------
    async def revive(self) -> int:
        """Move expired non-FIFO in-flight messages to the retry topic (or the DLQ); returns how
        many.  While the store refuses puts (a full disk) they stay in flight, expired, and the
        next run tries again: one warning line, not a failed task."""
        expired = self.table.expired(self.clock.now_ms(), self.config.revive_batch_max)
        if not expired:
            return 0
        try:
            await self._revive(expired)
        except StoreError as error:
            log.warning("revive: %d expired messages wait: %s", len(expired), error)
            return 0
        except RequestRejected as stopped:  # stepped down mid-run: the group's next master revives them
            log.info("revive of %d expired messages stopped: %s", len(expired), stopped)
            return 0
        return len(expired)

    async def _revive(self, expired: list[tuple[QueueKey, InFlight]]) -> None:
        retries: list[tuple[QueueKey, InFlight, StoredMessage]] = []
        dead: list[tuple[QueueKey, InFlight, StoredMessage | None]] = []
        for key, entry in expired:
            message = self.store.read_at(entry.commit_offset)
            if message is None or entry.attempt + 1 > entry.max_attempts:
                dead.append((key, entry, message))
            else:
                retries.append((key, entry, message))
        if retries and self.bridge is not None:
            await self._escape_retries(retries)
        elif retries:
            drafts = [requeue.retry_draft(m, k.group, e.attempt) for k, e, m in retries]
            for draft in drafts:
                self.topics.ensure_system_topic(draft.topic, self.clock.now_ms())
            await put_retrying(self.store, drafts, self.config.internal_put_retries, self.config.internal_put_retry_backoff_ms, "retry")
            await self._ack_all([AckRecord(k, e.offset) for k, e, _ in retries])
        for key, entry, message in dead:
            try:
                await self._dead_letter(key.group, [(key, entry, message)])
            except EscapeFailed as failure:  # stays in flight, expired: the next run tries again
                log.debug("revive: dead-letter copy waits: %s", failure)

    async def _escape_retries(self, retries: list[tuple[QueueKey, InFlight, StoredMessage]]) -> None:
        """Acting: one escape per original topic; only what a master stored is acked here."""
        by_topic: dict[str, list[tuple[QueueKey, InFlight, StoredMessage]]] = {}
        for item in retries:
            by_topic.setdefault(requeue.origin_topic(item[2]), []).append(item)
        for topic, items in by_topic.items():
            escaped = [EscapedItem(f"{self.config.broker_name}:retry:{k.group}:{k.topic}:{k.queue_id}:{e.offset}:{e.seq}",
                                   EscapeKind.RETRY, requeue.retry_draft(m, k.group, e.attempt)) for k, e, m in items]
            try:
                await self.bridge.escape(EscapeKind.RETRY, topic, escaped)
            except EscapeFailed as failure:  # they stay in flight, expired: the next run tries again
                log.debug("revive: %d retries of %s wait: %s", len(items), topic, failure)
                continue
            await self._ack_all([AckRecord(k, e.offset) for k, e, _ in items])

    def receivable(self, group: str, topic: str, limit: int) -> int:
        """How many messages a receive of ``group`` could take from ``topic`` here now (a hint
        for another broker's long poll: services.messaging.backlog_probe); 0 when this broker
        does not serve pop calls or does not know the topic."""
        config = self.topics.get(topic)
        if not self.serving() or config is None or self.rebuilding:
            return 0
        known = self.groups.get(group)
        fifo = known is not None and known.consume_message_orderly
        return self.planner.receivable(group, topic, fifo, config.read_queue_nums, self.clock.now_ms(), limit)

    # ---- admin views --------------------------------------------------------------------------
    def inflight_count(self, group: str, topic: str, queue_id: int) -> int:
        state = self.table.get(QueueKey(group, topic, queue_id))
        return state.unacked if state else 0

    def committed_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        state = self.table.get(QueueKey(group, topic, queue_id))
        return state.commit if state else self.keeper.get(topic, group, queue_id)

    def drop_group(self, group: str) -> None:
        self.table.drop_group(group)
        self.keeper.drop_group(group, self.clock.now_ms())

