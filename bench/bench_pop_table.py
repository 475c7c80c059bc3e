"""What a receive and an ack cost the pop table with many messages in flight (issue 27).

A consumer that keeps thousands of messages in flight (a long invisible duration, a backlog,
``popInflightMaxPerQueue`` allows 20,000 per queue) must not make every receive and ack pay
for all of them.  For each in-flight count, one queue of a :class:`scheduler.pop.table.PopTable`
gets that many messages popped, then is acked in batches of 32 from the newest down to half
(the oldest stay in flight), then 32 more are popped at a time: the table's CPU per message.
The reference is the smallest count of the same run: the rows should stay near it.

``--revive`` adds the revive's look for expired messages (``PopTable.expired``, every
``reviveInterval``) with that many in flight over 8 queues, received 32 at a time, none of them
expired yet, then with 32 expired: its CPU per look, which should not grow with the count.

    .venv/bin/python bench/bench_pop_table.py
    .venv/bin/python bench/bench_pop_table.py --revive --in-flight 1000 20000 160000

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.pop.records import AckRecord, InFlight, PopRecord, QueueKey  # noqa: E402
from scheduler.pop.table import PopTable  # noqa: E402

KEY = QueueKey("group", "topic", 0)
BATCH = 32


def _entries(first: int, count: int, seq: int) -> tuple[InFlight, ...]:
    return tuple(InFlight(o, seq + o, 1, 10**13, 16, o * 1100) for o in range(first, first + count))


def measure(in_flight: int, rounds: int) -> tuple[float, float]:
    """(us per message acked, us per message popped) with ``in_flight`` in flight, best of rounds."""
    acks, pops = [], []
    for _ in range(rounds):
        table = PopTable()
        table.apply_all([PopRecord(KEY, 0, in_flight, _entries(0, in_flight, 1))])
        began, count = time.thread_time(), 0
        for start in range(in_flight - BATCH, in_flight // 2 - 1, -BATCH):
            table.apply_all([AckRecord(KEY, o) for o in range(start, start + BATCH)])
            count += BATCH
        acks.append((time.thread_time() - began) / count * 1e6)
        began, first = time.thread_time(), in_flight
        for _ in range(64):
            table.apply_all([PopRecord(KEY, first, first + BATCH, _entries(first, BATCH, 10**7))])
            first += BATCH
        pops.append((time.thread_time() - began) / (64 * BATCH) * 1e6)
    return min(acks), min(pops)


def revive_look(in_flight: int, rounds: int) -> tuple[float, float]:
    """(us per look with nothing expired, us per look finding 32) with ``in_flight`` over 8 queues."""
    table, seq = PopTable(), 1
    for queue in range(8):
        key = QueueKey("group", "topic", queue)
        for first in range(0, in_flight // 8, BATCH):
            entries = tuple(InFlight(o, seq + o, 1, 60_000 + first, 16, o * 1100) for o in range(first, first + BATCH))
            table.apply(PopRecord(key, first, first + BATCH, entries))
        seq += in_flight
    idle, busy = [], []
    for _ in range(rounds):
        began = time.thread_time()
        for _ in range(100):
            assert table.expired(59_999, 256) == []
        idle.append((time.thread_time() - began) / 100 * 1e6)
        began = time.thread_time()
        for _ in range(100):
            assert len(table.expired(60_000, 256)) == 8 * BATCH
        busy.append((time.thread_time() - began) / 100 * 1e6)
    return min(idle), min(busy)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--in-flight", type=int, nargs="+", default=[128, 1000, 5000, 20000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--revive", action="store_true", help="the revive's look for expired messages instead")
    args = parser.parse_args()
    if args.rounds < 1 or min(args.in_flight) < 2 * BATCH:
        parser.error(f"--rounds at least 1, --in-flight at least {2 * BATCH}")
    if args.revive:
        print(f"# bench_pop_table: {' '.join(sys.argv)}; 8 queues, received {BATCH} at a time, best of {args.rounds}, "
              f"the thread's CPU per look (us)")
        print(f"{'in flight':>10}{'none expired':>14}{f'{8 * BATCH} expired':>14}")
        for count in sorted(args.in_flight):
            idle, busy = revive_look(count, args.rounds)
            print(f"{count:>10}{idle:>14.1f}{busy:>14.1f}")
        return 0
    print(f"# bench_pop_table: {' '.join(sys.argv)}; one queue, batches of {BATCH}, best of {args.rounds}, "
          f"the thread's CPU per message (us); the first row is the reference")
    print(f"{'in flight':>10}{'ack us/msg':>12}{'pop us/msg':>12}{'ack / ref':>11}{'pop / ref':>11}")
    reference = None
    for count in sorted(args.in_flight):
        ack, pop = measure(count, args.rounds)
        reference = reference or (ack, pop)
        print(f"{count:>10}{ack:>12.2f}{pop:>12.2f}{ack / reference[0]:>11.2f}{pop / reference[1]:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
