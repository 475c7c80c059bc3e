"""A slave's periodic sync adopts its master's consumer offsets with the file written by a worker
thread (services.broker.replica_metadata.follow_master), and never lets that write undo what the
broker did meanwhile.  A slave Broker over the real message store in a tmp dir."""
from __future__ import annotations

import asyncio
import threading

import pytest

from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey, loads
from metadata.data_version import DataVersion
from metadata.replica_metadata import Adopt, Keep, KeepReason, ReplicaMetadata
from services.broker import replica_metadata
from tests.scenario.test_broker_flows import Harness, run


@pytest.fixture
def harness(tmp_path):
    return Harness(tmp_path, broker_id=1, broker_role="SLAVE")


def _master(broker, counter: int, offset: int) -> ReplicaMetadata:
    held = replica_metadata.snapshot(broker)
    offsets = ConsumerOffsetTable(DataVersion(counter=counter), {OffsetKey("T", "G"): {0: offset, 1: offset}})
    return ReplicaMetadata("broker-a", 0, "MASTER", held.topics, held.groups, offsets, held.timer_checkpoint)


async def _follow_with(broker, write_thread, master: ReplicaMetadata) -> dict:
    """follow_master with its worker-thread write run through ``write_thread(real, function)``."""
    real = asyncio.to_thread
    replica_metadata.to_thread = lambda function: write_thread(real, function)
    try:
        return await replica_metadata.follow_master(broker, master)
    finally:
        replica_metadata.to_thread = real


def _file(harness) -> dict:
    """consumerOffset.json as (queue id -> offset) of T@G."""
    table = loads((harness.tmp_path / "config" / "consumerOffset.json").read_bytes())
    return {queue: offset for topic, group, queue, offset in table.rows() if (topic, group) == ("T", "G")}


def test_the_slave_adopts_the_masters_offsets_written_off_the_loop(harness):
    async def scenario():
        broker = await harness.start()
        loop_thread, writers = threading.current_thread(), []
        real = replica_metadata.snapshot_document

        def recording(path, document):
            write = real(path, document)
            return lambda: (writers.append(threading.current_thread()), write())[1]
        replica_metadata.snapshot_document = recording
        try:
            decisions = await replica_metadata.follow_master(broker, _master(broker, 5, 100))
        finally:
            replica_metadata.snapshot_document = real
        assert isinstance(decisions["offsets"], Adopt) and writers and loop_thread not in writers
        assert broker.pop.keeper.get("T", "G", 0) == 100 and _file(harness) == {0: 100, 1: 100}
        again = await replica_metadata.follow_master(broker, _master(broker, 5, 100))
        assert again["offsets"].reason is KeepReason.SAME_VERSION
        await harness.stop()
    run(scenario())


def test_offsets_that_moved_while_the_file_was_written_are_kept_and_written_next(harness):
    async def scenario():
        broker = await harness.start()
        keeper = broker.pop.keeper

        async def commit_meanwhile(real, function):   # a commit lands while the worker thread writes
            keeper.commit("T", "G", 0, 7, broker.clock.now_ms())
            return await real(function)
        decisions = await _follow_with(broker, commit_meanwhile, _master(broker, 9, 100))
        assert decisions["offsets"] == Keep(KeepReason.CHANGED_MEANWHILE, decisions["offsets"].local_version,
                                            DataVersion(counter=9))
        assert keeper.get("T", "G", 0) == 7                  # this broker's commit, not the master's 100
        assert _file(harness)[0] == 100               # the adopted file landed first ...
        await broker.persist_in_background()
        assert _file(harness)[0] == 7               # ... and the next snapshot writes this broker's own
        await harness.stop()
    run(scenario())


def test_a_snapshot_taken_while_the_file_was_written_does_not_leave_the_file_behind(harness):
    async def scenario():
        broker = await harness.start()
        keeper = broker.pop.keeper
        keeper.commit("T", "G", 0, 3, broker.clock.now_ms())  # a table of its own, not yet written

        async def snapshot_meanwhile(real, function):     # the periodic snapshot takes the old table then
            written = await real(function)
            await broker.persist_in_background()
            return written
        decisions = await _follow_with(broker, snapshot_meanwhile, _master(broker, 11, 100))
        assert isinstance(decisions["offsets"], Adopt) and keeper.get("T", "G", 0) == 100
        await broker.persist_in_background()
        assert _file(harness) == {0: 100, 1: 100}      # the adopted table, not the old one the snapshot took
        await harness.stop()
    run(scenario())
