"""What the timer checkpoint costs a busy broker's event loop, with many delayed messages pending.

A broker over a real message store (a temporary folder, ASYNC_FLUSH) holds ``--pending``
delayed messages.  Then, ``--intervals`` times, ``--changes`` of them come due and are
delivered and as many new ones are scheduled (delayed traffic at a steady level), and the
broker's periodic snapshot runs (``Broker.persist_in_background``, every
``flushConsumerOffsetInterval``) followed by a slave's metadata sync (the master's
GetReplicaMetadata reply to a slave holding what the last sync gave it, and the slave's
parse of the reply).  Each step runs as the broker runs it: the snapshot's documents on the
event loop and its writes in a worker thread, the reply's tables on the loop and their text
in a thread, the slave's parse in a thread.  Printed per step: the process's CPU (mean, max
and total over the intervals) and the event loop's longest stall while it ran (a task asking
for 1 ms sleeps; a thread holding the GIL stalls the loop too), and how often the checkpoint
file was rewritten.

Before 2026-11-29 (twelfth session) every snapshot took and wrote a new checkpoint of every
pending message, every sync wrote its text again, and every slave parsed it again.  The script uses only calls both
versions have, so running it in a worktree of an older commit gives the before figures.

    .venv/bin/python bench/bench_timer_checkpoint.py
    .venv/bin/python bench/bench_timer_checkpoint.py --pending 1000000 --changes 5000 --intervals 24

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import inspect
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from metadata.message import MessageDraft, Prop  # noqa: E402
from metadata.topic_config import TopicConfig  # noqa: E402
from scheduler.clock import ManualClock  # noqa: E402
from services.admin.replica_converters import replica_metadata_from_proto, replica_metadata_to_proto  # noqa: E402
from services.broker.broker import Broker  # noqa: E402
from services.broker.config import BrokerConfig  # noqa: E402
from services.broker.timer_service import timer_draft  # noqa: E402
from store.config import FlushDiskType, StoreConfig  # noqa: E402
from store.message_store import MessageStore  # noqa: E402

TOPIC = "bench-delay"
FAR_MS = 86_400_000  # new messages are due a day later: they stay pending
STEPS = ("the periodic snapshot", "a sync: the master's reply", "a sync: the slave's parse")


class _NoChecks:
    def push_transaction_check(self, check) -> bool:
        return True


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {value}")
    return value


async def _schedule(store, clock, first: int, count: int, due_from_ms: int, step_ms: int) -> None:
    for start in range(first, first + count, 1_000):
        drafts = [timer_draft(MessageDraft(TOPIC, 0, b"x" * 64, clock.now_ms(), properties={Prop.MESSAGE_ID: f"D{n:012d}"}),
                              due_from_ms + (n - first) * step_ms)
                  for n in range(start, min(first + count, start + 1_000))]
        await store.put(drafts)


async def _deliver(broker, clock, count: int) -> None:
    left = len(broker.timer.index.pending) - count
    clock.advance(count)  # the oldest ``count`` come due (1 ms apart)
    while len(broker.timer.index.pending) > left:
        if not await broker.run_timer():
            await asyncio.sleep(0.001)


def _reply(metadata, held):
    """The master's GetReplicaMetadata reply to a slave holding ``held`` (None: nothing yet).
    A slave names the versions it holds, none on its first sync; before 2026-11-29's twelfth
    session it named nothing, and the reply had no such argument."""
    if "held" not in inspect.signature(replica_metadata_to_proto).parameters:
        return replica_metadata_to_proto(metadata)
    return replica_metadata_to_proto(metadata, held.versions() if held is not None else {})


def _parse(reply, held):
    if held is None or "held" not in inspect.signature(replica_metadata_from_proto).parameters:
        return replica_metadata_from_proto(reply)
    return replica_metadata_from_proto(reply, held)


async def _measured(step) -> tuple[float, float, object]:
    """(the process's CPU in ms, the event loop's longest stall in ms, the result) of
    ``await step()``; a probe task asks the loop for a 1 ms sleep again and again and notes
    the longest it waited past it."""
    stall = 0.0

    async def probe() -> None:
        nonlocal stall
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            stall = max(stall, time.perf_counter() - before - 0.001)

    task = asyncio.get_running_loop().create_task(probe())
    await asyncio.sleep(0)
    began = time.process_time()
    result = await step()
    spent = time.process_time() - began
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return spent * 1e3, stall * 1e3, result


async def _run(args, folder: Path) -> None:
    clock = ManualClock()
    store = MessageStore(StoreConfig(store_path_root_dir=folder, flush_disk_type=FlushDiskType.ASYNC_FLUSH), clock.now_ms)
    store.start()
    # the broker's own snapshot and timer tasks are pushed out of the way: this script runs them
    config = BrokerConfig(flush_consumer_offset_interval_ms=3_600_000, timer_tick_ms=3_600_000,
                          timer_batch_max=max(256, args.changes))
    broker = Broker(config, store, clock, _NoChecks())
    await broker.start()
    await broker.upsert_topic(TopicConfig(TOPIC, 1, 1, message_type="DELAY"))
    began = time.perf_counter()
    await _schedule(store, clock, 0, args.pending, clock.now_ms() + 1, 1)
    broker.timer.catch_up()
    print(f"{len(broker.timer.index.pending):,} pending, scheduled in {time.perf_counter() - began:.1f} s", flush=True)
    await broker.persist_in_background()
    path = folder / "config" / "timerCheckpoint.json"
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in STEPS}
    rewrites, held = 0, None  # held: what the slave holds, the metadata of its last sync
    for number in range(args.intervals):
        await _deliver(broker, clock, args.changes)
        await _schedule(store, clock, args.pending + number * args.changes, args.changes, clock.now_ms() + FAR_MS, 1)
        broker.timer.catch_up()
        written = path.stat().st_mtime_ns
        *measured, _ = await _measured(broker.persist_in_background)
        figures[STEPS[0]].append(measured)
        rewrites += path.stat().st_mtime_ns != written
        # as the admin service answers GetReplicaMetadata: the tables on the loop, their text in a thread
        metadata = broker.replica_metadata()
        *measured, reply = await _measured(lambda: asyncio.to_thread(_reply, metadata, held))
        figures[STEPS[1]].append(measured)
        *measured, held = await _measured(lambda: asyncio.to_thread(_parse, reply, held))  # as MetadataSync parses
        figures[STEPS[2]].append(measured)
    print(f"{args.intervals} intervals of {args.changes:,} delivered and {args.changes:,} scheduled, "
          f"{len(broker.timer.index.pending):,} pending; checkpoint file rewritten {rewrites} times")
    print(f"  {'per interval':<32} {'CPU mean':>9} {'CPU max':>8} {'CPU total':>10} {'loop stall max':>15}  (ms)")
    for name, rows in figures.items():
        cpu = [c for c, _ in rows]
        print(f"  {name:<32} {statistics.mean(cpu):9.1f} {max(cpu):8.1f} {sum(cpu):10.1f} {max(s for _, s in rows):15.1f}")
    await broker.stop()
    store.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=_positive, default=200_000)
    parser.add_argument("--changes", type=_positive, default=2_000, help="delivered and scheduled per interval")
    parser.add_argument("--intervals", type=_positive, default=16)
    args = parser.parse_args()
    print(f"# bench_timer_checkpoint: {' '.join(sys.argv)}; python {sys.version.split()[0]}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-timer-") as folder:
        asyncio.run(_run(args, Path(folder)))


if __name__ == "__main__":
    main()
