"""The flush thread: fdatasync of the commit log (group commit), consume queues, checkpoint.

Rules:

* One thread does every fdatasync, so the event loop never blocks on the disk.
* Group commit: a SYNC_FLUSH put registers its end offset and wakes the thread; each pass
  syncs everything written so far, then reports the flushed offset to the event loop
  (``loop.call_soon_threadsafe``), which resolves every waiter up to it.  Puts arriving
  during one fdatasync share the next.
* ASYNC_FLUSH: the same pass runs every ``flush_interval_commit_log_ms``.
* Consume queues and the checkpoint follow the commit log every
  ``flush_interval_consume_queue_ms``: the checkpoint never claims more than was synced.
* The thread's intervals are real time (``threading.Event.wait``); it is a driver.  A
  failed fdatasync is reported to the loop (waiters fail) and logged, never swallowed.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FlushHooks:
    written_offset: Callable[[], int]  # read from the thread: end of bytes written so far
    sync_commit_log: Callable[[int, int], None]  # fdatasync [low, high)
    sync_queues_and_checkpoint: Callable[[int], None]  # given the flushed commit offset
    report: Callable[[int, BaseException | None], None]  # called on the loop thread


class FlushService:
    def __init__(self, hooks: FlushHooks, *, on_demand: bool, interval_ms: int,
                 queue_interval_ms: int, flushed_offset: int, call_soon_threadsafe: Callable):
        self._hooks = hooks
        self._on_demand = on_demand
        self._interval_s = interval_ms / 1000
        self._queue_interval_s = queue_interval_ms / 1000
        self.flushed_offset = flushed_offset
        self._call = call_soon_threadsafe
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-flush", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        if not self._wake.is_set():  # set() takes the condition's lock even when already set
            self._wake.set()

    def reset(self, flushed_offset: int) -> None:
        """After a truncation: nothing above ``flushed_offset`` is flushed any more."""
        self.flushed_offset = min(self.flushed_offset, flushed_offset)

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

    def _pass(self) -> None:
        target = self._hooks.written_offset()
        low = min(self.flushed_offset, target)
        error: BaseException | None = None
        try:
            if target > low:
                self._hooks.sync_commit_log(low, target)
            self.flushed_offset = target
        except OSError as failure:  # a failing disk: tell the waiters, keep trying
            log.error("commit log fdatasync failed: %s", failure)
            error = failure
        try:
            self._call(self._hooks.report, target, error)
        except RuntimeError:  # the loop is closed: we are shutting down
            pass

    def _sync_queues(self) -> None:
        try:
            self._hooks.sync_queues_and_checkpoint(self.flushed_offset)
        except OSError as failure:
            log.error("consume queue or checkpoint flush failed: %s", failure)
