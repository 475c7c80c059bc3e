"""The flush thread: fdatasync of the commit log (group commit), consume queues, checkpoint.

Rules:

* The flush thread does every fdatasync but SYNC_FLUSH's group commits while the disk is
  fast, which the event loop runs itself (no hand-off); a slow sync sends them back to the
  thread at once (:mod:`store.group_commit`).
* Group commit: a SYNC_FLUSH put registers its end offset and opens a group (or joins the
  open one); when the group's window ends (:mod:`store.group_commit` says when, and whether
  on the loop or on this thread) everything written so far is synced and the flushed offset
  reported to the event loop (from the thread: ``loop.call_soon_threadsafe``), which resolves
  every waiter up to it.  Puts arriving during one fdatasync share the next.
* ASYNC_FLUSH: the same pass runs every ``flush_interval_commit_log_ms``.
* Consume queues and the checkpoint follow the commit log every
  ``flush_interval_consume_queue_ms``: the checkpoint never claims more than was synced.
* The thread's intervals are real time (``threading.Event.wait``); it is a driver.  A
  failed fdatasync is reported to the loop (waiters fail) and logged, never swallowed.
* A truncation (``reset``, on the loop) starts a new *generation*.  A pass that began before
  it claims nothing: it read its target before the cut, and bytes written at the same offsets
  after the cut are not what it synced.  Its flushed offset is not kept, its report carries the
  old generation (the loop drops it), and its checkpoint is not written.  The next pass syncs
  from the cut.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from store.group_commit import GroupCommit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FlushHooks:
    written_offset: Callable[[], int]  # read from the thread: end of bytes written so far
    sync_commit_log: Callable[[int, int], None]  # fdatasync [low, high)
    sync_queues_and_checkpoint: Callable[[int, int], None]  # given the flushed commit offset and its generation
    report: Callable[[int, BaseException | None, int], None]  # on the loop thread: (offset, error, generation)


class FlushService:
    def __init__(self, hooks: FlushHooks, *, on_demand: bool, interval_ms: int,
                 queue_interval_ms: int, flushed_offset: int, call_soon_threadsafe: Callable,
                 group_commit: GroupCommit | None = None):
        self._hooks = hooks
        self._on_demand = on_demand
        self._interval_s = interval_ms / 1000
        self._queue_interval_s = queue_interval_ms / 1000
        self.flushed_offset = flushed_offset
        self.generation = 0   # moved by reset(), on the loop; read with _lock held in the thread
        self._lock = threading.Lock()
        self._call = call_soon_threadsafe
        self._wake = threading.Event()
        self._group = group_commit or GroupCommit(window_s=0.0, on_loop=False)
        self._group_puts = 0    # puts in the open group (0: none open)
        self._group_records = 0  # and the messages they wrote
        self._group_waited = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-flush", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake_soon(self, loop, records: int = 1) -> None:
        """Event loop, for each SYNC_FLUSH put of ``records`` messages: the put joins the open
        group, or opens one that syncs at the end of the loop's current pass or after the
        group's window, so concurrent puts share one fdatasync (and, off the loop, one wake of
        the thread: tens of microseconds of the loop's CPU each on a VM)."""
        self._group_puts += 1
        self._group_records += records
        if self._group_puts > 1:
            return
        window = self._group.window_s
        self._group_waited = window > 0
        if window > 0:
            loop.call_later(window, self._end_group)
        else:
            loop.call_soon(self._end_group)

    def wake_grouped(self, records: int = 1) -> None:
        """A slave's committed run of ``records`` messages: under SYNC_FLUSH, on the loop, it
        joins a group as a put does (its ack waits for that group's fdatasync); otherwise the
        thread is woken."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if self._on_demand and loop is not None:
            self.wake_soon(loop, records)
        else:
            self.wake()

    def wake_unless_grouping(self) -> None:
        """Someone waits for a flush: an open group syncs for them when its window ends."""
        if self._group_puts == 0:
            self.wake()

    def _end_group(self) -> None:
        self._group.observe_window(self._group_records, self._group_waited)
        self._group_puts = self._group_records = 0
        if self._group.inline:
            generation, target, error = self._sync(inline=True)
            self._hooks.report(target, error, generation)
        else:
            self.wake()

    def wake(self) -> None:
        if not self._wake.is_set():  # set() takes the condition's lock even when already set
            self._wake.set()

    def reset(self, flushed_offset: int) -> None:
        """After a truncation: nothing above ``flushed_offset`` is flushed any more, and no pass
        begun before it counts (a new generation)."""
        with self._lock:
            self.generation += 1
            self.flushed_offset = min(self.flushed_offset, flushed_offset)
        self.wake()

    def restart_at(self, offset: int) -> None:
        """An empty log moved to start at ``offset`` (a slave starting from its master's)."""
        with self._lock:
            self.generation += 1
            self.flushed_offset = offset

    def current(self, generation: int) -> bool:
        """No truncation since ``generation`` was read (call with the checkpoint's lock held)."""
        with self._lock:
            return generation == self.generation

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        last_queue_flush = time.monotonic()
        wait_s = min(self._queue_interval_s, 1.0) if self._on_demand else self._interval_s
        while not self._stop.is_set():
            self._wake.wait(wait_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            self._pass()
            if time.monotonic() - last_queue_flush >= self._queue_interval_s:
                last_queue_flush = time.monotonic()
                self._sync_queues()

    def _sync(self, inline: bool) -> tuple[int, int, BaseException | None]:
        """fdatasync what was written: (generation, offset synced to, error).  How long it took
        decides where the next ones run."""
        with self._lock:
            generation, target = self.generation, self._hooks.written_offset()
            low = min(self.flushed_offset, target)
        error: BaseException | None = None
        try:
            took = None
            if target > low:
                started = time.perf_counter()
                self._hooks.sync_commit_log(low, target)
                took = time.perf_counter() - started
            with self._lock:
                if generation == self.generation:   # the loop's and the thread's syncs may overlap
                    self.flushed_offset = max(self.flushed_offset, target)
                if took is not None and self._on_demand:
                    self._group.observe_sync(took, inline=inline)
        except OSError as failure:  # a failing disk: tell the waiters, keep trying
            log.error("commit log fdatasync failed: %s", failure)
            error = failure
        return generation, target, error

    def _pass(self) -> None:
        generation, target, error = self._sync(inline=False)
        try:
            self._call(self._hooks.report, target, error, generation)
        except RuntimeError:  # the loop is closed: we are shutting down
            pass

    def _sync_queues(self) -> None:
        with self._lock:
            generation, flushed = self.generation, self.flushed_offset
        try:
            self._hooks.sync_queues_and_checkpoint(flushed, generation)
        except OSError as failure:
            log.error("consume queue or checkpoint flush failed: %s", failure)
