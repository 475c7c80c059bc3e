"""The timer driver: delay messages wait in ``rmq_sys_wheel_timer`` and are re-put when due.

Rules (the index rules are in ``scheduler.timer``):
- A due message is re-put into its real topic and queue together with its "delivered" op
  record in one put, so after a crash it is either delivered with its op or not at all
  (exactly once as far as one put is atomic: the store writes a batch in one write).
- A recall removes the entry from the index before writing its "cancelled" op (so a
  concurrent tick cannot deliver it); a message already being delivered, delivered, or
  unknown is NOT_FOUND.
- ``config/timerCheckpoint.json`` holds the index and both cursors; start loads it and
  rescans the timer and op topics from the cursors.  The periodic snapshot and a slave's
  metadata sync take a new checkpoint only when ``scheduler.timer.checkpoint_due`` says so,
  and hand out the last one until then (its cursors are older: the reader replays the rest of
  the two topics, which every replica of the group holds).  A checkpoint the acting slave's
  escapes need, a forced write (stop, a new state version) and a DataVersion compared with
  a peer's are always of the index as it is.
- The checkpoint carries a DataVersion (RocketMQ's timer checkpoint has one too).  It is the
  broker's delay offsets (delays run on the timer), so every ``delayOffsetUpdateVersionStep``-th
  resolution (a delivery, an escape, a recall, a replayed op) bumps it, as RocketMQ's
  ``ScheduleMessageService.updateOffset`` does, and it is also bumped whenever the index
  changed since the last bump, when it is written or handed to a peer
  (:meth:`TimerService.versioned_checkpoint`).  :meth:`TimerService.adopt_checkpoint`
  replaces the index by a peer's checkpoint with its DataVersion; the cursors are commit-log
  queue offsets, equal on every replica of the group.
- Acting slave (RIP-32): a due message escapes to a live master (``services.acting.escape``),
  batched per real topic; its entry is resolved here only after the target stored it, and
  the checkpoint is written at once (a slave writes no op to its own log).  An escape that
  finds no target resolves nothing: the messages wait.  :meth:`start_acting` opens a new
  state version (``stateVersion + 1``), so the master that returns adopts this checkpoint
  (its own never saw that state version) and delivers none of them again.  A controller-mode
  master opens its epoch instead (:meth:`open_state_version`).
"""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from ha.acting.escape_target import EscapeKind
from metadata.data_version import DataVersion, UpdateStep
from metadata.message import MessageDraft, Prop, StoredMessage
from metadata.replica_metadata import Adopt, Adoption, SyncDirection, VersionedDocument, decide_adoption
from metadata.status import Code, RequestRejected
from scheduler.timer import (CHECKPOINT_AMORTIZED_FROM, TIMER_OP_TOPIC, TIMER_TOPIC, RecallHandle, TimerIndex, checkpoint_due,
                             decode_recall_handle)
from scheduler.timer_text import pending_text, with_pending_text
from services.acting.escape import EscapedItem, EscapeFailed
from services.broker.config import BrokerConfig
from services.broker.config_files import Write, read_document, snapshot_document, write_document
from services.broker.internal_put import put_retrying
from services.broker.system_log import anchors, cut_below, op_body, parse_op, scan
from store.errors import StoreError

log = logging.getLogger(__name__)
CHECKPOINT_FILE = "timerCheckpoint.json"
_INTERNAL = (Prop.REAL_TOPIC, Prop.REAL_QUEUE_ID, Prop.TIMER_DEQUEUE_MS)


def timer_draft(draft: MessageDraft, due_ms: int) -> MessageDraft:
    properties = {**draft.properties, Prop.REAL_TOPIC: draft.topic, Prop.REAL_QUEUE_ID: str(draft.queue_id),
                  Prop.TIMER_DEQUEUE_MS: str(due_ms), Prop.DELIVERY_TIME_MS: str(due_ms)}
    return draft.with_changes(topic=TIMER_TOPIC, queue_id=0, properties=properties)


def real_draft(message: StoredMessage) -> MessageDraft:
    properties = {k: v for k, v in message.properties.items() if k not in _INTERNAL}
    return message.draft.with_changes(topic=message.properties[Prop.REAL_TOPIC],
                                      queue_id=int(message.properties[Prop.REAL_QUEUE_ID]), properties=properties)


def _parse_checkpoint(document) -> tuple[TimerIndex, DataVersion, object]:
    return (TimerIndex.from_document(document), DataVersion.from_json(document.get("dataVersion", {}), "timer dataVersion"),
            document.get("anchors"))


def _cursors(index: TimerIndex) -> dict[str, int]:
    return {TIMER_TOPIC: index.scan_offset, TIMER_OP_TOPIC: index.op_offset}


class _Taken:
    """A checkpoint taken of ``index`` when its signature was ``signature``."""
    __slots__ = ("index", "signature", "checkpoint")

    def __init__(self, index: TimerIndex, checkpoint: VersionedDocument):
        self.index, self.signature, self.checkpoint = index, index.signature(), checkpoint


class TimerService:
    amortized_from = CHECKPOINT_AMORTIZED_FROM  # checkpoint_due's: below it, every change is checkpointed

    def __init__(self, config: BrokerConfig, store, clock, config_dir: Path):
        self.config, self.store, self.clock = config, store, clock
        self.store_name = config.broker_name
        self.path = config_dir / CHECKPOINT_FILE
        self.index = TimerIndex()
        self.data_version = DataVersion()
        self.step = UpdateStep(config.delay_offset_update_version_step)
        self._taken: _Taken | None = None  # the last checkpoint taken, and of what
        self._written: VersionedDocument | None = None  # the checkpoint the file holds
        self._delivering: set[int] = set()
        self.bridge = None  # services.acting.escape.EscapeBridge while this slave acts
        self._escape_failed_logged = False
        self._generation = store.derived_generation  # the store's, when the index was built from its log

    def recover(self) -> None:
        loaded = read_document(self.path, _parse_checkpoint)
        self.index, self.data_version, anchored = loaded if loaded is not None else (TimerIndex(), DataVersion(), None)
        if cut_below(self.store, _cursors(self.index), anchored):
            log.warning("broker %s: %s was written before the timer log was cut below its cursors; the index is "
                        "rebuilt from the log", self.store_name, self.path.name)
            self.index = TimerIndex()
        self._taken = _Taken(self.index, VersionedDocument(self.data_version, self.index.to_document()))
        self._written = self._taken.checkpoint
        self.catch_up()

    def catch_up(self) -> None:
        self.catch_up_some(None)

    def catch_up_some(self, batches: int | None) -> bool:
        """Index the timer topic and apply its op log from the cursors (at most ``batches``
        reads; True once both are at their end); after the store invalidated what was derived
        from it, from the start (PopService.catch_up says why: past a cut, a cursor skips the
        due messages a new master wrote there).  The op log is applied once the index is."""
        if self.store.derived_generation != self._generation:
            self._generation = self.store.derived_generation
            log.warning("broker %s: timer index rebuilt from the timer log", self.store_name)
            self.index = TimerIndex()

        def index_one(message: StoredMessage) -> None:
            due = message.properties.get(Prop.TIMER_DEQUEUE_MS, "")
            if due.isdigit():
                self.index.add(message.queue_offset, int(due))

        def apply_op(message: StoredMessage) -> None:
            op = parse_op(message.body)
            if op is not None and isinstance(op.get("o"), int):
                self._resolve(op["o"])

        self.index.scan_offset, indexed = scan(self.store, TIMER_TOPIC, self.index.scan_offset, index_one, batches)
        if not indexed:
            return False
        self.index.op_offset, applied = scan(self.store, TIMER_OP_TOPIC, self.index.op_offset, apply_op, batches)
        return applied

    def _resolve(self, offset: int) -> None:
        """Resolve a pending entry (delivered, escaped, recalled): a commit of the delay offsets."""
        if self.index.resolve(offset) and self.step.commit():
            self.data_version = self.data_version.next_version(self.clock.now_ms())

    def versioned_checkpoint(self) -> VersionedDocument:
        """The caught-up index document, its DataVersion bumped first if the index changed."""
        self.catch_up()
        taken = self._taken
        if taken is None or taken.index is not self.index or taken.signature != self.index.signature():
            self.data_version = self.data_version.next_version(self.clock.now_ms())
            taken = self._taken = _Taken(self.index, VersionedDocument(self.data_version, self.index.to_document()))
        return taken.checkpoint

    def shared_checkpoint(self) -> VersionedDocument:
        """What the periodic snapshot writes and a slave's sync is handed: the last checkpoint
        taken while ``checkpoint_due`` says a new one is not worth its cost yet, else a new one."""
        self.catch_up()
        taken = self._taken
        if taken is not None and taken.index is self.index and \
                not checkpoint_due(len(self.index.pending), self.index.changes - taken.signature[0], self.amortized_from):
            return taken.checkpoint
        return self.versioned_checkpoint()

    def _file_document(self, checkpoint: VersionedDocument) -> dict:
        document = checkpoint.document
        cursors = {TIMER_TOPIC: document["scanOffset"], TIMER_OP_TOPIC: document["opOffset"]}
        return with_pending_text(checkpoint, dataVersion=checkpoint.data_version.to_json(),
                                 anchors=anchors(self.store, cursors))

    async def prepare_shared(self) -> None:
        """Take the shared checkpoint and write its pending entries' text in a worker thread
        (``scheduler.timer_text``), so that :meth:`persist` and a slave's sync find it written."""
        await asyncio.to_thread(pending_text, self.shared_checkpoint())

    def persist(self, write: Write = write_document, periodic: bool = False) -> None:
        """Write the checkpoint of the index as it is; ``periodic``: the shared one (see the
        module's rules), and nothing when the file holds it already."""
        checkpoint = self.shared_checkpoint() if periodic else self.versioned_checkpoint()
        if periodic and checkpoint is self._written:
            return
        write(self.path, self._file_document(checkpoint))
        self._written = checkpoint

    def forget_written(self) -> None:
        """A write handed out did not reach the disk: the next snapshot writes the checkpoint."""
        self._written = None

    def adopt_checkpoint(self, remote: VersionedDocument, direction: SyncDirection = SyncDirection.FROM_MASTER) -> Adoption:
        """Take a peer's checkpoint with its DataVersion when ``decide_adoption`` says so."""
        decision = decide_adoption(self.versioned_checkpoint().data_version, remote.data_version, direction)
        if isinstance(decision, Adopt):
            index = TimerIndex.from_document(remote.document)
            checkpoint = VersionedDocument(remote.data_version, index.to_document())
            write_document(self.path, self._file_document(checkpoint))
            self.index, self.data_version, self._taken = index, remote.data_version, _Taken(index, checkpoint)
            self._written = checkpoint
        return decision

    async def schedule(self, draft: MessageDraft, due_ms: int) -> tuple[StoredMessage, str]:
        stored = (await self.store.put([timer_draft(draft, due_ms)]))[0]
        handle = RecallHandle(draft.topic, stored.queue_offset, draft.message_id).encode()
        return stored, handle

    async def recall(self, topic: str, recall_handle: str) -> str:
        handle = decode_recall_handle(recall_handle)
        if handle is None or handle.topic != topic:
            raise RequestRejected(Code.NOT_FOUND, "recall handle is malformed or for another topic")
        self.catch_up()
        if not self.index.is_pending(handle.timer_offset) or handle.timer_offset in self._delivering:
            raise RequestRejected(Code.NOT_FOUND, "the message was already delivered, recalled or is unknown")
        due_ms = self.index.pending[handle.timer_offset]
        self._resolve(handle.timer_offset)
        op = MessageDraft(TIMER_OP_TOPIC, 0, op_body(o=handle.timer_offset, k="c"), self.clock.now_ms())
        try:
            await put_retrying(self.store, [op], self.config.internal_put_retries, self.config.internal_put_retry_backoff_ms, "timer recall")
        except Exception:
            self.index.add(handle.timer_offset, due_ms)
            raise
        return handle.message_id

    def start_acting(self, bridge) -> None:
        self.catch_up()
        self.bridge = bridge
        self.open_state_version()

    def open_state_version(self, state_version: int | None = None) -> None:
        """Move the checkpoint to ``state_version`` (None: the next one) and write it."""
        self.catch_up()
        opened = self.data_version.opening(self.clock.now_ms(), state_version)
        if opened != self.data_version:
            self.data_version = opened
            self._taken = _Taken(self.index, VersionedDocument(opened, self.index.to_document()))
            self.persist()

    def stop_acting(self) -> None:
        self.bridge = None
        self.persist()

    async def tick(self) -> int:
        """Deliver due messages; returns how many."""
        if self.bridge is not None:
            return await self._tick_acting()
        self.catch_up()
        delivered = 0
        for offset, _ in self.index.due(self.clock.now_ms(), self.config.timer_batch_max):
            if offset in self._delivering or not self.index.is_pending(offset):
                continue
            result = self.store.get(TIMER_TOPIC, 0, offset, 1)
            if not result.messages or result.messages[0].queue_offset != offset:
                log.error("timer: message at offset %d is gone (retention?); dropping it", offset)
                self._resolve(offset)
                continue
            self._delivering.add(offset)
            try:
                op = MessageDraft(TIMER_OP_TOPIC, 0, op_body(o=offset, k="d"), self.clock.now_ms())
                await put_retrying(self.store, [real_draft(result.messages[0]), op], self.config.internal_put_retries,
                                   self.config.internal_put_retry_backoff_ms, "timer delivery")
                self._resolve(offset)
                delivered += 1
            except StoreError as error:  # a full disk: still pending, the next tick tries again
                log.warning("timer: due messages wait: %s", error)
                break
            finally:
                self._delivering.discard(offset)
        return delivered

    async def _tick_acting(self) -> int:
        """Escape due messages, one put per real topic; resolve (and checkpoint) what was stored."""
        self.catch_up()
        by_topic: dict[str, list[tuple[int, MessageDraft]]] = {}
        for offset, _ in self.index.due(self.clock.now_ms(), self.config.timer_batch_max):
            if offset in self._delivering:  # another run escapes it now
                continue
            result = self.store.get(TIMER_TOPIC, 0, offset, 1)
            if not result.messages or result.messages[0].queue_offset != offset:
                log.error("timer: message at offset %d is gone (retention?); dropping it", offset)
                self._resolve(offset)
                continue
            draft = real_draft(result.messages[0])
            by_topic.setdefault(draft.topic, []).append((offset, draft))
            self._delivering.add(offset)
        delivered = 0
        try:
            for topic, due in by_topic.items():
                delivered += await self._escape_due(topic, due)
        finally:
            for due in by_topic.values():
                self._delivering.difference_update(offset for offset, _ in due)
        if delivered:
            await self._persist_off_loop()
        return delivered

    async def _persist_off_loop(self) -> None:
        """The acting slave's record of what it escaped is this checkpoint (it never writes its
        log): taken here, with no await between the index and it, written and fsynced in a
        worker thread before the run ends, as the broker's periodic snapshot is (a slow disk's
        fsync on the loop stalls every call the container serves)."""
        writes: list = []
        self.persist(lambda path, document: writes.append(snapshot_document(path, document)))
        try:
            await asyncio.to_thread(lambda: [write() for write in writes])
        except BaseException:
            self.forget_written()
            raise

    async def _escape_due(self, topic: str, due: list[tuple[int, MessageDraft]]) -> int:
        items = [EscapedItem(f"{self.store_name}:timer:{offset}", EscapeKind.DELAY, draft) for offset, draft in due]
        try:
            await self.bridge.escape(EscapeKind.DELAY, topic, items)
        except EscapeFailed as failure:
            self._log_escape_failure(failure)
            return 0
        self._escape_failed_logged = False
        for offset, _ in due:
            self._resolve(offset)
        return len(due)

    def _log_escape_failure(self, failure: Exception) -> None:
        level = logging.DEBUG if self._escape_failed_logged else logging.WARNING
        log.log(level, "timer: due messages wait: %s", failure)
        self._escape_failed_logged = True

