"""The transaction driver: half messages, EndTransaction, and the orphan check service.

Rules (the table's rules are in ``scheduler.transaction_check``):
- A TRANSACTION send is stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` with its real topic and queue
  in properties; it is invisible to consumers.  Its transaction id names the half's offset
  (``<hex offset>-<message id>``), so EndTransaction finds it without an index.
- Commit puts the real message and the commit op in one put; rollback and give-up put an op.
  The put is an internal re-put and retries on transient store errors (upstream #7709).
  EndTransactions are serialised so two resolutions of one half cannot race.
- A repeated resolution is OK, a contradicting one or an unknown id is INVALID_TRANSACTION_ID.
- The check service pushes TransactionCheck through the sink (the servicer's Telemetry
  registry); after ``transactionCheckMax`` checks the half is discarded and logged.
- ``config/transactionCheckpoint.json`` holds the table and both cursors, with a DataVersion
  bumped whenever the table changed since the last bump (as the timer checkpoint's).
- A resolution whose write fails is kept as *decided* (``scheduler.transaction_check``) and
  written to the checkpoint at once; every check run retries the write until it succeeds,
  and the half is neither checked again nor discarded meanwhile (upstream #7709).
- Acting slave (RIP-32): checks go out as on a master; a commit escapes the real message to a
  live master (``services.acting.escape``) and a rollback or discard only resolves the table:
  a slave writes no op to its own log.  The checkpoint is written after every resolution, and
  :meth:`start_acting` opens a new state version so a returning master adopts it.
"""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from ha.acting.escape_target import EscapeKind
from metadata.data_version import DataVersion
from metadata.message import MessageDraft, Prop, StoredMessage
from metadata.replica_metadata import Adopt, Adoption, SyncDirection, VersionedDocument, decide_adoption
from metadata.status import Code, RequestRejected
from scheduler.transaction_check import HALF_TOPIC, OP_TOPIC, CheckKind, EndRejection, Resolution, TransactionTable
from services.acting.escape import EscapedItem, EscapeFailed
from services.broker.api import TransactionCheck, TransactionCheckSink
from services.broker.config import BrokerConfig
from services.broker.config_files import Write, read_document, write_document
from services.broker.internal_put import put_retrying
from services.broker.system_log import anchors, cut_below, op_body, parse_op, scan
from store.errors import StoreError

log = logging.getLogger(__name__)
CHECKPOINT_FILE = "transactionCheckpoint.json"
RESOLVED_MAX = 100_000
_INTERNAL = (Prop.REAL_TOPIC, Prop.REAL_QUEUE_ID, Prop.TRANSACTION_PREPARED)


def transaction_id(half_offset: int, message_id: str) -> str:
    return f"{half_offset:x}-{message_id}"


def parse_transaction_id(text: str) -> int | None:
    head, sep, _ = text.partition("-")
    if not sep or not head or len(head) > 16 or any(c not in "0123456789abcdef" for c in head):
        return None
    return int(head, 16)


def half_draft(draft: MessageDraft) -> MessageDraft:
    properties = {**draft.properties, Prop.REAL_TOPIC: draft.topic, Prop.REAL_QUEUE_ID: str(draft.queue_id),
                  Prop.TRANSACTION_PREPARED: "true"}
    return draft.with_changes(topic=HALF_TOPIC, queue_id=0, properties=properties)


def real_draft(half: StoredMessage) -> MessageDraft:
    properties = {k: v for k, v in half.properties.items() if k not in _INTERNAL}
    return half.draft.with_changes(topic=half.properties[Prop.REAL_TOPIC], queue_id=int(half.properties[Prop.REAL_QUEUE_ID]),
                                   properties=properties)


def _cursors(table: TransactionTable) -> dict[str, int]:
    return {HALF_TOPIC: table.half_offset, OP_TOPIC: table.op_offset}


class TransactionService:
    def __init__(self, config: BrokerConfig, store, clock, sink: TransactionCheckSink, config_dir: Path):
        self.config, self.store, self.clock, self.sink = config, store, clock, sink
        self.path = config_dir / CHECKPOINT_FILE
        self.table = TransactionTable(RESOLVED_MAX)
        self.data_version = DataVersion()
        self._taken: tuple[TransactionTable, tuple[int, int, int], VersionedDocument] | None = None  # last checkpoint, of what
        self._written: VersionedDocument | None = None  # the checkpoint the file holds
        self._end_lock = asyncio.Lock()
        self.bridge = None  # services.acting.escape.EscapeBridge while this slave acts
        self._generation = store.derived_generation  # the store's, when the table was built from its log

    def recover(self) -> None:
        document = read_document(self.path, lambda doc: doc)
        self.table = TransactionTable.from_document(document, RESOLVED_MAX) if document else TransactionTable(RESOLVED_MAX)
        self.data_version = DataVersion.from_json((document or {}).get("dataVersion", {}), "transaction dataVersion")
        if cut_below(self.store, _cursors(self.table), (document or {}).get("anchors")):
            log.warning("broker %s: %s was written before the half or op log was cut below its cursors; the "
                        "table is rebuilt from the logs", self.config.broker_name, self.path.name)
            self.table = TransactionTable(RESOLVED_MAX)
        self._take(self.data_version)
        self._written = self._taken[2]
        self.catch_up()

    def catch_up(self) -> None:
        self.catch_up_some(None)

    def catch_up_some(self, batches: int | None) -> bool:
        """Apply the half and op logs from the cursors (at most ``batches`` reads; True once
        both are at their end); after the store invalidated what was derived from it, from
        the start (PopService.catch_up says why).  The op log is applied once the halves are."""
        if self.store.derived_generation != self._generation:
            self._generation = self.store.derived_generation
            log.warning("broker %s: transaction table rebuilt from the half and op logs", self.config.broker_name)
            self.table = TransactionTable(RESOLVED_MAX)

        def add(message: StoredMessage) -> None:
            self.table.add_half(message.queue_offset, message.properties.get(Prop.REAL_TOPIC, ""),
                                transaction_id(message.queue_offset, message.message_id),
                                message.store_timestamp_ms, self.config.transaction_timeout_ms)

        def resolve(message: StoredMessage) -> None:
            op = parse_op(message.body)
            if op is not None and isinstance(op.get("o"), int) and op.get("k") in {r.value for r in Resolution}:
                self.table.resolve(op["o"], Resolution(op["k"]))

        self.table.half_offset, added = scan(self.store, HALF_TOPIC, self.table.half_offset, add, batches)
        if not added:
            return False
        self.table.op_offset, resolved = scan(self.store, OP_TOPIC, self.table.op_offset, resolve, batches)
        return resolved

    def versioned_checkpoint(self) -> VersionedDocument:
        """The caught-up table document, its DataVersion bumped first if the table changed
        (told by ``TransactionTable.signature``, not by comparing documents)."""
        self.catch_up()
        taken = self._taken
        if taken is None or taken[0] is not self.table or taken[1] != self.table.signature():
            self.data_version = self.data_version.next_version(self.clock.now_ms())
            self._take(self.data_version)
        return self._taken[2]

    def _take(self, data_version: DataVersion) -> None:
        self._taken = (self.table, self.table.signature(), VersionedDocument(data_version, self.table.to_document()))

    def _file_document(self, table: TransactionTable, document: dict, data_version: DataVersion) -> dict:
        return {**document, "dataVersion": data_version.to_json(), "anchors": anchors(self.store, _cursors(table))}

    def persist(self, write: Write = write_document, periodic: bool = False) -> None:
        """Write the checkpoint; ``periodic``: nothing when the file holds this one already."""
        checkpoint = self.versioned_checkpoint()
        if periodic and checkpoint is self._written:
            return
        write(self.path, self._file_document(self.table, checkpoint.document, checkpoint.data_version))
        self._written = checkpoint

    def forget_written(self) -> None:
        """A write handed out did not reach the disk: the next snapshot writes the checkpoint."""
        self._written = None

    def adopt_checkpoint(self, remote: VersionedDocument, direction: SyncDirection) -> Adoption:
        """Take a peer's checkpoint with its DataVersion when ``decide_adoption`` says so."""
        decision = decide_adoption(self.versioned_checkpoint().data_version, remote.data_version, direction)
        if isinstance(decision, Adopt):
            table = TransactionTable.from_document(remote.document, RESOLVED_MAX)
            document = table.to_document()
            write_document(self.path, self._file_document(table, document, remote.data_version))
            self.table, self.data_version = table, remote.data_version
            self._take(remote.data_version)
            self._written = self._taken[2]
            self.catch_up()
        return decision

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
            self._take(opened)
            self.persist()

    def stop_acting(self) -> None:
        self.bridge = None
        self.persist()

    async def prepare(self, draft: MessageDraft) -> tuple[StoredMessage, str]:
        stored = (await self.store.put([half_draft(draft)]))[0]
        return stored, transaction_id(stored.queue_offset, draft.message_id)

    def _half(self, topic: str, message_id: str, txid: str) -> StoredMessage:
        offset = parse_transaction_id(txid)
        result = self.store.get(HALF_TOPIC, 0, offset, 1) if offset is not None else None
        half = result.messages[0] if result and result.messages else None
        if (half is None or half.queue_offset != offset or half.message_id != message_id
                or half.properties.get(Prop.REAL_TOPIC) != topic or transaction_id(offset, message_id) != txid):
            raise RequestRejected(Code.INVALID_TRANSACTION_ID, f"no transaction {txid!r} for message {message_id} in topic {topic}")
        return half

    def holds(self, topic: str, message_id: str, txid: str) -> bool:
        """This broker's log has the half message ``txid`` names (an EndTransaction is for it)."""
        try:
            self._half(topic, message_id, txid)
        except RequestRejected:
            return False
        return True

    async def end(self, topic: str, message_id: str, txid: str, commit: bool) -> None:
        async with self._end_lock:
            half = self._half(topic, message_id, txid)
            self.catch_up()
            decision = self.table.decide_end(half.queue_offset, commit)
            if isinstance(decision, Resolution):
                return
            if isinstance(decision, EndRejection):
                raise RequestRejected(Code.INVALID_TRANSACTION_ID, f"transaction {txid}: {decision.value}")
            resolution = Resolution.COMMIT if commit else Resolution.ROLLBACK
            await self._resolve(half, resolution)

    async def _resolve(self, half: StoredMessage, resolution: Resolution) -> None:
        """Write the resolution (on an acting slave: escape a commit), then apply it; a failed
        write keeps it decided (checkpointed) and raises a status the producer may retry."""
        try:
            if self.bridge is not None:
                if resolution is Resolution.COMMIT:
                    item = EscapedItem(f"{self.config.broker_name}:tx:{half.queue_offset}", EscapeKind.TRANSACTION,
                                       real_draft(half))
                    await self.bridge.escape(EscapeKind.TRANSACTION, item.draft.topic, [item])
            else:
                op = MessageDraft(OP_TOPIC, 0, op_body(o=half.queue_offset, k=resolution.value), self.clock.now_ms())
                drafts = [real_draft(half), op] if resolution is Resolution.COMMIT else [op]
                await put_retrying(self.store, drafts, self.config.internal_put_retries,
                                   self.config.internal_put_retry_backoff_ms, f"transaction {resolution.name.lower()}")
        except (StoreError, RequestRejected, EscapeFailed) as failure:
            self.table.decide(half.queue_offset, resolution)
            self.persist()
            raise RequestRejected(Code.HA_NOT_AVAILABLE, f"transaction {transaction_id(half.queue_offset, half.message_id)}: "
                                  f"{resolution.name.lower()} kept but not written yet ({failure}); it is retried "
                                  "until written") from failure
        self.table.resolve(half.queue_offset, resolution)
        if self.bridge is not None:
            self.persist()

    async def _retry_decided(self) -> int:
        """Write the resolutions kept after a failed write; the ones that fail again stay kept."""
        written = 0
        for offset, resolution in list(self.table.decided.items())[:self.config.timer_batch_max]:
            result = self.store.get(HALF_TOPIC, 0, offset, 1)
            if not result.messages or result.messages[0].queue_offset != offset:
                self.table.resolve(offset, Resolution.DISCARD)
                continue
            try:
                await self._resolve(result.messages[0], resolution)
                written += 1
            except RequestRejected as failure:
                log.debug("%s", failure)
        return written

    async def check(self) -> int:
        """One scan: push checks for orphaned halves, discard the ones out of checks."""
        async with self._end_lock:
            self.catch_up()
            await self._retry_decided()
            now = self.clock.now_ms()
            actions = self.table.decide_checks(now, self.config.transaction_check_max, self.config.timer_batch_max)
            for action in actions:
                result = self.store.get(HALF_TOPIC, 0, action.half.offset, 1)
                half = result.messages[0] if result.messages and result.messages[0].queue_offset == action.half.offset else None
                if action.kind is CheckKind.DISCARD or half is None:
                    log.warning("transaction %s (topic %s) unresolved after %d checks: discarded",
                                action.half.transaction_id, action.half.topic, action.half.checks)
                    if half is None:
                        self.table.resolve(action.half.offset, Resolution.DISCARD)
                    else:
                        await self._discard(half)
                    continue
                view = half.__class__(real_draft(half), half.commit_offset, half.size, half.queue_offset, half.store_timestamp_ms)
                pushed = self.sink.push_transaction_check(TransactionCheck(action.half.topic, action.half.transaction_id, view))
                log.debug("transaction check %s pushed=%s", action.half.transaction_id, pushed)
                self.table.checked(action.half.offset, now, self.config.transaction_check_interval_ms)
            return len(actions)

    async def _discard(self, half: StoredMessage) -> None:
        try:
            await self._resolve(half, Resolution.DISCARD)
        except RequestRejected as failure:  # kept as decided: the next run writes it
            log.warning("%s", failure)

