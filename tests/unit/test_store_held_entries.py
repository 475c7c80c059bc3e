"""Consume-queue entries a failed write left to write (store.held_entries) on real stores:
the master ships them to its slave, a slave holds its own and stops copying until they are
written, a truncation cuts them, and nothing copied or acknowledged goes missing."""
from __future__ import annotations

import asyncio
import errno

import pytest

from metadata.message import MessageDraft
from store import message_store
from store.config import FlushDiskType, StoreConfig
from store.cq_entry import encode_entry
from store.errors import DiskFull
from store.held_entries import HeldEntries
from store.message_store import MessageStore
from store.replica_index import IndexCursor

SEGMENT = 8192


def make(path, flush=FlushDiskType.SYNC_FLUSH) -> MessageStore:
    store = MessageStore(StoreConfig(path, mapped_file_size_commit_log=SEGMENT, mapped_file_size_consume_queue=400,
                                     flush_disk_type=flush), lambda: 1_700_000_000_000)
    store.start()
    return store


def draft(i: int, queue_id: int = 0) -> MessageDraft:
    return MessageDraft("T", queue_id, b"%04d" % i + b"x" * 60, 7)


def bodies(store: MessageStore, queue_id: int = 0) -> list[bytes]:
    return [m.body[:4] for m in store.get("T", queue_id, 0, 1000).messages]


class FullDisk:
    """The consume-queue write of ``store`` fails (ENOSPC) while ``on``."""

    def __init__(self, store: MessageStore, monkeypatch):
        self.on = True
        original = store._index_runs

        def index_runs(runs, end_offset):
            if self.on:
                raise OSError(errno.ENOSPC, "No space left on device")
            original(runs, end_offset)
        monkeypatch.setattr(store, "_index_runs", index_runs)

    def space_back(self, monkeypatch) -> None:
        self.on = False
        monkeypatch.setattr(message_store, "WRITE_RETRY_MS", 0)


def copy(master: MessageStore, slave: MessageStore, cursor: IndexCursor, max_bytes: int = 300) -> None:
    while slave.commit_log_max_offset < master.commit_log_max_offset:
        start = slave.commit_log_max_offset
        data = master.read_raw(start, max_bytes)
        slave.append_raw(start, data, master.replication_index(cursor, start, start + len(data)))


def test_a_master_ships_held_entries_to_its_slave(tmp_path, monkeypatch):
    """bench/chaos.py finding: records copied while their entries were held reached the slave
    unindexed (as if their topic had been deleted) and the slave refused the next entries."""
    async def scenario():
        master, slave = make(tmp_path / "m"), make(tmp_path / "s", FlushDiskType.ASYNC_FLUSH)
        await master.put([draft(1), draft(2, 1)])
        disk = FullDisk(master, monkeypatch)
        with pytest.raises(DiskFull):
            await master.put([draft(3), draft(4, 1)])      # in the log, entries held
        cursor = IndexCursor()
        copy(master, slave, cursor)
        assert bodies(slave) == [b"0001", b"0003"] and bodies(slave, 1) == [b"0002", b"0004"]
        disk.space_back(monkeypatch)
        await master.put([draft(5)])
        copy(master, slave, cursor)
        assert bodies(master) == bodies(slave) == [b"0001", b"0003", b"0005"]
        master.shutdown(), slave.shutdown()
    asyncio.run(scenario())


def test_a_slave_whose_queue_write_fails_holds_the_run_stops_copying_and_resumes(tmp_path, monkeypatch):
    async def scenario():
        master, slave = make(tmp_path / "m"), make(tmp_path / "s")
        for i in range(1, 7):
            await master.put([draft(i, i % 2)])
        cursor = IndexCursor()
        first = master.read_raw(0, 150)
        disk = FullDisk(slave, monkeypatch)
        slave.append_raw(0, first, master.replication_index(cursor, 0, len(first)))   # committed, held
        assert slave.commit_log_max_offset == len(first) and bodies(slave) == []
        more = master.read_raw(len(first), 1000)
        with pytest.raises(DiskFull):                  # copies nothing more while its entries wait
            slave.stage_raw(len(first), more, master.replication_index(cursor, len(first), len(first) + len(more)))
        assert slave.commit_log_max_offset == len(first)
        disk.space_back(monkeypatch)
        copy(master, slave, IndexCursor())              # a new connection: a new cursor
        assert bodies(slave) == bodies(master) and bodies(slave, 1) == bodies(master, 1)
        assert len(bodies(slave) + bodies(slave, 1)) == 6
        slave.shutdown()
        slave = make(tmp_path / "s")                    # and after a restart
        assert bodies(slave) == bodies(master)
        master.shutdown(), slave.shutdown()
    asyncio.run(scenario())


def test_held_entries_of_a_slave_that_restarts_come_back_from_the_log(tmp_path, monkeypatch):
    async def scenario():
        master, slave = make(tmp_path / "m"), make(tmp_path / "s")
        for i in range(1, 4):
            await master.put([draft(i)])
        FullDisk(slave, monkeypatch)
        data = master.read_raw(0, 1000)
        slave.append_raw(0, data, master.replication_index(IndexCursor(), 0, len(data)))
        await slave.wait_flushed(len(data))
        monkeypatch.undo()
        slave.shutdown()
        slave = make(tmp_path / "s")
        assert bodies(slave) == [b"0001", b"0002", b"0003"]
        master.shutdown(), slave.shutdown()
    asyncio.run(scenario())


def test_a_truncation_cuts_held_entries_with_their_records(tmp_path, monkeypatch):
    async def scenario():
        store = make(tmp_path / "m")
        await store.put([draft(1)])
        disk = FullDisk(store, monkeypatch)
        with pytest.raises(DiskFull):
            await store.put([draft(2), draft(3), draft(4, 1)])
        cut = store.read_at(0).size
        cut += store.read_at(cut).size                  # keep records 1 and 2
        store.refuse_puts("a slave now")
        store.truncate(cut)
        disk.space_back(monkeypatch)
        assert store.retry_failed_writes()
        assert bodies(store) == [b"0001", b"0002"] and bodies(store, 1) == []
        store.refuse_puts(None)
        await store.put([draft(5), draft(6, 1)])
        assert bodies(store) == [b"0001", b"0002", b"0005"] and bodies(store, 1) == [b"0006"]
        store.shutdown()
    asyncio.run(scenario())


def test_held_runs_cut_keep_whole_entries_below_the_cut_and_count_queue_ends():
    held = HeldEntries()
    run = ("T", 0, 5, encode_entry(100, 50, 0) + encode_entry(0, 0, 0) + encode_entry(150, 50, 0))
    held.hold((run, ("U", 1, 0, encode_entry(120, 30, 0))), 200)
    assert len(held) == 4 and held.queue_ends() == {("T", 0): 8, ("U", 1): 1}
    held.cut_beyond(160)
    assert [(t, q, o) for _, t, q, o, _ in held.entries()] == [("T", 0, 5), ("U", 1, 0)]
    held.cut_beyond(100)
    assert not held and held.queue_ends() == {}
