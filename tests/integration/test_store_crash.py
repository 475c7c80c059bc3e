"""Crash tests: SIGKILL a process doing SYNC_FLUSH puts, restart, check every acknowledged
message is readable exactly once with its body, and a torn tail is cut, never served."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store.config import FlushDiskType, StoreConfig
from store.message_store import MessageStore

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SEGMENT = 256 * 1024
QUEUES = 4

CHILD = r"""
import asyncio, sys, time
from pathlib import Path
from metadata.message import MessageDraft, Prop
from store.config import FlushDiskType, StoreConfig
from store.message_store import MessageStore

path, run_id = Path(sys.argv[1]), sys.argv[2]
store = MessageStore(StoreConfig(path, mapped_file_size_commit_log=%d, mapped_file_size_consume_queue=20 * 64,
                                 flush_disk_type=FlushDiskType.SYNC_FLUSH), lambda: int(time.time() * 1000))

async def putter(worker):
    for n in range(10**9):
        ident = f"{run_id}-{worker}-{n}"
        batch = [MessageDraft("crash", (worker + i) %% %d, (ident + "/" + str(i)).encode() * 20, 1,
                              properties={Prop.MESSAGE_ID: ident + "/" + str(i)}) for i in range(1 + n %% 3)]
        for m in await store.put(batch):
            sys.stdout.write(f"ACK {m.queue_id} {m.queue_offset} {m.message_id}\n")
        sys.stdout.flush()

async def main():
    store.start()
    print("READY", flush=True)
    await asyncio.gather(*(putter(w) for w in range(8)))

asyncio.run(main())
""" % (SEGMENT, QUEUES)


def run_child_until_killed(path: Path, run_id: str, acks_wanted: int) -> list[tuple[int, int, str]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), run_id], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, text=True)
    acks: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + 60
    try:
        for line in child.stdout:
            if line.startswith("ACK "):
                _, queue_id, offset, ident = line.split()
                acks.append((int(queue_id), int(offset), ident))
            if len(acks) >= acks_wanted or time.monotonic() > deadline:
                break
        child.send_signal(signal.SIGKILL)
        # acknowledgements already in the pipe were also durable: read them to the end
        rest, errors = child.communicate(timeout=30)
        for line in rest.splitlines():
            if line.startswith("ACK ") and len(line.split()) == 4:
                _, queue_id, offset, ident = line.split()
                acks.append((int(queue_id), int(offset), ident))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert acks, f"the child acknowledged nothing: {errors if 'errors' in locals() else ''}"
    return acks


def open_store(path: Path) -> MessageStore:
    return MessageStore(StoreConfig(path, mapped_file_size_commit_log=SEGMENT, mapped_file_size_consume_queue=20 * 64,
                                    flush_disk_type=FlushDiskType.SYNC_FLUSH), lambda: int(time.time() * 1000))


def check_all_acknowledged(store: MessageStore, acks: list[tuple[int, int, str]]) -> None:
    served: dict[str, int] = {}
    for queue_id in range(QUEUES):
        offset = store.min_offset("crash", queue_id)
        while offset < store.max_offset("crash", queue_id):
            result = store.get("crash", queue_id, offset, 512, max_bytes=1 << 30)
            for message in result.messages:
                assert message.body == (message.message_id.encode() * 20), "corrupt body served"
                served[message.message_id] = served.get(message.message_id, 0) + 1
                expected = (queue_id, message.queue_offset)
                assert (message.queue_id, message.queue_offset) == expected
            offset = result.next_offset
    for queue_id, offset, ident in acks:
        assert served.get(ident) == 1, f"acknowledged {ident} at {queue_id}/{offset} served {served.get(ident, 0)} times"
        got = store.get("crash", queue_id, offset, 1).messages
        assert got and got[0].message_id == ident, f"{ident} not at {queue_id}/{offset}"
    assert all(count == 1 for count in served.values()), "a message is served twice"


@pytest.mark.parametrize("seed", [1, 2])
def test_sigkill_during_sync_flush_puts_loses_nothing_acknowledged(tmp_path, seed):
    rng = random.Random(seed)
    acks: list[tuple[int, int, str]] = []
    for round_number in range(3):
        acks += run_child_until_killed(tmp_path, f"r{seed}.{round_number}", rng.randint(50, 600))
        store = open_store(tmp_path)
        store.start()
        check_all_acknowledged(store, acks)
        store.shutdown()


def test_torn_tail_after_sigkill_is_cut_and_never_served(tmp_path):
    acks = run_child_until_killed(tmp_path, "torn", 200)
    last = sorted((tmp_path / "commitlog").iterdir())[-1]
    with open(last, "ab") as file:  # a torn write: a record header and part of a body
        file.write(b"\x00\x00\x10\x00\xda\x7a\x5e\xed" + os.urandom(300))
    store = open_store(tmp_path)
    report = store.start()
    assert report.truncated_bytes >= 308 and report.notes
    check_all_acknowledged(store, acks)
    store.shutdown()
