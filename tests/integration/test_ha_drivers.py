"""The replication drivers over a real connection on loopback, with real stores on disk.

One process, two MessageStores: a ReplicationMaster behind a real replication listener (and
the grpc.aio server answering Locate) and a ReplicationSlave copying from it.  Checked by
reading both commit logs from disk.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from ha.replication.config import BrokerRole, HaConfig
from metadata.message import MessageDraft, Prop
from metadata.status import Code, RequestRejected
from scheduler.clock import SystemClock
from services.ha.master import ReplicationMaster
from services.ha.service import HaListener, add_ha_service
from services.ha.slave import ReplicationSlave
from store.config import FlushDiskType, StoreConfig
from store.message_store import MessageStore

pytestmark = pytest.mark.integration
SEGMENT = 256 * 1024


def make_store(path: Path, flush=FlushDiskType.SYNC_FLUSH) -> MessageStore:
    store = MessageStore(StoreConfig(path, mapped_file_size_commit_log=SEGMENT, mapped_file_size_consume_queue=20 * 1000,
                                     flush_disk_type=flush), SystemClock().now_ms)
    store.start()
    return store


def draft(i: int, topic: str = "T", queue_id: int = 0, size: int = 1000) -> MessageDraft:
    return MessageDraft(topic, queue_id, f"{i:08d}".encode() * (size // 8), 1, "127.0.0.1:1",
                        {Prop.MESSAGE_ID: f"id-{i}"}, {})


def log_bytes(store: MessageStore) -> bytes:
    low, high = store.commit_log_min_offset, store.commit_log_max_offset
    out, offset = [], low
    while offset < high:
        chunk = store.read_raw(offset, 1 << 20)
        assert chunk, offset
        out.append(chunk)
        offset += len(chunk)
    return b"".join(out)


class Group:
    def __init__(self, tmp: Path, role=BrokerRole.SYNC_MASTER, in_sync=2, master_store=None, slave_store=None):
        self.master_store = master_store or make_store(tmp / "master")
        self.slave_store = slave_store or make_store(tmp / "slave")
        clock = SystemClock()
        common = dict(total_replicas=2, in_sync_replicas=in_sync, ha_send_heartbeat_interval_ms=500,
                      ha_housekeeping_interval_ms=5000, ha_max_time_slave_not_catchup_ms=2000)
        self.master = ReplicationMaster("broker-a", self.master_store, HaConfig(broker_role=role, **common), clock)
        masters = lambda name: self.master if name == "broker-a" else None  # noqa: E731
        self.listener = HaListener(masters)
        self.listener.bind("127.0.0.1", 0)
        self.server = grpc.aio.server()
        add_ha_service(self.server, masters, lambda: self.listener.port)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{port}"
        self.slave = ReplicationSlave("broker-a", 1, self.slave_store,
                                      HaConfig(broker_role=BrokerRole.SLAVE, ha_connect_retry_interval_ms=100, **common),
                                      clock, self._address)

    async def _address(self):
        return self.address

    async def start(self):
        await self.server.start()
        self.listener.start()
        self.master.start()
        self.slave.start()

    async def stop(self):
        await self.slave.stop()
        await self.master.stop()
        await self.listener.stop()
        await self.server.stop(0)
        self.master_store.shutdown()
        self.slave_store.shutdown()

    async def caught_up(self, timeout_s: float = 10.0) -> None:
        async with asyncio.timeout(timeout_s):
            while self.slave_store.commit_log_max_offset != self.master_store.commit_log_max_offset \
                    or self.master.status()["slaves"] == [] or self.master.status()["slaves"][0]["ackOffset"] \
                    != self.master_store.commit_log_max_offset:
                await asyncio.sleep(0.02)


async def put(group: Group, first: int, count: int, batch: int = 10) -> None:
    for start in range(first, first + count, batch):
        await group.master_store.put([draft(i, queue_id=i % 4) for i in range(start, min(first + count, start + batch))])
        await group.master.wait_replicated(group.master_store.commit_log_max_offset)


def test_slave_copies_the_master_byte_for_byte_and_acks_sync_puts(tmp_path):
    asyncio.run(_copies(tmp_path))


async def _copies(tmp_path):
    group = Group(tmp_path)
    await group.start()
    try:
        async with asyncio.timeout(10):
            while not group.master.streams:
                await asyncio.sleep(0.02)
        await put(group, 0, 600)
        await group.caught_up()
        assert log_bytes(group.slave_store) == log_bytes(group.master_store)
        assert group.slave_store.max_offset("T", 3) == group.master_store.max_offset("T", 3) == 150
        assert group.slave_store.epochs.history == group.master_store.epochs.history
        assert group.master.status()["syncStateSet"] == [0, 1]
    finally:
        await group.stop()


def test_sync_master_without_a_slave_refuses_at_once(tmp_path):
    asyncio.run(_refuses(tmp_path))


async def _refuses(tmp_path):
    group = Group(tmp_path)
    await group.server.start()  # the slave never starts
    try:
        with pytest.raises(RequestRejected) as failure:
            group.master.check_writable()
        assert failure.value.code is Code.HA_NOT_AVAILABLE
    finally:
        await group.server.stop(0)
        group.master_store.shutdown()
        group.slave_store.shutdown()


def test_a_gone_member_leaves_the_set_at_once_and_the_confirm_offset_survives_restart(tmp_path):
    asyncio.run(_member_leaves(tmp_path))


async def _member_leaves(tmp_path):
    group = Group(tmp_path, role=BrokerRole.ASYNC_MASTER, in_sync=1)
    await group.start()
    try:
        await put(group, 0, 30)
        await group.caught_up()
        await asyncio.sleep(0.1)
        await put(group, 30, 10)   # one batch after a quiet spell: its ack is the last news
        await group.caught_up()
        assert group.master.status()["syncStateSet"] == [0, 1]
        confirmed = group.master.visible_offset()
        assert confirmed == group.master_store.commit_log_max_offset
        async with asyncio.timeout(0.4):  # the news of the last ack's confirm (20 ms), not the next heartbeat (500 ms)
            while group.slave_store.confirm_offset != confirmed:
                await asyncio.sleep(0.01)
        await group.slave.stop()
        async with asyncio.timeout(10):  # disconnected: proposed out and (no controller) applied at once
            while group.master.status()["syncStateSet"] != [0]:
                await asyncio.sleep(0.02)
        await put(group, 40, 40)
        assert group.master.visible_offset() == group.master_store.commit_log_max_offset
        assert len(group.master_store.get("T", 0, 0, 100).messages) == 20
        slave_confirm = group.slave_store.confirm_offset
        assert slave_confirm == confirmed
    finally:
        await group.master.stop()
        await group.server.stop(0)
        group.master_store.shutdown()
        group.slave_store.shutdown()
    reopened = make_store(tmp_path / "slave")
    try:
        assert reopened.confirm_offset == slave_confirm
    finally:
        reopened.shutdown()


def test_a_slave_ahead_of_its_restarted_master_is_cut_back_physically(tmp_path):
    asyncio.run(_cut_back(tmp_path))


async def _cut_back(tmp_path):
    group = Group(tmp_path, role=BrokerRole.ASYNC_MASTER, in_sync=1)
    await group.start()
    await put(group, 0, 40)
    await group.caught_up()
    await group.slave.stop()
    await group.server.stop(0)
    group.master_store.shutdown()
    # the master lost its tail (as an ASYNC_FLUSH master does in a crash): cut it offline
    master_store = make_store(tmp_path / "master")
    cut = master_store.get("T", 1, 5, 1).messages[0].commit_offset
    master_store.truncate(cut)
    master_store.shutdown()
    slave_store = group.slave_store
    group = Group(tmp_path, role=BrokerRole.ASYNC_MASTER, in_sync=1, master_store=make_store(tmp_path / "master"),
                  slave_store=slave_store)
    await group.start()
    try:
        await group.caught_up()
        assert group.slave_store.commit_log_max_offset == cut
        assert log_bytes(group.slave_store) == log_bytes(group.master_store)
        assert group.slave_store.max_offset("T", 1) == 5
        await put(group, 100, 8)
        await group.caught_up()
        assert log_bytes(group.slave_store) == log_bytes(group.master_store)
    finally:
        await group.stop()


def test_a_connection_that_does_not_start_with_a_handshake_is_refused(tmp_path):
    asyncio.run(_no_handshake(tmp_path))


async def _no_handshake(tmp_path):
    import socket

    from ha.replication.messages import SlaveAck
    from services.ha.converters import slave_frame_to_proto
    from services.ha.wire import PREAMBLE, frame_prefix

    group = Group(tmp_path)
    group.listener.start()
    try:
        def talk() -> bytes:
            with socket.create_connection(("127.0.0.1", group.listener.port), timeout=10) as sock:
                header = slave_frame_to_proto(SlaveAck(0)).SerializeToString()
                sock.sendall(PREAMBLE + frame_prefix(len(header), 0) + header)
                return sock.recv(100)
        assert await asyncio.get_running_loop().run_in_executor(None, talk) == b""  # closed without a word
        assert not group.master.streams
    finally:
        await group.listener.stop()
        group.master_store.shutdown()
        group.slave_store.shutdown()

def test_a_slave_whose_disk_is_full_stops_copying_and_resumes_when_space_is_back(tmp_path, monkeypatch, caplog):
    """A slave's consume-queue write fails (ENOSPC) inside the copy: the run is committed with
    its entries held, the slave copies nothing more (one STORE_FAILED line), the master goes on
    alone; once space is back the slave copies again and its queues equal the master's."""
    import errno
    import logging

    from store import message_store
    asyncio.run(_slave_disk_full(tmp_path, monkeypatch, caplog, errno, logging, message_store))


async def _slave_disk_full(tmp_path, monkeypatch, caplog, errno, logging, message_store):
    group = Group(tmp_path, in_sync=1)
    slave_store = group.slave_store
    original, full = slave_store._index_runs, {"on": False}

    def index_runs(runs, end_offset):
        if full["on"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(runs, end_offset)
    monkeypatch.setattr(slave_store, "_index_runs", index_runs)
    monkeypatch.setattr(message_store, "WRITE_RETRY_MS", 50)
    await group.start()
    try:
        async with asyncio.timeout(10):
            while not group.master.streams:
                await asyncio.sleep(0.02)
        await put(group, 0, 40)
        await group.caught_up()
        full["on"] = True
        with caplog.at_level(logging.WARNING):
            await put(group, 40, 40)
            async with asyncio.timeout(10):
                while "STORE_FAILED" not in group.slave.last_close:
                    await asyncio.sleep(0.02)
            await put(group, 80, 40)   # the master goes on without it
            await asyncio.sleep(0.5)
            assert slave_store.commit_log_max_offset < group.master_store.commit_log_max_offset
            assert "DISK_FULL" in group.slave.last_close
            closes = [r for r in caplog.records if "STORE_FAILED" in r.getMessage()]
            assert len(closes) == 1, [r.getMessage() for r in closes]
        full["on"] = False
        await group.caught_up()
        assert log_bytes(group.slave_store) == log_bytes(group.master_store)
        for queue_id in range(4):
            assert slave_store.max_offset("T", queue_id) == group.master_store.max_offset("T", queue_id) == 30
            got = slave_store.get("T", queue_id, 0, 100)
            assert [m.message_id for m in got.messages] == \
                [m.message_id for m in group.master_store.get("T", queue_id, 0, 100).messages]
    finally:
        await group.stop()


def test_a_reconnecting_slave_sends_its_handshake_before_any_ack(tmp_path, monkeypatch, caplog):
    """bench/chaos.py finding (slow-disk-slave): a connection lost while the slave's ack writer
    waited for an fdatasync left an ack wanted; the next connection's ack writer sent SlaveAck(0)
    right after the preamble, ahead of the handshake, the master closed it (BAD_HANDSHAKE) and
    the slave lost a retry interval before it could rejoin the SyncStateSet."""
    import logging
    asyncio.run(_reconnect_handshake_first(tmp_path, monkeypatch, caplog, logging))


async def _reconnect_handshake_first(tmp_path, monkeypatch, caplog, logging):
    group = Group(tmp_path, in_sync=1)
    slave_store, flushing = group.slave_store, asyncio.Event()
    flushing.set()
    original = slave_store.wait_flushed

    async def wait_flushed(offset):
        await flushing.wait()   # a slow disk: the ack writer waits here
        await original(offset)
    monkeypatch.setattr(slave_store, "wait_flushed", wait_flushed)
    await group.start()
    try:
        async with asyncio.timeout(10):
            while not group.master.streams:
                await asyncio.sleep(0.02)
        await put(group, 0, 20)
        await group.caught_up()
        flushing.clear()
        for start in (20, 30):   # the first batch's ack waits on the disk, the second wants one more
            await group.master_store.put([draft(i, queue_id=i % 4) for i in range(start, start + 10)])
            async with asyncio.timeout(10):
                while slave_store.commit_log_max_offset != group.master_store.commit_log_max_offset:
                    await asyncio.sleep(0.02)
        with caplog.at_level(logging.INFO):
            await group.listener.stop()   # the connection goes; a new listener takes the slave back
            group.listener = HaListener(group.listener._masters)
            group.listener.bind("127.0.0.1", 0)
            group.listener.start()
            flushing.set()
            await group.caught_up()
        refused = [r.getMessage() for r in caplog.records if "closed:" in r.getMessage()]
        assert not refused, refused
    finally:
        await group.stop()


def test_a_small_run_written_on_the_loop_that_fails_is_abandoned_and_copied_again(tmp_path, monkeypatch):
    """A run of at most haInlineWriteMaxBytes is written on the event loop, not by the writer
    thread; when that write fails (EIO) nothing of it shows, the connection closes, and the
    next connection copies it again: the logs end byte for byte equal."""
    asyncio.run(_inline_write_fails(tmp_path, monkeypatch))


async def _inline_write_fails(tmp_path, monkeypatch):
    import errno

    from store import replica_index

    group = Group(tmp_path, in_sync=1)
    original, failing = replica_index.StagedRun.write, {"left": 1, "sizes": []}

    def write(run):
        failing["sizes"].append(run.end - run.start)
        if failing["left"] and group.slave_store.commit_log_max_offset > 0:
            failing["left"] -= 1
            raise OSError(errno.EIO, "Input/output error")
        original(run)
    monkeypatch.setattr(replica_index.StagedRun, "write", write)
    closes = []
    closed = group.slave._closed
    monkeypatch.setattr(group.slave, "_closed", lambda reason: (closes.append(reason), closed(reason)))
    await group.start()
    try:
        await put(group, 0, 10)
        await group.caught_up()
        await put(group, 10, 10)
        await group.caught_up()
        assert failing["left"] == 0, "the injected failure was never reached"
        assert "STORE_FAILED" in closes[0] and "Input/output error" in closes[0], closes
        assert max(failing["sizes"]) <= group.slave.config.ha_inline_write_max_bytes  # the loop's path, not the thread's
        assert log_bytes(group.slave_store) == log_bytes(group.master_store)
    finally:
        await group.stop()


class SteppedClock(SystemClock):
    """The wall clock stepped by ``step_ms`` (NTP setting the time), the monotonic one not."""
    step_ms = 0

    def now_ms(self) -> int:
        return super().now_ms() + self.step_ms


def test_a_slave_whose_wall_clock_steps_back_still_notices_a_silent_master(tmp_path, monkeypatch):
    """The slave's session deadlines are monotonic: after the wall clock was set back an hour,
    a master that stops sending (its stream open, no frame: a hung process) is still found
    silent after haHousekeepingInterval (5 s here), not an hour later."""
    asyncio.run(_wall_clock_step(tmp_path, monkeypatch))


async def _wall_clock_step(tmp_path, monkeypatch):
    group = Group(tmp_path)
    clock = SteppedClock()
    group.slave.clock = clock
    await group.start()
    try:
        async with asyncio.timeout(10):
            while not group.master.streams:
                await asyncio.sleep(0.02)
        await put(group, 0, 50)
        await group.caught_up()
        clock.step_ms = -3_600_000

        async def hung(stream):
            await asyncio.Event().wait()
        monkeypatch.setattr(group.master, "_next_frame", hung)
        for stream in list(group.master.streams.values()):
            stream.wake.set()
        async with asyncio.timeout(15):
            while group.slave.last_close == "":  # the slave ends the connection (and makes a new one)
                await asyncio.sleep(0.1)
    finally:
        await group.stop()
