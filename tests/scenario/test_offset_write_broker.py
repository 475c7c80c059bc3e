"""The admin offset write on a Broker over the real store (ManualClock): compare-and-set on the
offset table's DataVersion, skips in the pop state, files written before the answer, restart."""
from __future__ import annotations

import asyncio

import pytest

from metadata.consumer_offsets import loads
from metadata.data_version import DataVersion
from metadata.offset_write import Accepted, Moved, QueueOffset, Refused, WriteRefusal
from metadata.status import RequestRejected
from metadata.topic_config import TopicConfig
from scheduler.pop.records import REVIVE_TOPIC, SkipRecord, decode_records
from services.broker.config import BrokerRole
from tests.scenario.test_broker_flows import Harness


def offsets_file(harness: Harness):
    return loads((harness.tmp_path / "config" / "consumerOffset.json").read_text())


async def loaded(harness: Harness, sent: int = 10):
    """Topic T (1 queue), ``sent`` messages, group G: 3 acked, 1 more delivered and in flight."""
    broker = await harness.start()
    await broker.upsert_topic(TopicConfig("T", 1, 1))
    for _ in range(sent):
        await harness.send("T")
    for delivery in await harness.receive("G", "T", batch=3):
        await broker.ack("G", "T", delivery.message.message_id, delivery.receipt_handle)
    (in_flight,) = await harness.receive("G", "T", batch=1)
    return broker, in_flight


def test_write_moves_the_consumer_forward_durably_and_receives_continue_there(tmp_path):
    harness = Harness(tmp_path)

    async def scenario():
        broker, in_flight = await loaded(harness)
        planned = broker.consumer_offset_table()
        assert planned.get("T", "G", 0) == 3
        harness.clock.advance(5)
        decision = await broker.write_consumer_offsets(planned.data_version, [QueueOffset("T", "G", 0, 7),
                                                                              QueueOffset("T", "G2", 0, 2)])
        assert isinstance(decision, Accepted)
        assert decision.data_version == planned.data_version.next_version(harness.clock.now_ms())
        assert [(o.group, o.offset) for o in decision.offsets] == [("G", 7), ("G2", 2)]
        on_disk = offsets_file(harness)  # written before the answer, nothing flushed since
        assert on_disk.data_version == decision.data_version and on_disk.get("T", "G", 0) == 7
        assert on_disk.get("T", "G2", 0) == 2
        assert broker.consumer_offset_table() == on_disk
        # the message in flight below 7 counts as consumed: its ack is fine, nothing redelivers it
        await broker.ack("G", "T", in_flight.message.message_id, in_flight.receipt_handle)
        assert [d.message.queue_offset for d in await harness.receive("G", "T")] == [7, 8, 9]
        skips = [r for m in broker.store.get(REVIVE_TOPIC, 0, 0, 100).messages for r in decode_records(m.body)
                 if isinstance(r, SkipRecord)]
        assert [(s.key.group, s.offset) for s in skips] == [("G", 7), ("G2", 2)]  # for the slaves' pop state

        await harness.restart()
        assert broker is not harness.broker
        assert harness.broker.consumer_offset_table().get("T", "G", 0) == 7
        assert harness.broker.consumer_offset_table().get("T", "G2", 0) == 2
        assert [d.message.queue_offset for d in await harness.receive("G2", "T", batch=1)] == [2]
        await harness.stop()
    asyncio.run(scenario())


def test_a_commit_after_the_plan_makes_the_write_moved_and_nothing_is_written(tmp_path):
    harness = Harness(tmp_path)

    async def scenario():
        broker, in_flight = await loaded(harness)
        planned = broker.consumer_offset_table()
        broker.persist()
        before = (harness.tmp_path / "config" / "consumerOffset.json").read_text()
        await broker.ack("G", "T", in_flight.message.message_id, in_flight.receipt_handle)  # moves after the plan
        decision = await broker.write_consumer_offsets(planned.data_version, [QueueOffset("T", "G", 0, 7)])
        assert isinstance(decision, Moved) and decision.expected == planned.data_version
        assert decision.current == broker.consumer_offset_table().data_version != planned.data_version
        assert "MOVED_SINCE_PLAN" in decision.describe()
        assert (harness.tmp_path / "config" / "consumerOffset.json").read_text() == before
        assert broker.consumer_offset_table().get("T", "G", 0) == 4
        await harness.stop()
    asyncio.run(scenario())


@pytest.mark.parametrize("item, reason", [
    (QueueOffset("nope", "G", 0, 1), WriteRefusal.TOPIC_NOT_FOUND),
    (QueueOffset("T", "G", 1, 1), WriteRefusal.QUEUE_NOT_FOUND),
    (QueueOffset("T", "G3", 0, 11), WriteRefusal.OFFSET_BEYOND_MAX),
    (QueueOffset("T", "G", 0, 2), WriteRefusal.OFFSET_BEHIND_COMMITTED),
])
def test_refused_queues_write_nothing(tmp_path, item, reason):
    harness = Harness(tmp_path)

    async def scenario():
        broker, _ = await loaded(harness)
        planned = broker.consumer_offset_table()
        decision = await broker.write_consumer_offsets(planned.data_version, [QueueOffset("T", "G4", 0, 5), item])
        assert isinstance(decision, Refused) and decision.reason is reason, decision
        assert broker.consumer_offset_table() == planned
        await harness.stop()
    asyncio.run(scenario())


def test_the_max_offset_itself_is_accepted_and_a_slave_refuses(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "s").mkdir()
    master, slave = Harness(tmp_path / "m"), Harness(tmp_path / "s", broker_id=1, broker_role=BrokerRole.SLAVE)

    async def scenario():
        broker, _ = await loaded(master)
        decision = await broker.write_consumer_offsets(broker.consumer_offset_table().data_version, [QueueOffset("T", "G", 0, 10)])
        assert isinstance(decision, Accepted) and decision.offsets[0].offset == 10
        assert await master.receive("G", "T") == []
        replica = await slave.start()
        with pytest.raises(RequestRejected, match="is a slave"):
            await replica.write_consumer_offsets(DataVersion(), [QueueOffset("T", "G", 0, 1)])
        await master.stop()
        await slave.stop()
    asyncio.run(scenario())


def test_get_consumer_offsets_of_a_real_broker_covers_every_commit(tmp_path):
    async def scenario():
        harness = Harness(tmp_path)
        broker = await harness.start()
        await broker.upsert_topic(TopicConfig("T", 1, 1))
        await harness.send("T")
        before = broker.consumer_offset_table()
        (delivery,) = await harness.receive("G", "T")
        await broker.ack("G", "T", delivery.message.message_id, delivery.receipt_handle)
        after = broker.consumer_offset_table()  # one commit, far below the version step of 500
        assert after.get("T", "G", 0) == 1 and after.data_version.compare(before.data_version) > 0
        assert broker.consumer_offset_table() == after  # no commit since: same version
        await harness.stop()
    asyncio.run(scenario())
