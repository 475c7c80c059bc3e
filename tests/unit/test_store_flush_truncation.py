"""A flush pass that a truncation overtakes claims nothing (store/flush.py generations).

Found by reading a chaos run's container logs: "checkpoint.tmp -> checkpoint: No such file"
(the event loop's truncation and the flush thread wrote the checkpoint through the one
temporary file at once).  Behind it: a pass reads its target, a slave's handshake cuts the log
below it and the new master's bytes are written at the same offsets, and the pass, whose
fdatasync began before those bytes existed, reported its old target: the loop resolved the
new bytes' SYNC_FLUSH waiters (the slave acked them as flushed) with nothing having synced them.
"""
from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

from store.checkpoint_file import read_checkpoint
from store.flush import FlushHooks, FlushService
from tests.unit.test_store_message_store import draft, make, put_each


def test_a_pass_overtaken_by_a_truncation_keeps_no_flushed_offset_and_its_report_is_stale():
    written = [1000]
    syncing, release = threading.Event(), threading.Event()
    synced, reports, checkpoints = [], [], []

    def sync(low: int, high: int) -> None:
        synced.append((low, high))
        if len(synced) == 1:
            syncing.set()
            release.wait(5)

    hooks = FlushHooks(written_offset=lambda: written[0], sync_commit_log=sync,
                       sync_queues_and_checkpoint=lambda flushed, generation: checkpoints.append((flushed, generation)),
                       report=lambda offset, error, generation: reports.append((offset, generation)))
    flush = FlushService(hooks, on_demand=True, interval_ms=10, queue_interval_ms=60_000, flushed_offset=500,
                         call_soon_threadsafe=lambda fn, *args: fn(*args))
    flush.start()
    try:
        flush.wake()
        assert syncing.wait(5)
        written[0] = 800          # the loop cuts the log at 800 ...
        flush.reset(800)
        written[0] = 900          # ... and writes the new master's bytes after it
        release.set()
        deadline = time.monotonic() + 5
        while len(reports) < 2 and time.monotonic() < deadline:
            flush.wake()
            time.sleep(0.01)
        assert reports[0] == (1000, 0) and flush.generation == 1    # stale: the loop drops it
        assert reports[1] == (900, 1) and synced == [(500, 1000), (500, 900)]  # the stale pass counted for nothing
        assert flush.flushed_offset == 900
        assert not flush.current(0) and flush.current(1)
    finally:
        flush.stop()


def test_a_truncation_during_an_fdatasync_holds_the_new_bytes_until_a_sync_after_them(tmp_path):
    """The store end to end: the new bytes' put completes only after an fdatasync that began
    after they were written, and the checkpoint never names an offset past the cut."""
    async def scenario():
        store = make(tmp_path)
        store.start()
        stored = await put_each(store, [draft(i) for i in range(20)])
        cut = stored[10].commit_offset
        real_sync, calls, began, release = store._log.files.sync, [], threading.Event(), threading.Event()

        def slow_sync(low: int, high: int) -> None:
            calls.append((low, high))
            real_sync(low, high)
            if len(calls) == 1:       # an fdatasync that began before the cut, still running
                began.set()
                release.wait(5)

        store._flush._hooks = dataclasses.replace(store._flush._hooks, sync_commit_log=slow_sync)
        doomed = asyncio.ensure_future(store.put([draft(100)]))
        assert await asyncio.to_thread(began.wait, 5)
        store.truncate(cut)
        fresh = asyncio.ensure_future(store.put([draft(101)]))
        await asyncio.sleep(0)         # its bytes are written; its fdatasync is still to come
        calls_before_fresh = len(calls)
        release.set()
        placed = await asyncio.wait_for(fresh, 10)
        assert placed[0].commit_offset == cut
        assert len(calls) > calls_before_fresh, "the new bytes' put completed before any fdatasync after them"
        assert (await asyncio.gather(doomed, return_exceptions=True))[0] is not None
        store.shutdown()
        point = read_checkpoint(tmp_path / "checkpoint")
        assert point.commit_log_flushed_offset == store.commit_log_max_offset

    asyncio.run(scenario())
