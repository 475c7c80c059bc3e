"""What a rebuild of derived state costs after a log cut or a master's step-down.

A truncation (a rejoining master cut to the consistent point) or a step-down makes the pop
table, the timer index and the transaction table rebuild from their logs (``MessageStore.
invalidate_derived``; PopService.catch_up says why).  The rebuild runs on the broker's event
loop, so it is a pause of that broker's calls.  This measures it over a real store in a temp
dir: N messages sent, received in batches of 32 and acked one by one (as the official
clients ack), plus N/10 delay messages; then the store is invalidated and each service's
catch_up is timed, in one go and then in steps (``Broker.catch_up_in_steps``, as a slave that
stepped down rebuilds: the longest step is the longest the loop waits).  The reference,
measured in the same run, is a bare read of the same logs through ``store.get`` (no
decoding, no table): the floor any rebuild from the log pays.

    .venv/bin/python bench/bench_rebuild.py [--messages 20000 100000]

Prints figures; never fails on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metadata.message import MessageDraft, MessageType, Prop  # noqa: E402
from metadata.topic_config import TopicConfig  # noqa: E402
from scheduler.clock import ManualClock  # noqa: E402
from scheduler.pop.records import REVIVE_TOPIC  # noqa: E402
from services.broker.api import FilterExpression, ReceiveRequest, SendItem  # noqa: E402
from services.broker.broker import Broker  # noqa: E402
from services.broker.config import BrokerConfig  # noqa: E402
from store.config import FlushDiskType, StoreConfig  # noqa: E402
from store.results import GetStatus  # noqa: E402
from store.message_store import MessageStore  # noqa: E402


class _NoChecks:
    def push_transaction_check(self, check) -> bool:
        return True


def _bare_read(store: MessageStore, topic: str) -> int:
    """Records read from (topic, 0) from offset 0, as a rebuild reads them, without applying."""
    offset = read = 0
    while True:
        result = store.get(topic, 0, offset, 1024)
        if result.status is GetStatus.OFFSET_TOO_SMALL:
            offset = result.next_offset
            continue
        if not result.messages:
            return read
        offset, read = result.next_offset, read + len(result.messages)


async def measure(root: Path, messages: int) -> dict:
    clock = ManualClock()
    store = MessageStore(StoreConfig(store_path_root_dir=root, flush_disk_type=FlushDiskType.ASYNC_FLUSH,
                                     mapped_file_size_commit_log=64 << 20), clock.now_ms)
    store.start()
    broker = Broker(BrokerConfig(), store, clock, _NoChecks())
    await broker.start()
    try:
        await broker.upsert_topic(TopicConfig("T", 4, 4))
        await broker.upsert_topic(TopicConfig("D", 4, 4, message_type="DELAY"))
        for start in range(0, messages, 32):
            await broker.send([SendItem.of(MessageDraft("T", -1, b"x" * 256, clock.now_ms(),
                                                     properties={Prop.MESSAGE_ID: f"M{start + i}"}),
                                        MessageType.NORMAL) for i in range(min(32, messages - start))])
        for start in range(0, messages // 10, 32):
            await broker.send([SendItem.of(MessageDraft("D", -1, b"d", clock.now_ms(),
                                                     properties={Prop.MESSAGE_ID: f"D{start + i}"}),
                                        MessageType.DELAY, None, clock.now_ms() + 3_600_000)
                               for i in range(min(32, messages // 10 - start))])
        acked = 0
        while acked < messages:
            request = ReceiveRequest("bench", "G", "T", -1, FilterExpression(expression="*"), 32, 60_000,
                                     False, 0, clock.monotonic_ms() + 1000)
            deliveries = await broker.receive(request)
            if not deliveries:
                break
            for delivery in deliveries:
                await broker.ack("G", "T", delivery.message.message_id, delivery.receipt_handle)
            acked += len(deliveries)
        pop_records = _bare_read(store, REVIVE_TOPIC)
        started = time.perf_counter()
        _bare_read(store, REVIVE_TOPIC)
        bare_s = time.perf_counter() - started
        committed = sum(broker.pop.committed_offset("G", "T", q) for q in range(4))
        store.invalidate_derived()
        started = time.perf_counter()
        broker.pop.catch_up()
        pop_s = time.perf_counter() - started
        started = time.perf_counter()
        broker.timer.catch_up()
        timer_s = time.perf_counter() - started
        started = time.perf_counter()
        broker.transactions.catch_up()
        transaction_s = time.perf_counter() - started
        rebuilt = sum(broker.pop.committed_offset("G", "T", q) for q in range(4))
        broker.pop.serving = lambda: False    # as a slave that stepped down: the rebuild goes in steps
        store.invalidate_derived()
        steps = asyncio.ensure_future(broker.catch_up_in_steps())
        longest, last, started = 0.0, time.perf_counter(), time.perf_counter()
        while not steps.done():
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest, last = max(longest, now - last), now
        await steps
        in_steps_s = time.perf_counter() - started
        stepped = sum(broker.pop.committed_offset("G", "T", q) for q in range(4))
        return {"messages": messages, "acked": acked, "pop_log_messages": pop_records, "bare_read_s": bare_s,
                "pop_s": pop_s, "timer_s": timer_s, "transaction_s": transaction_s,
                "same_offsets": committed == rebuilt == stepped, "in_steps_s": in_steps_s, "longest_step_s": longest, "log_mb": store.commit_log_max_offset / 1e6}
    finally:
        await broker.stop()
        store.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[20000])
    parser.add_argument("--dir", default="", help="parent directory for the stores (default: a temp dir)")
    args = parser.parse_args()
    if any(n < 32 for n in args.messages):
        parser.error("--messages: each count must be at least 32")
    print(f"# bench_rebuild: {platform.python_version()} on {platform.machine()}; "
          f"receive batch 32, one ack per message, delay messages = messages/10; ASYNC_FLUSH store")
    print(f"{'messages':>9} {'pop-log msgs':>12} {'bare read s':>11} {'pop s':>7} {'timer s':>8} {'txn s':>7} "
          f"{'pop/bare':>8} {'log MB':>7} {'steps s':>7} {'max step ms':>11} offsets")
    for messages in args.messages:
        parent = Path(args.dir) if args.dir else None
        root = Path(tempfile.mkdtemp(prefix="relaymq-rebuild-", dir=parent))
        try:
            r = asyncio.run(measure(root, messages))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"{r['messages']:9d} {r['pop_log_messages']:12d} {r['bare_read_s']:11.3f} {r['pop_s']:7.3f} "
              f"{r['timer_s']:8.3f} {r['transaction_s']:7.3f} {r['pop_s'] / max(r['bare_read_s'], 1e-9):8.1f} "
              f"{r['log_mb']:7.1f} {r['in_steps_s']:7.3f} {r['longest_step_s'] * 1000:11.1f} "
              f"{'same' if r['same_offsets'] else 'DIFFER'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
