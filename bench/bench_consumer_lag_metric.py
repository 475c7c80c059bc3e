"""What the container's consumer-lag metric refresh costs its event loop, by the number of groups.

Every 5 s a container sets ``relaymq_consumer_lag_messages`` for every (broker, group, topic)
(``ContainerRuntime._refresh_store_metrics``).  This builds a broker over a real store (a
temporary folder) with ``--topics`` topics of 8 queues and, for each of ``--groups`` groups,
committed offsets on every topic, then prints the thread's CPU of one refresh, best of
``--rounds``.  Before 2026-11-29 (twelfth session) the refresh asked ``consumer_progress`` per
group, which looked at every offset key of every group; it now reads the keys once
(``services.broker.consumer_lag``).  Where that module is missing (an older tree) the script
times the per-group way, so a worktree of an older commit gives the before figures.

    .venv/bin/python bench/bench_consumer_lag_metric.py
    .venv/bin/python bench/bench_consumer_lag_metric.py --groups 100 1000 --topics 10

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

from metadata.subscription_group import SubscriptionGroupConfig  # noqa: E402
from metadata.topic_config import TopicConfig  # noqa: E402
from scheduler.clock import ManualClock  # noqa: E402
from services.broker.broker import Broker  # noqa: E402
from services.broker.config import BrokerConfig  # noqa: E402
from store.config import FlushDiskType, StoreConfig  # noqa: E402
from store.message_store import MessageStore  # noqa: E402

QUEUES = 8


class _NoChecks:
    def push_transaction_check(self, check) -> bool:
        return True


def _refresh(broker) -> int:
    """One refresh's values, as the container computes them; how many (group, topic) pairs."""
    try:
        from services.broker.consumer_lag import lags_by_group_topic
    except ImportError:  # before: consumer_progress per group
        pairs = 0
        for group in broker.group_table().groups:
            lag: dict[str, int] = {}
            for row in broker.consumer_progress(group):
                lag[row.topic] = lag.get(row.topic, 0) + row.lag
            pairs += len(lag)
        return pairs
    return sum(1 for _ in lags_by_group_topic(broker, broker.group_table().groups))


async def _broker(folder: Path, groups: int, topics: int):
    clock = ManualClock()
    store = MessageStore(StoreConfig(store_path_root_dir=folder, flush_disk_type=FlushDiskType.ASYNC_FLUSH), clock.now_ms)
    store.start()
    broker = Broker(BrokerConfig(), store, clock, _NoChecks())
    await broker.start()
    for number in range(topics):
        await broker.upsert_topic(TopicConfig(f"topic-{number}", QUEUES, QUEUES))
    for number in range(groups):
        await broker.upsert_group(SubscriptionGroupConfig(f"group-{number}"))
        for topic in range(topics):
            for queue_id in range(QUEUES):
                broker.pop.keeper.commit(f"topic-{topic}", f"group-{number}", queue_id, 0, clock.now_ms())
    return broker, store


async def _run(args) -> None:
    print(f"{'groups':>8} {'topics':>7} {'pairs':>7} {'refresh':>12}  (ms of the thread's CPU, best of {args.rounds})")
    for groups in args.groups:
        with tempfile.TemporaryDirectory(prefix="bench-lag-") as folder:
            broker, store = await _broker(Path(folder), groups, args.topics)
            spent, pairs = [], 0
            for _ in range(args.rounds):
                began = time.thread_time()
                pairs = _refresh(broker)
                spent.append(time.thread_time() - began)
            print(f"{groups:>8,} {args.topics:>7} {pairs:>7,} {min(spent) * 1e3:>12.1f}", flush=True)
            await broker.stop()
            store.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[100, 1_000])
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.rounds < 1 or args.topics < 1 or min(args.groups) < 1:
        parser.error("--rounds, --topics and every --groups must be positive")
    print(f"# bench_consumer_lag_metric: {' '.join(sys.argv)}; python {sys.version.split()[0]}")
    asyncio.run(_run(args))


if __name__ == "__main__":
    main()
