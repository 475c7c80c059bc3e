"""The pop log's writer: one put at a time, in hand-in order, failed reservations first.

Why (found by bench/chaos.py: a disk-full round on broker-a's master, then a kill of that
master, lost one acknowledged message): a receive reserves its messages in memory, then
writes its pop record.  When that write failed (DISK_FULL) the reservation stayed in memory
only, and the next receive's reservation, written once space was back, started after it.  A
replica replaying the log (the slave that took over, or this broker after a restart) had the
first reservation's messages neither in flight nor acked, and never delivered them.

Rules:

* Records reach the log in the order they were handed in.  A put carries everything handed
  in while the previous put was in flight (a group commit; the store group-commits too).
* A failed put fails every caller in it.  Its records that were already applied in memory
  (``applied``: a receive's reservations, an admin's skips and resets) stay at the head of
  the queue, and the next put writes them before anything newer, so the log never holds a
  record that skips over one the broker acted on; records applied only once written (acks,
  invisibility changes) are dropped with their caller's error.  Replaying a record twice
  is harmless (scheduler.pop.table applies idempotently).
* When the broker no longer serves pop calls (it is not master), the records waiting are
  dropped: the new master's log is the truth, and it delivers those messages itself.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Sequence

from scheduler.pop.records import Record

log = logging.getLogger(__name__)

Put = Callable[[list[Record], bool], Awaitable[None]]


class PopLogWriter:
    def __init__(self, put: Put, serving: Callable[[], bool], refused: Callable[[], Exception]):
        """``put(records, applied)``: append them to the pop log (raises on failure);
        ``applied``: every one of them is applied in memory already; ``serving()``:
        whether this broker may write its pop log now; ``refused()``: the error then."""
        self._put, self._serving, self._refused = put, serving, refused
        self._unwritten: list[Record] = []   # applied in memory, not in the log yet
        self._queue: list[tuple[Sequence[Record], bool, asyncio.Future]] = []
        self._task: asyncio.Task | None = None

    @property
    def unwritten(self) -> int:
        """Applied records a failed put left to write (they go first with the next put)."""
        return len(self._unwritten)

    async def write(self, records: Sequence[Record], applied: bool) -> None:
        """Append ``records`` after everything handed in before; ``applied``: they are applied
        in memory already (kept for the next put if this one fails)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.append((records, applied, future))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(), name="pop-log-writer")
        await future   # a caller that goes away cancels only its wait: its records are still written

    async def _run(self) -> None:
        batch: list = []
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                self._finish(batch, await self._put_batch(batch))
        except BaseException as error:  # a bug, or the loop closing: nobody waits forever
            waiting, self._queue = batch + self._queue, []
            self._finish(waiting, error if isinstance(error, Exception) else RuntimeError("pop log writer stopped"))
            raise

    async def _put_batch(self, batch) -> Exception | None:
        """One put of the waiting applied records, then ``batch``; the error, if it failed."""
        if not self._serving():
            if self._unwritten:
                log.warning("pop log: %d records never written (this broker stopped serving)", len(self._unwritten))
            self._unwritten = []
            return self._refused()
        records = self._unwritten + [record for items, _, _ in batch for record in items]
        try:
            await self._put(records, all(applied for _, applied, _ in batch))
        except Exception as error:  # noqa: BLE001 - every caller gets it; applied records wait
            self._unwritten = self._unwritten + [r for items, applied, _ in batch if applied for r in items]
            log.warning("pop log: put of %d records failed (%s); %d applied records go first with the next put",
                        len(records), error, len(self._unwritten))
            return error
        if self._unwritten:
            log.warning("pop log: %d records written late", len(self._unwritten))
        self._unwritten = []
        return None

    @staticmethod
    def _finish(batch, error: Exception | None) -> None:
        for _, _, future in batch:
            if future.done():
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
