"""What a broker's periodic state snapshot costs the event loop, by the size of its tables.

Every ``flushConsumerOffsetInterval`` (5 s by default) a broker takes its pop table (every
message received and not yet acked), its timer index and its transaction table as documents
on the event loop, with no await in between, and writes them from a worker thread
(``Broker.persist_in_background``).  Taking the documents and their text holds the loop: no
call is served meanwhile.  This prints, for pop tables of growing size (``--queues`` queues of
in-flight messages each), the loop time of the pop table's document and of its text, written
as the broker writes popState.json (``config_files.document_text``) and, in the same run for
reference, in RocketMQ's fastjson dialect (``metadata.fastjson.dumps``), which popState.json
was written in until 2026-11-29; then the same for a timer index of as many pending
messages; then topics.json of ``--topics`` topics, which stays in the dialect (RocketMQ reads
it): a master writes it on every topic change and serves it to every slave's metadata sync
every 10 s: each entry written again ("topics.json"), and, as the broker writes it, from the
entries kept from the last write ("kept entries": one topic more than the last); then
``--create`` topics created one by one through a broker's TopicManager (each writes
topics.json, fsynced, to a temporary config folder): wall and CPU seconds in all; then the
timer checkpoint of as many pending messages as the largest pop table on the wire
(GetReplicaMetadata, every slave every 10 s): the master's reply and the slave's parse.  Wall time on this thread (the loop's), best of ``--rounds``.

    .venv/bin/python bench/bench_state_snapshot.py
    .venv/bin/python bench/bench_state_snapshot.py --in-flight 1000 20000 --queues 8 --rounds 3

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from metadata import fastjson  # noqa: E402
from metadata.topic_config import TopicConfig, TopicTable  # noqa: E402
from scheduler.pop.records import InFlight, QueueKey  # noqa: E402
from scheduler.pop.table import PopTable  # noqa: E402
from scheduler.timer import TimerIndex  # noqa: E402
from services.broker.config_files import document_text  # noqa: E402

NOW_MS = 1_800_000_000_000


def pop_table(queues: int, per_queue: int) -> PopTable:
    table = PopTable()
    for queue_id in range(queues):
        state = table.ensure(QueueKey("bench-group", "bench-topic", queue_id), 0)
        for offset in range(per_queue):
            state.inflight[offset] = InFlight(offset, queue_id * per_queue + offset, 1, NOW_MS + 60_000, 16,
                                              (queue_id * per_queue + offset) * 1_200)
        state.pop_offset = per_queue
    return table


def timer_index(pending: int) -> TimerIndex:
    index = TimerIndex()
    for offset in range(pending):
        index.add(offset * 1_200, NOW_MS + offset)
    return index


def best_ms(action, rounds: int) -> float:
    spent = []
    for _ in range(rounds):
        began = time.perf_counter()
        action()
        spent.append(time.perf_counter() - began)
    return min(spent) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-flight", type=int, nargs="+", default=[1_000, 5_000, 20_000],
                        help="in-flight messages per queue (one row each)")
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--topics", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--create", type=int, default=2_000, help="topics created one by one (0: none)")
    args = parser.parse_args()
    if (args.rounds < 1 or args.queues < 1 or args.create < 0 or min(args.in_flight) < 1 or min(args.topics) < 1):
        parser.error("--rounds, --queues, --in-flight and --topics must be positive, --create not negative")
    pop_path, timer_path = Path("popState.json"), Path("timerCheckpoint.json")
    print(f"# bench_state_snapshot: {' '.join(sys.argv[1:]) or '(defaults)'}; python {sys.version.split()[0]}; "
          f"{args.queues} queues; best of {args.rounds}; ms of the event loop per snapshot")
    print(f"{'entries':>9} {'pop document':>13} {'text (now)':>11} {'text (dialect)':>15} "
          f"{'timer document':>15} {'text (now)':>11} {'text (dialect)':>15}")
    for per_queue in args.in_flight:
        entries = per_queue * args.queues
        table, index = pop_table(args.queues, per_queue), timer_index(entries)
        pop_document, timer_document = table.to_document(), index.to_document()
        print(f"{entries:>9,} {best_ms(table.to_document, args.rounds):>13.1f} "
              f"{best_ms(lambda: document_text(pop_path, pop_document), args.rounds):>11.1f} "
              f"{best_ms(lambda: fastjson.dumps(pop_document), args.rounds):>15.1f} "
              f"{best_ms(index.to_document, args.rounds):>15.1f} "
              f"{best_ms(lambda: document_text(timer_path, timer_document), args.rounds):>11.1f} "
              f"{best_ms(lambda: fastjson.dumps(timer_document), args.rounds):>15.1f}", flush=True)
    print(f"{'topics':>9} {'document':>13} {'topics.json':>11} {'kept entries':>13}")
    for count in args.topics:
        table = TopicTable(topics={f"topic-{number}": TopicConfig(f"topic-{number}") for number in range(count)})
        document = table.to_document()
        table.file_document()  # every entry written once, as after the broker's first write
        changed = table.with_topic(TopicConfig("one-more"), table.data_version)
        print(f"{count:>9,} {best_ms(table.to_document, args.rounds):>13.1f} "
              f"{best_ms(lambda: document_text(Path('topics.json'), document), args.rounds):>11.1f} "
              f"{best_ms(lambda: document_text(Path('topics.json'), changed.file_document()), args.rounds):>13.1f}",
              flush=True)
    if args.create:
        print(f"{args.create:,} topics created one by one: {_create_topics(args.create)}", flush=True)
    _replica_sync(max(args.in_flight) * args.queues, args.rounds)


def _replica_sync(pending: int, rounds: int) -> None:
    from metadata.consumer_offsets import ConsumerOffsetTable
    from metadata.data_version import DataVersion
    from metadata.replica_metadata import ReplicaMetadata, VersionedDocument
    from metadata.subscription_group import SubscriptionGroupTable
    from services.admin.replica_converters import replica_metadata_from_proto, replica_metadata_to_proto
    index = timer_index(pending)
    metadata = ReplicaMetadata("broker-a", 0, "MASTER", TopicTable(), SubscriptionGroupTable(), ConsumerOffsetTable(),
                               VersionedDocument(DataVersion(0, 1, 1), index.to_document()))
    reply = replica_metadata_to_proto(metadata)
    print(f"timer checkpoint of {pending:,} pending on the wire: the master's reply "
          f"{best_ms(lambda: replica_metadata_to_proto(metadata), rounds):.1f} ms, the slave's parse "
          f"{best_ms(lambda: replica_metadata_from_proto(reply), rounds):.1f} ms "
          f"({len(reply.timer_checkpoint.document) / 1e6:.1f} MB)", flush=True)


def _create_topics(count: int) -> str:
    import tempfile

    from services.broker.config import BrokerConfig
    from services.broker.topics import TopicManager
    with tempfile.TemporaryDirectory(prefix="bench-topics-") as folder:
        manager = TopicManager(BrokerConfig(), Path(folder))
        wall, cpu = time.perf_counter(), time.process_time()
        for number in range(count):
            manager.upsert(TopicConfig(f"topic-{number}"), NOW_MS + number)
        return f"{time.perf_counter() - wall:.1f} s, {time.process_time() - cpu:.1f} s of CPU"


if __name__ == "__main__":
    main()
