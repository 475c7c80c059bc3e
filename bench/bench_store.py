"""Put throughput of the message store: 1 KiB messages, batches of 1 and 32,
ASYNC_FLUSH vs SYNC_FLUSH with 1/16/64 concurrent putters.  Prints figures, never fails.

Run: .venv/bin/python bench/bench_store.py [--seconds 2] [--dir /tmp/x]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metadata.message import MessageDraft, Prop  # noqa: E402
from store.config import FlushDiskType, StoreConfig  # noqa: E402
from store.message_store import MessageStore  # noqa: E402


async def measure(path: Path, kind: FlushDiskType, batch: int, putters: int, seconds: float) -> tuple[float, float]:
    store = MessageStore(StoreConfig(path, mapped_file_size_commit_log=64 << 20, flush_disk_type=kind),
                         lambda: int(time.time() * 1000))
    store.start()
    body = os.urandom(1024)
    count = 0
    stop_at = time.perf_counter() + seconds

    async def putter(worker: int) -> None:
        nonlocal count
        n = 0
        while time.perf_counter() < stop_at:
            drafts = [MessageDraft("bench", worker % 8, body, 1, properties={Prop.MESSAGE_ID: f"{worker}-{n}-{i}"})
                      for i in range(batch)]
            await store.put(drafts)
            count += batch
            n += 1

    started = time.perf_counter()
    await asyncio.gather(*(putter(w) for w in range(putters)))
    elapsed = time.perf_counter() - started
    store.shutdown()
    return count / elapsed, count * 1024 / elapsed / (1 << 20)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(dir=args.dir, prefix="bench_store_"))
    print(f"python {platform.python_version()} on {platform.platform()}, {os.cpu_count()} cpus, dir {base}, "
          f"{args.seconds}s per case, 1 KiB bodies")
    print(f"{'flush':12} {'batch':>5} {'putters':>7} {'msgs/s':>10} {'MiB/s':>8}")
    try:
        for kind in (FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH):
            for batch in (1, 32):
                for putters in (1, 16, 64):
                    path = base / f"{kind.value}-{batch}-{putters}"
                    rate, mib = asyncio.run(measure(path, kind, batch, putters, args.seconds))
                    print(f"{kind.value:12} {batch:>5} {putters:>7} {rate:>10.0f} {mib:>8.1f}", flush=True)
                    shutil.rmtree(path, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
