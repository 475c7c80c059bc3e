"""Replication across two real containers (crosswise, standalone nameserver), with kill -9.

Checked from the outside: each replica's commit-log files are read from disk and compared
byte for byte; acknowledged messages are counted by id in the slave's store, opened after
its container stopped.
"""
from __future__ import annotations

import json
import threading
import time

import pytest

from metadata.message import Prop
from scheduler.clock import SystemClock
from store.config import StoreConfig
from store.message_store import MessageStore
from tests.support.ha_pair import HaPair, wait_until
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.integration
OK = 20000


class Load:
    """Threads sending 1 KiB messages until stopped; remembers the ids the broker acknowledged."""

    def __init__(self, endpoint: str, topic: str, threads: int = 4):
        self.endpoint, self.topic = endpoint, topic
        self.acked: set[str] = set()
        self.failed = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _run(self) -> None:
        client = RawClient(self.endpoint)
        try:
            while not self._stop.is_set():
                try:
                    reply = client.send(self.topic, b"m" * 1024, timeout=5)
                except Exception:  # the container was killed: the send is simply not acknowledged
                    self.failed += 1
                    time.sleep(0.05)
                    continue
                if reply.status.code == OK:
                    self.acked.update(entry.message_id for entry in reply.entries)
                else:
                    self.failed += 1
                    time.sleep(0.01)
        finally:
            client.close()

    def __enter__(self) -> "Load":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(15)


def stored_ids(store_dir, topic: str) -> set[str]:
    store = MessageStore(StoreConfig(store_dir), SystemClock().now_ms)
    store.start()
    try:
        ids = set()
        for queue_id in store.queues().get(topic, []):
            offset = store.min_offset(topic, queue_id)
            while offset < store.max_offset(topic, queue_id):
                result = store.get(topic, queue_id, offset, 256)
                ids.update(m.draft.properties[Prop.MESSAGE_ID] for m in result.messages)
                offset = result.next_offset
        return ids
    finally:
        store.shutdown()


@pytest.fixture
def pair_factory(tmp_path):
    pairs = []

    def make(**kwargs) -> HaPair:
        pair = HaPair(tmp_path, **kwargs)
        pairs.append(pair)
        return pair
    yield make
    for pair in pairs:
        pair.close()


def test_slave_killed_under_load_catches_up_byte_for_byte(pair_factory):
    pair = pair_factory(role="ASYNC_MASTER", flush="ASYNC_FLUSH").start()
    pair.update_topic("Load", broker="broker-a")
    wait_until(lambda: pair.slave_connected("broker-a"), 30, what="slave connected")
    slave = pair.slave_of("broker-a")
    with Load(pair.master_of("broker-a").endpoint, "Load") as load:
        time.sleep(1.5)
        slave.kill()
        time.sleep(1.5)
        slave.start()
        time.sleep(1.5)
    assert len(load.acked) > 100
    wait_until(lambda: pair.caught_up("broker-a"), 60, what="slave caught up")
    master_min, master_bytes = pair.commit_log("broker-a", "master")
    slave_min, slave_bytes = pair.commit_log("broker-a", "slave")
    assert (slave_min, len(slave_bytes)) == (master_min, len(master_bytes))
    assert slave_bytes == master_bytes
    status = pair.ha_status("broker-a")
    assert status["slaves"][0]["lagMessages"] == 0 and status["slaves"][0]["lagBytes"] == 0
    result = pair.containers[0].admin("topic-status", "--topic", "Load", "--namesrv", pair.nameserver.address, "--json")
    assert result.returncode == 0, result.stderr
    replicas = {b["brokerId"]: {q["queueId"]: (q["minOffset"], q["maxOffset"]) for q in b["queues"]}
                for b in json.loads(result.stdout)["brokers"]}
    assert set(replicas) == {0, 1}
    assert replicas[0] == replicas[1] and sum(high for _, high in replicas[0].values()) >= len(load.acked)


def test_master_killed_under_sync_master_every_acked_message_is_on_the_slave(pair_factory):
    pair = pair_factory(role="SYNC_MASTER", flush="SYNC_FLUSH").start()
    pair.update_topic("Acked", broker="broker-a")
    wait_until(lambda: pair.slave_connected("broker-a"), 30, what="slave connected")
    with Load(pair.master_of("broker-a").endpoint, "Acked", threads=8) as load:
        time.sleep(3)
        pair.master_of("broker-a").kill()
        time.sleep(0.5)
    slave = pair.slave_of("broker-a")
    assert slave.stop() == 0
    assert len(load.acked) > 50
    on_slave = stored_ids(slave.data_dir / "broker-a-1", "Acked")
    missing = load.acked - on_slave
    assert not missing, f"{len(missing)} of {len(load.acked)} acknowledged messages are not on the slave"


def test_empty_slave_starts_at_the_min_offset_of_a_trimmed_master(pair_factory):
    segment = 64 * 1024
    pair = pair_factory(role="ASYNC_MASTER", flush="ASYNC_FLUSH",
                        extra={"mappedFileSizeCommitLog": segment, "fileReservedTime": 0, "cleanResourceInterval": 300})
    master = pair.master_of("broker-a")
    master.start()
    pair.update_topic("Trim", broker="broker-a")
    client = RawClient(master.endpoint)
    try:
        for _ in range(400):
            assert client.send("Trim", b"t" * 1024).status.code == OK
    finally:
        client.close()
    wait_until(lambda: pair.commit_log("broker-a", "master")[0] > 0, 30, what="master trimmed its first segments")
    pair.slave_of("broker-a").start()
    wait_until(lambda: pair.caught_up("broker-a"), 60, what="empty slave caught up")
    master_min, master_bytes = pair.commit_log("broker-a", "master")
    slave_min, slave_bytes = pair.commit_log("broker-a", "slave")
    assert slave_min > 0 and slave_min % segment == 0, slave_min
    low = max(master_min, slave_min)
    master_end, slave_end = master_min + len(master_bytes), slave_min + len(slave_bytes)
    assert master_end == slave_end
    assert master_bytes[low - master_min:] == slave_bytes[low - slave_min:]


def fill_segments(pair: HaPair, topic: str, count: int) -> None:
    pair.update_topic(topic, broker="broker-a")
    client = RawClient(pair.master_of("broker-a").endpoint)
    try:
        for _ in range(count):
            assert client.send(topic, b"s" * 1024).status.code == OK
    finally:
        client.close()


def test_an_empty_slave_with_sync_from_last_file_starts_at_the_masters_last_file(pair_factory):
    segment = 64 * 1024
    pair = pair_factory(role="ASYNC_MASTER", flush="ASYNC_FLUSH",
                        extra={"mappedFileSizeCommitLog": segment, "syncFromLastFile": True})
    pair.master_of("broker-a").start()
    fill_segments(pair, "Last", 300)  # about five segments
    master_min, master_bytes = pair.commit_log("broker-a", "master")
    master_end = master_min + len(master_bytes)
    assert master_min == 0 and master_end > 4 * segment
    pair.slave_of("broker-a").start()
    wait_until(lambda: pair.caught_up("broker-a"), 60, what="slave caught up from the last file")
    slave_min, slave_bytes = pair.commit_log("broker-a", "slave")
    assert slave_min == master_end - master_end % segment  # the last file's start, nothing before it
    assert slave_bytes == master_bytes[slave_min:]


def test_an_async_learner_copies_everything_but_never_joins_the_sync_state_set(pair_factory):
    pair = pair_factory(role="ASYNC_MASTER", flush="ASYNC_FLUSH", extra={"asyncLearner": True})
    pair.master_of("broker-a").start()
    pair.slave_of("broker-a").start()
    fill_segments(pair, "Learn", 50)
    wait_until(lambda: pair.caught_up("broker-a"), 60, what="learner caught up")
    status = pair.ha_status("broker-a")
    slave = status["slaves"][0]
    assert slave["learner"] is True and slave["inSyncStateSet"] is False, slave
    assert status["master"]["syncStateSet"] == [0]
    master_min, master_bytes = pair.commit_log("broker-a", "master")
    assert pair.commit_log("broker-a", "slave") == (master_min, master_bytes)
