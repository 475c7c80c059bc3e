"""What the periodic state snapshot costs a broker whose consumers hold many messages in flight and
do nothing (issue 27's "left": popState.json was taken and written every 5 s, changed or not).

A Broker over the real message store in a temporary folder (SYNC_FLUSH; time on a manual clock)
gets ``--in-flight`` messages sent in batches of 32 to ``--queues`` queues of one topic and received,
not acked, by one group.  Then, per round: ``Broker.persist_in_background`` with nothing changed
since the last one (what an idle broker runs every ``flushConsumerOffsetInterval``), and once more
after one ack (the pop state changed): the loop thread's CPU (``time.thread_time``; what runs in
the worker thread is not counted), the longest the loop was held meanwhile (a task that asks for
a turn every millisecond: what a call arriving then waits for, the worker thread's GIL included)
and whether popState.json was written (its mtime in ns).
Medians of ``--rounds``.  With ``--offsets N``, the broker also holds N consumer offsets (groups of
10 topics x 8 queues, committed as an ack commits them), and one of them moves before each
changed round: consumerOffset.json is written too.

    .venv/bin/python bench/bench_idle_snapshot.py --in-flight 20000 160000 --rounds 5
    .venv/bin/python bench/bench_idle_snapshot.py --in-flight 1000 --offsets 80000 --rounds 5

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from metadata.message import MessageDraft, MessageType, Prop  # noqa: E402
from services.broker.send_service import SendItem  # noqa: E402
from tests.scenario.test_broker_flows import Harness, _with_topic  # noqa: E402


async def _loaded(folder: Path, in_flight: int, queues: int):
    harness = Harness(folder)
    broker = await _with_topic(harness, queues=queues)
    for start in range(0, in_flight, 32):
        items = [SendItem.of(MessageDraft("T", -1, b"x" * 64, 0, properties={Prop.MESSAGE_ID: f"ID{n:010d}"}),
                             MessageType.NORMAL) for n in range(start, min(start + 32, in_flight))]
        await broker.send(items)
    got = []
    while len(got) < in_flight:
        batch = await harness.receive("G", "T", batch=32, invisible_ms=3_600_000)
        assert batch, f"received {len(got)} of {in_flight}"
        got += batch
    return harness, broker, got


async def loop_held(work) -> tuple[float, float]:
    """The loop thread's CPU of ``await work()`` and the longest the loop was held meanwhile: a
    task asks for a turn every millisecond (what a call arriving then waits for)."""
    held, running = [0.0], [True]

    async def ticker():
        while running[0]:
            asked = time.perf_counter()
            await asyncio.sleep(0.001)
            held[0] = max(held[0], time.perf_counter() - asked - 0.001)
    watch = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    began = time.thread_time()
    await work()
    spent = time.thread_time() - began
    running[0] = False
    await watch
    return spent, held[0]


async def _timed_snapshot(broker, state: Path) -> tuple[float, bool, float]:
    """The loop thread's CPU, whether the file was written, and the longest the loop was held."""
    before = state.stat().st_mtime_ns if state.exists() else 0
    spent, held = await loop_held(broker.persist_in_background)
    return spent, state.stat().st_mtime_ns != before, held


def _commit_offsets(broker, count: int, offset: int) -> None:
    keeper, now = broker.pop.keeper, broker.clock.now_ms()
    for number in range(count):
        group, rest = divmod(number, 80)
        keeper.commit(f"topic-{rest // 8}", f"group-{group}", rest % 8, offset, now)


async def _case(in_flight: int, queues: int, rounds: int, offsets: int = 0) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        harness, broker, got = await _loaded(Path(tmp), in_flight, queues)
        _commit_offsets(broker, offsets, 1)
        state = Path(tmp) / "config" / "popState.json"
        await broker.persist_in_background()
        idle, changed, idle_written, changed_written, idle_held, changed_held = [], [], 0, 0, [], []
        for number in range(rounds):
            spent, written, held = await _timed_snapshot(broker, state)
            idle.append(spent)
            idle_held.append(held)
            idle_written += written
            await broker.ack("G", "T", got[number].message.message_id, got[number].receipt_handle)
            _commit_offsets(broker, min(offsets, 1), 2 + number)
            spent, written, held = await _timed_snapshot(broker, state)
            changed.append(spent)
            changed_held.append(held)
            changed_written += written
        await harness.stop()
    return {"in_flight": in_flight, "idle_ms": 1e3 * statistics.median(idle), "idle_written": idle_written,
            "idle_held_ms": 1e3 * statistics.median(idle_held), "changed_ms": 1e3 * statistics.median(changed),
            "changed_written": changed_written, "changed_held_ms": 1e3 * statistics.median(changed_held)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--in-flight", type=int, nargs="+", default=[20_000, 160_000])
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--offsets", type=int, default=0, help="consumer offsets held besides (0: only the group's own)")
    args = parser.parse_args()
    if min(args.in_flight) < args.rounds or args.queues < 1 or args.rounds < 1 or args.offsets < 0:
        parser.error("--in-flight must be at least --rounds, --queues and --rounds at least 1")
    print(f"# bench_idle_snapshot: {' '.join(sys.argv[1:]) or '(defaults)'}; {args.queues} queues, one group, "
          f"{args.offsets} more consumer offsets; the loop thread's CPU per Broker.persist_in_background "
          f"(medians of {args.rounds})")
    print(f"{'in flight':>10} {'idle: loop ms':>14} {'held ms':>8} {'written':>8} {'after an ack: loop ms':>22} "
          f"{'held ms':>8} {'written':>8}")
    for in_flight in args.in_flight:
        row = asyncio.run(_case(in_flight, args.queues, args.rounds, args.offsets))
        print(f"{row['in_flight']:>10,} {row['idle_ms']:>14.2f} {row['idle_held_ms']:>8.1f} {row['idle_written']:>4}/{args.rounds:<3} "
              f"{row['changed_ms']:>22.2f} {row['changed_held_ms']:>8.1f} {row['changed_written']:>4}/{args.rounds:<3}")


if __name__ == "__main__":
    main()
