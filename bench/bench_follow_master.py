"""What a slave's periodic metadata sync costs its event loop, by the number of consumer offsets.

Every 10 s a slave asks its master for the tables at versions it does not hold and adopts them;
under load the offsets move at every sync.  A slave Broker over the real message store in a
temporary folder adopts, ``--rounds`` times, its master's table of ``--offsets`` offsets (groups
of 10 topics x 8 queues; one offset moved and a new DataVersion each round), in two ways in the
same run: ``adopt`` (every item, each file written on the loop, as pre-online and the acting
hand-over do) and ``follow_master`` (what the periodic sync runs: the offsets' file made and
fsynced by a worker thread).  Printed: the loop thread's CPU per adoption and the longest the loop
was held meanwhile (a task asking for a turn every millisecond), medians.

    .venv/bin/python bench/bench_follow_master.py --offsets 10000 80000 --rounds 5

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_idle_snapshot import loop_held  # noqa: E402
from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey  # noqa: E402
from metadata.data_version import DataVersion  # noqa: E402
from metadata.replica_metadata import ReplicaMetadata, SyncDirection  # noqa: E402
from services.broker import replica_metadata  # noqa: E402
from tests.scenario.test_broker_flows import Harness  # noqa: E402


def _offsets(count: int, counter: int) -> ConsumerOffsetTable:
    table: dict = {}
    for number in range(count):
        group, rest = divmod(number, 80)
        table.setdefault(OffsetKey(f"topic-{rest // 8}", f"group-{group}"), {})[rest % 8] = 1_000 + (number == 0) * counter
    return ConsumerOffsetTable(DataVersion(counter=counter), table)


async def _case(count: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        harness = Harness(Path(tmp), broker_id=1, broker_role="SLAVE")
        broker = await harness.start()
        base = replica_metadata.snapshot(broker)
        tables = [_offsets(count, counter) for counter in range(1, 2 * rounds + 1)]
        figures: dict[str, list] = {"adopt": [], "follow_master": []}
        for number in range(rounds):
            for way, table in (("adopt", tables[2 * number]), ("follow_master", tables[2 * number + 1])):
                master = ReplicaMetadata("broker-a", 0, "MASTER", base.topics, base.groups, table, base.timer_checkpoint)
                if way == "adopt":
                    work = lambda: asyncio.sleep(0, replica_metadata.adopt(broker, master, SyncDirection.FROM_MASTER))  # noqa: E731
                else:
                    work = lambda: replica_metadata.follow_master(broker, master)  # noqa: E731
                figures[way].append(await loop_held(work))
        await harness.stop()
    return {way: (1e3 * statistics.median(c for c, _ in runs), 1e3 * statistics.median(h for _, h in runs))
            for way, runs in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--offsets", type=int, nargs="+", default=[10_000, 80_000])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if min(args.offsets) < 1 or args.rounds < 1:
        parser.error("--offsets and --rounds must be at least 1")
    print(f"# bench_follow_master: {' '.join(sys.argv[1:]) or '(defaults)'}; a slave adopting its master's offsets, "
          f"the loop thread's CPU and its longest hold per adoption (medians of {args.rounds})")
    print(f"{'offsets':>8} {'adopt: loop ms':>15} {'held ms':>8} {'follow_master: loop ms':>23} {'held ms':>8}")
    for count in args.offsets:
        row = asyncio.run(_case(count, args.rounds))
        print(f"{count:>8,} {row['adopt'][0]:>15.1f} {row['adopt'][1]:>8.1f} {row['follow_master'][0]:>23.1f} "
              f"{row['follow_master'][1]:>8.1f}")


if __name__ == "__main__":
    main()
