"""SIGKILL a process doing SYNC_FLUSH sends and acks; after restart every acknowledged send is
consumable and no acknowledged ack's message is delivered again (the window is 0 under
SYNC_FLUSH: an answered ack is in the flushed pop log)."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = r'''
import asyncio, sys
from pathlib import Path
from metadata.message import MessageDraft, MessageType, Prop
from metadata.topic_config import TopicConfig
from scheduler.clock import SystemClock
from services.broker.api import FilterExpression, ReceiveRequest, SendItem
from services.broker.broker import Broker
from services.broker.config import BrokerConfig
from store.config import FlushDiskType, StoreConfig
from store.message_store import MessageStore

class Sink:
    def push_transaction_check(self, check): return False

async def main(root):
    clock = SystemClock()
    store = MessageStore(StoreConfig(store_path_root_dir=Path(root), flush_disk_type=FlushDiskType.SYNC_FLUSH,
                                     mapped_file_size_commit_log=1 << 22), clock.now_ms)
    store.start()
    broker = Broker(BrokerConfig(flush_consumer_offset_interval_ms=50), store, clock, Sink())
    await broker.start()
    await broker.upsert_topic(TopicConfig("T", 2, 2))
    n = 0
    while True:
        n += 1
        body = f"m{n}".encode()
        draft = MessageDraft("T", -1, body, clock.now_ms(), properties={Prop.MESSAGE_ID: f"ID{n}"})
        await broker.send([SendItem.of(draft, MessageType.NORMAL)])
        print("SENT", body.decode(), flush=True)
        if n % 3 == 0:
            request = ReceiveRequest("c", "G", "T", -1, FilterExpression(), 2, 600_000, False, 0, clock.monotonic_ms() + 1000)
            for d in await broker.receive(request):
                print("RECEIVED", d.message.body.decode(), flush=True)
                await broker.ack("G", "T", d.message.message_id, d.receipt_handle)
                print("ACKED", d.message.body.decode(), flush=True)

asyncio.run(main(sys.argv[1]))
'''


async def _drain_after_restart(root: Path) -> list[str]:
    from scheduler.clock import ManualClock
    from services.broker.api import FilterExpression, ReceiveRequest
    from services.broker.broker import Broker
    from services.broker.config import BrokerConfig
    from store.config import FlushDiskType, StoreConfig
    from store.message_store import MessageStore

    class Sink:
        def push_transaction_check(self, check):
            return False

    clock = ManualClock(now_ms=time.time_ns() // 1_000_000 + 3_600_000)  # every in-flight entry has expired
    store = MessageStore(StoreConfig(store_path_root_dir=root, flush_disk_type=FlushDiskType.SYNC_FLUSH,
                                     mapped_file_size_commit_log=1 << 22), clock.now_ms)
    store.start()
    broker = Broker(BrokerConfig(), store, clock, Sink())
    await broker.start()
    await broker.run_revive()
    seen = []
    while True:
        request = ReceiveRequest("c", "G", "T", -1, FilterExpression(), 32, 600_000, False, 0, clock.monotonic_ms())
        got = await broker.receive(request)
        if not got:
            break
        for delivery in got:
            seen.append(delivery.message.body.decode())
            await broker.ack("G", "T", "", delivery.receipt_handle)
    await broker.stop()
    store.shutdown()
    return seen


def _record(lines: dict[str, set[str]], line: str) -> None:
    """One line of the child's; the last may be cut by the kill (then it told nothing)."""
    parts = line.split()
    if len(parts) == 2 and parts[0] in lines:
        lines[parts[0]].add(parts[1])


@pytest.mark.integration
def test_sigkill_loses_no_acknowledged_send_and_replays_no_acknowledged_ack(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    store, stderr_path = tmp_path / "store", tmp_path / "child.stderr"
    with stderr_path.open("w") as stderr:
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(store)], cwd=ROOT, env=env,
                                 stdout=subprocess.PIPE, stderr=stderr, text=True)
    lines: dict[str, set[str]] = {"SENT": set(), "RECEIVED": set(), "ACKED": set()}
    sent, received, acked = lines["SENT"], lines["RECEIVED"], lines["ACKED"]
    deadline = time.monotonic() + 60
    try:
        while len(acked) < 40 and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            _record(lines, line)
    finally:
        child.send_signal(signal.SIGKILL)
        # what the child printed before the kill landed, through the same buffered reader:
        # communicate() reads the pipe itself and lost the lines readline had buffered, so
        # acked messages looked unacked (and "not consumable")
        rest = child.stdout.read()
        child.wait()
    for line in rest.splitlines():
        _record(lines, line)
    errors = stderr_path.read_text()
    assert len(acked) >= 40, errors[-2000:]
    seen = asyncio.run(_drain_after_restart(store))
    assert not (set(seen) & acked), "an acknowledged message was delivered again"
    # a message received before the kill was consumed, whether or not its ack's answer got out:
    # its ack may have landed (then it is not delivered again), or not (then it is)
    assert sent - received <= set(seen), "an acknowledged send is not consumable"
