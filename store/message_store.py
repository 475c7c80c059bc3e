"""MessageStore: the commit log, its consume queues and the checkpoint behind one facade.

Rules:

* Every method runs on the one event-loop thread; fdatasync runs on the flush thread, or on
  the loop while the disk is fast (store.flush).  ``put`` writes, then under SYNC_FLUSH awaits
  the group commit and only then indexes and acknowledges, so a consumer never sees (or commits
  an offset past) a message that a crash could take back.  ASYNC_FLUSH indexes and answers
  right after the write, without awaiting anything (``put_rows_now``).
* A put that times out waiting for fdatasync raises FlushTimeout (FLUSH_DISK_TIMEOUT); its
  records stay in the log and become visible once flushed, as upstream.
* Queue offsets are assigned at write time, per (topic, queue_id), in order.
* Formats: store.record (commit log), store.cq_entry (consume queues), store.checkpoint; under
  ``storePathRootDir``: ``commitlog/``, ``consumequeue/TOPIC/QUEUE_ID/``, ``checkpoint``.
* Retention (clean_expired) decides with store.retention (pure) and deletes whole segments.
* A write that fails (ENOSPC, EIO) fails its put with DISK_FULL and nothing else: records
  written to the commit log whose consume-queue entries could not be written are held
  (store.held_entries) and indexed again before any new put; until that works every put is
  refused at once (DISK_FULL), and it is tried again at most every ``WRITE_RETRY_MS`` by the
  next put or retention pass, so service resumes by itself once space is back.  (Found by
  the disk-full test of issue 16: the entries' write raised inside the flush callback, the
  put hung until syncFlushTimeout and its records were never indexed.)  A slave's copied run
  whose entries fail to write is committed with its entries held the same way, and the
  slave copies nothing more (``stage_raw`` refuses with DISK_FULL) until they are written:
  its replication driver closes the connection and connects again until space is back.
* On shared storage (``shared``, store.takeover) a put is acknowledged only after its bytes
  are written (SYNC_FLUSH: flushed) and no newer owner claimed the store; once one did, that
  put and every later one fail (NotWritable).
* Reading (get, offset search) lives in store.reader; this module owns writes and lifecycle.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Callable, Sequence

from ha.replication.messages import QueueSlice
from metadata.message import MessageDraft, StoredMessage, tag_hash
from store import record, retention
from store.checkpoint import Checkpoint
from store.checkpoint_file import CheckpointFile
from store.commit_log import CommitLog
from store.config import CQ_ENTRY_SIZE, FlushDiskType, StoreConfig
from store.cq_entry import encode_entry
from store.epoch_log import EpochLog
from store.errors import (BadOffset, BadReplicationData, BatchTooLarge, DiskFull, FlushTimeout,
                          MessageTooLarge, NotWritable, StoreClosed, StoreError, StoreIOError)
from store.flush import FlushHooks, FlushService, GroupCommit
from store.held_entries import HeldEntries, Pending, Run, runs_of
from store.notifications import Notifications
from store.put_rows import Placed, Row, encode_rows, row_of
from store.queue_table import QueueTable
from store.reader import Reader
from store.record import Invalid
from store.recovery import recover
from store.takeover import fenced_reason, open_owned
from store.replica_index import IndexCursor, StagedRun, check_indexed_run
from store.results import GetResult, GetStatus, RecoveryReport

__all__ = ["MessageStore", "StoreConfig", "FlushDiskType", "GetResult", "GetStatus", "RecoveryReport",
           "StoreError", "FlushTimeout", "MessageTooLarge", "BatchTooLarge", "StoreClosed", "DiskFull",
           "BadReplicationData", "BadOffset"]

log = logging.getLogger(__name__)
WRITE_RETRY_MS = 1000   # a store whose write failed tries again at most this often

class MessageStore(Reader, Notifications):
    def __init__(self, config: StoreConfig, now_ms: Callable[[], int], shared: str | None = None):
        """``shared``: on shared storage, the opener's internal address (None: a local store)."""
        self.config = config
        self._now_ms = now_ms
        self.shared, self.ownership_epoch, self._fenced = shared, 0, None
        root = self.state_dir = config.store_path_root_dir  # state_dir: checkpoint, epochs, the broker's config/
        self._checkpoint = CheckpointFile(root / "checkpoint")  # the loop's and the flush thread's
        self._log: CommitLog | None = None
        self._queues: QueueTable | None = None
        self._flush: FlushService | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._next_queue_offset: dict[tuple[str, int], int] = {}
        self._staged_end: int | None = None  # end of the runs staged beyond the log's end (a slave's)
        self._pending: deque[Pending] = deque()  # SYNC_FLUSH: written, awaiting fdatasync
        self._waiters: deque[tuple[int, asyncio.Future]] = deque()
        self._init_notifications()
        self.epochs: EpochLog | None = None
        self._indexed_offset = 0  # every record below it has its consume-queue entry written
        self._disk_full = False
        self._write_failure: str | None = None   # why writes stopped (a failed write); None: they work
        self._held = HeldEntries()               # records in the log whose consume-queue entries failed to write
        self._last_write_retry_ms = 0
        self._last_usage_check_ms = 0
        self._refusing_puts: str | None = None  # why local puts are refused (a slave's log is its master's)
        self.derived_generation = 0  # moves when state derived from the log must be rebuilt
        self._open = False

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> RecoveryReport:
        root = self.config.store_path_root_dir
        try:
            root.mkdir(parents=True, exist_ok=True)
            opened = open_owned(root, self.config, self.shared)
        except (OSError, ValueError) as failure:
            raise StoreIOError(f"cannot open the store at {root}: {failure}") from None
        self._log, self._queues, self.ownership_epoch, state = opened
        if state != root:
            self._checkpoint, self.state_dir = CheckpointFile(state / "checkpoint"), state
        point = self._checkpoint.read()
        report = recover(self._log, self._queues, point)
        self.epochs = EpochLog(state)
        self.epochs.reconcile(self._log.min_offset, self._log.write_offset)
        self._indexed_offset = self._log.write_offset
        self._next_queue_offset = {(q.topic, q.queue_id): q.max_offset for q in self._queues.all()}
        self._checkpoint.adopt(Checkpoint(
            master_flushed_offset=point.master_flushed_offset if point else 0,
            confirm_phy_offset=point.confirm_phy_offset if point else 0,
            commit_log_flushed_offset=self._log.write_offset,
            consume_queue_flushed_offset=min(point.consume_queue_flushed_offset, self._log.write_offset)
            if point else self._log.min_offset))
        self._log.files.sync_all()
        self._queues.sync_all()
        self._write_checkpoint(self._log.write_offset, self._log.write_offset, clean=False)
        self._start_flush_thread()
        self._open = True
        log.info("store recovered: %s", report)
        return report

    def _start_flush_thread(self) -> None:
        hooks = FlushHooks(written_offset=lambda: self._log.write_offset,
                           sync_commit_log=self._log.files.sync,
                           sync_queues_and_checkpoint=self._sync_queues_and_checkpoint,
                           report=self._on_flushed)
        self._flush = FlushService(
            hooks, on_demand=self.config.flush_disk_type is FlushDiskType.SYNC_FLUSH,
            interval_ms=self.config.flush_interval_commit_log_ms,
            queue_interval_ms=self.config.flush_interval_consume_queue_ms,
            flushed_offset=self._log.write_offset, call_soon_threadsafe=self._call_on_loop,
            group_commit=GroupCommit(window_s=self.config.group_commit_window_us / 1e6))
        self._flush.start()

    def _call_on_loop(self, fn: Callable, *args) -> None:
        """Flush thread: run ``fn`` on the loop that last put (none yet: nobody is waiting)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn, *args)

    def shutdown(self) -> None:
        if not self._open:
            return
        self._open = False
        self._flush.stop()
        self._log.files.sync_all()
        self._on_flushed(self._log.write_offset, None)
        self._queues.sync_all()
        self._write_checkpoint(self._log.write_offset, self._indexed_offset, clean=True)
        for _, waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(StoreClosed("store shut down"))
        self._waiters.clear()
        self._queues.close()
        self._log.files.close()

    def _write_checkpoint(self, log_flushed: int, queues_flushed: int, clean: bool) -> None:
        self._checkpoint.write(self._now_ms(), log_flushed, queues_flushed, clean)

    def _sync_queues_and_checkpoint(self, log_flushed: int, generation: int) -> None:
        """Flush thread: entries below ``indexed`` were written before it was read, so sync covers
        them.  ``log_flushed`` was read in ``generation``: after a truncation since, it may name
        bytes cut and written again unsynced, and the truncation wrote its own checkpoint."""
        indexed = self._indexed_offset
        self._queues.sync_all()
        self._checkpoint.write(self._now_ms(), log_flushed, indexed, False, lambda: self._flush.current(generation))

    # --- writing -----------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if not self._open:
            raise StoreClosed("the store is not running")

    async def put(self, drafts: Sequence[MessageDraft]) -> list[StoredMessage]:
        now, placed = await self.put_rows([row_of(draft) for draft in drafts])
        trusted = StoredMessage.trusted
        return [trusted(draft, commit_offset, size, queue_offset, now)
                for draft, (commit_offset, size, queue_offset) in zip(drafts, placed)]

    async def put_rows(self, rows: Sequence[Row]) -> tuple[int, list[Placed]]:
        """Write ``rows`` (store.put_rows) as one put: the store timestamp, and where each went."""
        if self.config.flush_disk_type is FlushDiskType.ASYNC_FLUSH:
            return self.put_rows_now(rows)
        written, pending = self._start_put(rows)
        waiter = self._loop.create_future()
        self._pending.extend(pending)
        self._waiters.append((self._log.write_offset, waiter))
        self._flush.wake_soon(self._loop, len(rows))
        # a timer handle, not wait_for + shield (a task and two futures per put on the hot path)
        timeout = self._loop.call_later(self.config.sync_flush_timeout_ms / 1000, _time_out, waiter,
                                        self.config.sync_flush_timeout_ms)
        try:
            await waiter
        finally:
            timeout.cancel()
        self._check_still_owner()
        return written

    def put_rows_now(self, rows: Sequence[Row]) -> tuple[int, list[Placed]]:
        """ASYNC_FLUSH's :meth:`put_rows`, which waits for nothing (the flush thread syncs later):
        written and indexed when it returns, so no other task runs between a put and its answer."""
        written, pending = self._start_put(rows)
        self._index(pending)
        self._check_still_owner()
        return written

    def _start_put(self, rows: Sequence[Row]) -> tuple[tuple[int, list[Placed]], list[Pending]]:
        self._check_open()  # the checks every put passes, then the write
        if len(rows) > self.config.max_batch_put:
            raise BatchTooLarge(f"{len(rows)} records in one put, more than maxBatchPut {self.config.max_batch_put}")
        if self._disk_full and not self._disk_space_back():
            raise DiskFull(f"disk usage above diskSpaceWarningLevelRatio {self.config.disk_space_warning_level_ratio}%")
        if self._refusing_puts is not None or self._fenced is not None:
            raise NotWritable(self._fenced or self._refusing_puts)
        if self._write_failure is not None and not self.retry_failed_writes():
            raise DiskFull(f"the store cannot write ({self._write_failure}); retrying every {WRITE_RETRY_MS} ms")
        self._loop = asyncio.get_running_loop()
        written, pending = self._write(rows)
        self._notify_written(self._log.write_offset)
        return written, pending

    def _check_still_owner(self) -> None:
        if self.shared is not None and self.fenced():
            raise NotWritable(self._fenced)

    def fenced(self) -> str | None:
        """A shared store another owner took over: why (every put is refused from then on)."""
        self._fenced = self._fenced or fenced_reason(self.config.store_path_root_dir, self.ownership_epoch)
        return self._fenced

    def _write(self, rows: Sequence[Row]) -> tuple[tuple[int, list[Placed]], list[Pending]]:
        """Encode, assign queue offsets and append; nothing is assigned if anything is refused."""
        limit = min(self.config.max_message_size, self._log.max_record_size()) - record.HEADER_SIZE
        records, offsets = encode_rows(rows, limit, self._next_queue_offset)
        now = self._now_ms()
        try:
            commit_offsets = self._log.append(records, now)
        except OSError as failure:
            self._write_failure = f"commit log write failed: {failure}"
            self._last_write_retry_ms = now
            raise DiskFull(self._write_failure) from None
        self._next_queue_offset.update(offsets)
        placed, pending = [], []
        header_size = record.HEADER_SIZE
        for row, (tail, queue_id, queue_offset, _), commit_offset in zip(rows, records, commit_offsets):
            size = header_size + len(tail)
            placed.append((commit_offset, size, queue_offset))
            entry = encode_entry(commit_offset, size, tag_hash(row[4]))
            pending.append((commit_offset + size, row[0], queue_id, queue_offset, entry))
        return (now, placed), pending

    def _index(self, pending: Sequence[Pending]) -> None:
        """Write consume-queue entries (grouped per queue) and wake listeners."""
        if pending:
            self._index_runs(runs_of(pending), pending[-1][0])

    def _index_runs(self, runs: Sequence[tuple[str, int, int, bytes]], end_offset: int) -> None:
        """Write each queue's run of entries (concatenated, from its first queue offset), then wake listeners."""
        ends = []
        for topic, queue_id, first, entries in runs:
            self._queues.get_or_create(topic, queue_id).put(first, entries)
            ends.append((topic, queue_id, first + len(entries) // CQ_ENTRY_SIZE))
        self._indexed_offset = max(self._indexed_offset, end_offset)
        for topic, queue_id, end in ends:
            self._next_queue_offset[(topic, queue_id)] = max(self._next_queue_offset.get((topic, queue_id), 0), end)
        self._notify_indexed(ends, end_offset, runs)

    def _on_flushed(self, flushed: int, error: BaseException | None, generation: int | None = None) -> None:
        """Event loop: index what became durable and resolve the waiters it covers.  A pass begun
        before a truncation (an older ``generation``) proves nothing about what is there now."""
        if self._log is None or (generation is not None and generation != self._flush.generation):
            return
        flushed = min(flushed, self._log.write_offset)
        ready = []
        while self._pending and self._pending[0][0] <= flushed and error is None:
            ready.append(self._pending.popleft())
        if ready and self._queues is not None:
            error = self._index_or_hold(ready)
        while self._waiters and (self._waiters[0][0] <= flushed or error is not None):
            _, waiter = self._waiters.popleft()
            if not waiter.done():
                if error is None:
                    waiter.set_result(None)
                elif isinstance(error, StoreError):
                    waiter.set_exception(error)
                else:
                    waiter.set_exception(StoreIOError(f"fdatasync failed: {error}"))

    def _index_or_hold(self, ready: list[Pending]) -> StoreError | None:
        """Index durable records behind any held ones; a failed write holds them all (DISK_FULL)."""
        return self._index_runs_or_hold(runs_of(ready), ready[-1][0], "puts are refused")

    def _index_runs_or_hold(self, runs: Sequence[Run], end_offset: int, refused: str) -> StoreError | None:
        self._held.hold(tuple(runs), end_offset)
        if self._write_failure is not None:
            return DiskFull(f"the store cannot write ({self._write_failure})")
        try:
            self._held.write_all(self._index_runs)
        except OSError as failure:
            self._write_failure = f"consume queue write failed: {failure}"
            self._last_write_retry_ms = self._now_ms()
            log.error("%s: %s until it works again", self._write_failure, refused)
            return DiskFull(self._write_failure)
        return None

    def _disk_space_back(self) -> bool:
        """A store refusing puts for disk usage looks again at most every WRITE_RETRY_MS, not only
        at the next retention pass (found by bench/chaos.py: sends stayed refused for up to
        cleanResourceInterval after the space was back)."""
        now = self._now_ms()
        if now - self._last_usage_check_ms < WRITE_RETRY_MS:
            return False
        self._last_usage_check_ms = now
        ratio = retention.disk_used_percent(self.config.store_path_root_dir)
        self._disk_full = ratio >= self.config.disk_space_warning_level_ratio
        return not self._disk_full

    def retry_failed_writes(self) -> bool:
        """After a failed write: index the held records again (at most every WRITE_RETRY_MS);
        True once writes work (the store serves again)."""
        if self._write_failure is None:
            return True
        now = self._now_ms()
        if now - self._last_write_retry_ms < WRITE_RETRY_MS:
            return False
        self._last_write_retry_ms = now
        held = len(self._held)
        try:
            self._held.write_all(self._index_runs)
        except OSError as failure:
            log.warning("the store still cannot write: %s", failure)
            return False
        log.warning("the store writes again after %s; %d held records indexed", self._write_failure, held)
        self._write_failure = None
        return True

    # --- replication -------------------------------------------------------------------------------
    @property
    def commit_log_min_offset(self) -> int:
        return self._log.min_offset

    @property
    def commit_log_max_offset(self) -> int:
        return self._log.write_offset

    @property
    def flushed_offset(self) -> int:
        return min(self._flush.flushed_offset, self._log.write_offset) if self._flush else self._log.write_offset

    @property
    def confirm_offset(self) -> int:
        return self._checkpoint.last.confirm_phy_offset

    def set_confirm_offset(self, offset: int) -> None:
        """Replication (issue 5): kept in the checkpoint at byte 32, persisted with the next checkpoint."""
        self._checkpoint.set_confirm(offset)

    def refuse_puts(self, reason: str | None) -> None:
        """Replication: while ``reason`` is set, local puts fail with NotWritable (a replica that
        is not master: anything it wrote itself would sit beyond its master's log, and a retried
        internal put after a truncation would write it back); None allows them again."""
        self._refusing_puts = reason

    def invalidate_derived(self) -> None:
        """Make pop, timer and transactions rebuild from the log (after a cut, or a master's step-down)."""
        self.derived_generation += 1

    async def drain_puts(self) -> None:
        """Wait until every local put already written is flushed (or failed), so that a replica
        turning slave copies into a log with no local write pending."""
        while self._waiters:
            await asyncio.gather(*(waiter for _, waiter in list(self._waiters)), return_exceptions=True)

    def read_raw(self, commit_offset: int, max_bytes: int) -> bytes | memoryview:
        self._check_open()
        if not self._log.min_offset <= commit_offset <= self._log.write_offset:
            raise BadOffset(f"read_raw at {commit_offset}, outside the log "
                            f"[{self._log.min_offset}, {self._log.write_offset}]")
        return self._log.read_raw(commit_offset, max_bytes)

    def replication_index(self, cursor: IndexCursor, start: int, end: int) -> tuple[QueueSlice, ...]:
        """Master side: the consume-queue entries of the records in ``[start, end)`` (store.replica_index)."""
        self._check_open()
        pending = self._pending if not self._held else [*self._held.entries(), *self._pending]
        return cursor.slices(self._queues, pending, self._indexed_offset, start, end)

    def append_raw(self, commit_offset: int, data: bytes, index: tuple[QueueSlice, ...]) -> None:
        """Slave side: append whole records copied from the master, at our log's end, with the
        master's consume-queue entries for them (stage, write and commit at once)."""
        run = self.stage_raw(commit_offset, data, index)
        run.write()
        self.commit_staged(run)

    def stage_raw(self, commit_offset: int, data: bytes | memoryview, index: tuple[QueueSlice, ...]) -> StagedRun:
        """Slave side: check a run of copied records against the master's index and reserve its
        place after the log's end and after the runs staged before it.

        The index is checked against the bytes (store.replica_index) before anything is
        written.  Nothing is visible (or flushed, or acknowledged) before :meth:`commit_staged`;
        the caller writes the run (``run.write()``, on any thread) in between, and commits runs
        in staging order.
        """
        self._check_open()
        if self._pending:
            raise BadReplicationData("append_raw while local puts await their flush")
        if self._write_failure is not None and not self.retry_failed_writes():
            raise DiskFull(f"the store cannot write ({self._write_failure}); copying stops, retried every "
                           f"{WRITE_RETRY_MS} ms")
        log_ = self._log
        expected = log_.write_offset if self._staged_end is None else self._staged_end
        if commit_offset != expected:
            raise BadReplicationData(f"append at {commit_offset} but the log ends at {expected}")
        reason = check_indexed_run(data, commit_offset, log_.segment_size, index, self._next_queue_offset)
        if reason is not None:
            raise BadReplicationData(reason)
        writes, low, view = [], 0, memoryview(data)
        while low < len(data):  # records never cross a segment: split at segment ends
            high = min(len(data), low + log_.room(commit_offset + low))
            writes.append((*log_.files.open_for_write(commit_offset + low, high - low), view[low:high]))
            low = high
        runs = tuple((q.topic, q.queue_id, q.first_queue_offset, q.entries) for q in index)
        for topic, queue_id, first, entries in runs:  # the next run's check continues from these
            self._next_queue_offset[(topic, queue_id)] = first + len(entries) // CQ_ENTRY_SIZE
        self._staged_end = commit_offset + len(data)
        return StagedRun(commit_offset, self._staged_end, tuple(writes), runs)

    def commit_staged(self, run: StagedRun) -> None:
        """The written run becomes part of the log: indexed, flushed, visible up to the read limit."""
        self._check_open()
        log_ = self._log
        if run.start != log_.write_offset:
            raise BadReplicationData(f"commit of a run at {run.start} but the log ends at {log_.write_offset}")
        log_.write_offset = run.end
        if run.end == self._staged_end:
            self._staged_end = None
        self._index_runs_or_hold(run.runs, run.end, "the slave copies nothing more")
        self._flush.wake_grouped(sum(len(entries) for _, _, _, entries in run.runs) // CQ_ENTRY_SIZE)
        self._notify_written(self._log.write_offset)

    def abandon_staged(self) -> None:
        """Forget every run staged and not committed (one failed to write): the next run must
        start at the log's end again."""
        self._staged_end = None
        self._recount_queue_offsets()

    def _recount_queue_offsets(self) -> None:
        """The next queue offset of each queue: after its entries, written or held."""
        self._next_queue_offset = {(q.topic, q.queue_id): q.max_offset for q in self._queues.all()}
        for key, end in self._held.queue_ends().items():
            self._next_queue_offset[key] = max(self._next_queue_offset.get(key, 0), end)

    def _check_nothing_staged(self, what: str) -> None:
        if self._staged_end is not None:
            raise BadOffset(f"{what} while replicated runs up to {self._staged_end} are staged")

    def start_empty_at(self, commit_offset: int) -> None:
        """Slave side: an empty log starts at ``commit_offset`` (the master's min offset, or its
        last file's start with syncFromLastFile), which must begin a segment."""
        self._check_open()
        self._check_nothing_staged("start_empty_at")
        log_ = self._log
        if log_.write_offset != log_.min_offset or self._queues.all():
            raise BadOffset(f"start at {commit_offset}: the log is not empty "
                            f"[{log_.min_offset}, {log_.write_offset}]")
        if commit_offset % log_.segment_size:
            raise BadOffset(f"start at {commit_offset}: not a multiple of the segment size {log_.segment_size} "
                            f"(mapedFileSizeCommitLog must equal the master's)")
        if commit_offset == log_.write_offset:
            return
        for start in log_.files.starts():
            log_.files.delete_segment(start)
        log_.files.write(commit_offset, b"")
        log_.write_offset = commit_offset
        self._flush.restart_at(commit_offset)
        self._indexed_offset = commit_offset
        self.epochs.reconcile(commit_offset, commit_offset)
        self._write_checkpoint(commit_offset, commit_offset, clean=False)

    async def wait_flushed(self, commit_offset: int) -> None:
        """Return once every byte below ``commit_offset`` is fdatasynced (slave acks under SYNC_FLUSH)."""
        self._check_open()
        if self.flushed_offset >= commit_offset:
            return
        self._loop = asyncio.get_running_loop()
        waiter = self._loop.create_future()
        self._waiters.append((commit_offset, waiter))
        self._flush.wake_unless_grouping()
        await waiter

    def truncate(self, commit_offset: int) -> None:
        """Cut the log to ``commit_offset`` (a record boundary) physically and repair the queues."""
        self._check_open()
        self._check_nothing_staged("truncate")
        log_ = self._log
        if not log_.min_offset <= commit_offset <= log_.write_offset:
            raise BadOffset(f"truncate to {commit_offset}, outside the log [{log_.min_offset}, {log_.write_offset}]")
        if commit_offset < log_.write_offset and isinstance(log_.info_at(commit_offset), Invalid):
            raise BadOffset(f"truncate to {commit_offset}: not a record boundary")
        log_.cut(commit_offset)
        self._flush.reset(commit_offset)
        self._fail_pending_beyond(commit_offset)
        self._held.cut_beyond(commit_offset)
        for queue in self._queues.all():
            queue.cut_beyond(commit_offset)
        self._recount_queue_offsets()
        self._indexed_offset = min(self._indexed_offset, commit_offset)
        self._queues.sync_all()
        self._write_checkpoint(commit_offset, self._indexed_offset, clean=False)
        self.epochs.reconcile(log_.min_offset, commit_offset)
        self.invalidate_derived()

    def _fail_pending_beyond(self, commit_offset: int) -> None:
        self._pending = deque(item for item in self._pending if item[0] <= commit_offset)
        kept = deque()
        for end, waiter in self._waiters:
            if end > commit_offset and not waiter.done():
                waiter.set_exception(BadOffset(f"truncated to {commit_offset} before the flush"))
            elif end <= commit_offset:
                kept.append((end, waiter))
        self._waiters = kept

    # --- retention ---------------------------------------------------------------------------------
    def delete_topic(self, topic: str) -> None:
        self._check_open()
        self._queues.delete_topic(topic)
        for key in [key for key in self._next_queue_offset if key[0] == topic]:
            del self._next_queue_offset[key]

    def disk_usage_bytes(self) -> int:
        return self._log.files.total_bytes() + sum(q.files.total_bytes() for q in self._queues.all())

    def clean_expired(self) -> int:
        """Delete expired or (under disk pressure) oldest commit-log segments; returns how many."""
        self._check_open()
        self.retry_failed_writes()
        ratio = retention.disk_used_percent(self.config.store_path_root_dir)
        self._disk_full = ratio >= self.config.disk_space_warning_level_ratio
        segments = retention.describe_segments(self._log, self.flushed_offset)
        doomed = retention.choose(segments, now_ms=self._now_ms(), config=self.config, disk_used_percent=ratio)
        for start in doomed:
            self._log.files.delete_segment(start)
        if doomed:
            for queue in self._queues.all():
                queue.advance_min(self._log.min_offset)
            self.epochs.reconcile(self._log.min_offset, self._log.write_offset)
        return len(doomed)


def _time_out(waiter: asyncio.Future, timeout_ms: int) -> None:
    if not waiter.done():
        waiter.set_exception(FlushTimeout(f"fdatasync did not finish within syncFlushTimeout {timeout_ms} ms"))
