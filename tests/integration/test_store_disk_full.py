"""A store on a real full disk (a small tmpfs mounted for the test, root only) and I/O errors:
a put is refused at once with DISK_FULL, nothing acknowledged is damaged (all of it reads back,
before and after a restart), and puts work again by themselves once space is back."""
from __future__ import annotations

import asyncio
import errno
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from metadata.message import MessageDraft
from metadata.status import Code
from services.broker.internal_put import rejection_for
from store import message_store
from store.config import FlushDiskType, StoreConfig
from store.errors import DiskFull, StoreError
from store.message_store import MessageStore

pytestmark = pytest.mark.integration


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def open_store(root: Path) -> MessageStore:
    config = StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=1 << 20,
                         flush_disk_type=FlushDiskType.SYNC_FLUSH)
    store = MessageStore(config, lambda: int(time.time() * 1000))
    store.start()
    return store


def body(i: int) -> bytes:
    return b"%06d" % i + b"x" * 994


def read_all(store: MessageStore) -> list[bytes]:
    bodies = []
    for queue_id in (0, 1):
        offset = 0
        while True:
            got = store.get("t", queue_id, offset, 32)
            if not got.messages:
                break
            bodies += [m.body for m in got.messages]
            offset = got.next_offset
    return bodies


async def fill(store: MessageStore, first: int, limit: int) -> tuple[list[int], list[StoreError]]:
    acked, refused = [], []
    for i in range(first, first + limit):
        started = time.monotonic()
        try:
            await store.put([MessageDraft("t", i % 2, body(i), 0)])
            acked.append(i)
        except StoreError as error:
            assert time.monotonic() - started < 1.0, "a full disk must refuse a put at once, not time it out"
            refused.append(error)
            if len(refused) >= 5:
                break
    return acked, refused


def test_a_full_disk_refuses_puts_keeps_what_was_acknowledged_and_recovers(small_disk):
    async def scenario():
        store = open_store(small_disk / "store")
        acked, refused = await fill(store, 0, 10_000)
        assert acked and refused and all(isinstance(e, DiskFull) for e in refused)
        status = rejection_for(refused[-1])
        assert status.code is Code.INTERNAL_SERVER_ERROR and "DISK_FULL" in status.message
        subprocess.run(["mount", "-o", "remount,size=8m", str(small_disk)], check=True)   # space is back
        await asyncio.sleep(message_store.WRITE_RETRY_MS / 1000 + 0.1)
        more, refused_after = await fill(store, 20_000, 50)
        assert len(more) == 50 and not refused_after, refused_after
        readable = set(read_all(store))
        assert {body(i) for i in acked + more} <= readable
        store.shutdown()
        store = open_store(small_disk / "store")
        assert {body(i) for i in acked + more} <= set(read_all(store))
        store.shutdown()
    asyncio.run(scenario())


def test_an_io_error_on_the_consume_queue_write_fails_the_put_and_heals(tmp_path, monkeypatch):
    async def scenario():
        store = open_store(tmp_path / "store")
        await store.put([MessageDraft("t", 0, body(1), 0)])
        original = store._index_runs
        failing = {"on": True}

        def index_runs(runs, end_offset):
            if failing["on"]:
                raise OSError(errno.EIO, "Input/output error")
            original(runs, end_offset)
        monkeypatch.setattr(store, "_index_runs", index_runs)
        with pytest.raises(DiskFull):
            await store.put([MessageDraft("t", 0, body(2), 0)])
        with pytest.raises(DiskFull):      # refused at once while the write keeps failing
            await store.put([MessageDraft("t", 0, body(3), 0)])
        failing["on"] = False
        await asyncio.sleep(message_store.WRITE_RETRY_MS / 1000 + 0.1)
        await store.put([MessageDraft("t", 0, body(4), 0)])
        assert read_all(store) == [body(1), body(2), body(4)]   # the held record is indexed, in order
        store.shutdown()
    asyncio.run(scenario())


def test_a_store_over_the_usage_limit_serves_again_without_waiting_for_retention(tmp_path, monkeypatch):
    async def scenario():
        store = open_store(tmp_path / "store")
        usage = {"percent": 99.0}
        monkeypatch.setattr(message_store.retention, "disk_used_percent", lambda path: usage["percent"])
        store.clean_expired()
        with pytest.raises(DiskFull):
            await store.put([MessageDraft("t", 0, body(1), 0)])
        usage["percent"] = 10.0
        await asyncio.sleep(message_store.WRITE_RETRY_MS / 1000 + 0.1)
        await store.put([MessageDraft("t", 0, body(2), 0)])        # no retention pass in between
        store.shutdown()
    asyncio.run(scenario())
