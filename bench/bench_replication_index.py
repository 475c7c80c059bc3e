"""What the replication index costs the master per batch, by the number of consume queues.

With every batch it ships, a master sends its slave the consume-queue entries of the batch's
records (store.replica_index.IndexCursor).  This builds real stores on disk with ``--queues``
queues (topics of 8 queues, one message in each, all shipped), then times a cursor over
``--batches`` batches of one new record each, as a master under single sends ships them:
the event-loop thread's CPU per batch.  The first row (8 queues) is the reference: a batch's
cost should not grow with queues nobody writes to.  The last column is the replication lag
metric's count for a slave one batch behind (``MessageStore.messages_from``, once per
metrics scrape, ASYNC_FLUSH's store): it should not grow with them either.

    .venv/bin/python bench/bench_replication_index.py
    .venv/bin/python bench/bench_replication_index.py --queues 8 8000 64000 --batches 500

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from metadata.message import MessageDraft, Prop  # noqa: E402
from store.config import FlushDiskType, StoreConfig  # noqa: E402
from store.message_store import MessageStore  # noqa: E402
from store.replica_index import IndexCursor  # noqa: E402


async def per_batch_us(root: Path, queues: int, batches: int, flush: FlushDiskType) -> tuple[float, float]:
    """(us per batch of the index, us per lag count one batch behind)."""
    store = MessageStore(StoreConfig(root, flush_disk_type=flush), lambda: 1_700_000_000_000)
    store.start()
    try:
        for number in range(queues):
            await store.put([MessageDraft(f"topic-{number // 8}", number % 8, b"x" * 100, 7, "10.0.0.1:1",
                                          {Prop.MESSAGE_ID: f"old-{number}"}, {})])
        cursor, end = IndexCursor(), store.commit_log_max_offset
        store.replication_index(cursor, 0, end)  # everything so far shipped
        spent = 0.0
        for number in range(batches):
            start = end
            await store.put([MessageDraft("topic-0", number % 8, b"x" * 1024, 7, "10.0.0.1:1",
                                          {Prop.MESSAGE_ID: f"new-{number}"}, {})])
            end = store.commit_log_max_offset
            began = time.thread_time()
            slices = store.replication_index(cursor, start, end)
            spent += time.thread_time() - began
            if sum(len(piece.entries) for piece in slices) != 20:
                raise RuntimeError(f"batch {number}: expected one entry, got {slices}")
        began = time.thread_time()
        for _ in range(10):
            if store.messages_from(start) != 1:
                raise RuntimeError(f"one batch behind: {store.messages_from(start)} messages, expected 1")
        return spent / batches * 1e6, (time.thread_time() - began) / 10 * 1e6
    finally:
        store.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", type=int, nargs="+", default=[8, 1_000, 8_000])
    parser.add_argument("--batches", type=int, default=300)
    args = parser.parse_args()
    if args.batches < 1 or min(args.queues) < 1:
        parser.error("--queues and --batches must be positive")
    print(f"# bench_replication_index: {' '.join(sys.argv[1:]) or '(defaults)'}; python {sys.version.split()[0]}; "
          f"{args.batches} batches of one 1 KiB record; us of the loop thread's CPU per batch")
    print(f"{'queues':>8} {'ASYNC_FLUSH':>12} {'SYNC_FLUSH':>11} {'lag count':>10}")
    for queues in args.queues:
        figures = []
        for flush in (FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH):
            with tempfile.TemporaryDirectory(prefix="bench-replication-index-") as root:
                figures.append(asyncio.run(per_batch_us(Path(root), queues, args.batches, flush)))
        print(f"{queues:>8,} {figures[0][0]:>12.1f} {figures[1][0]:>11.1f} {figures[0][1]:>10.1f}", flush=True)


if __name__ == "__main__":
    main()
