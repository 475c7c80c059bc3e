"""A client's retry of a send: stored once, answered alike, under either flush type (a Broker
over the real message store, as tests/scenario/test_broker_flows.py)."""
from __future__ import annotations

import asyncio

import pytest

from metadata.message import MessageDraft, MessageType, Prop
from services.broker.api import SendItem
from store.config import FlushDiskType
from tests.scenario.test_broker_flows import Harness, _with_topic, run


@pytest.mark.parametrize("flush", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
def test_a_single_send_retried_while_its_put_is_in_flight_is_stored_once(tmp_path, flush):
    """What the official clients send, one message a request: a retry that arrives while the
    first put waits for its fdatasync awaits that put and gets its answer (under ASYNC_FLUSH
    the put awaits nothing, so the retry finds it answered)."""
    harness = Harness(tmp_path, flush)

    async def scenario():
        broker = await _with_topic(harness, queues=1)

        def item(message_id):
            return SendItem.of(MessageDraft("T", -1, message_id.encode(), 0, properties={Prop.MESSAGE_ID: message_id}),
                               MessageType.NORMAL)
        first, retry, other = await asyncio.gather(broker.send([item("S1")]), broker.send([item("S1")]),
                                                   broker.send([item("S2")]))
        assert retry == first and other[0].queue_offset != first[0].queue_offset
        again = await broker.send([item("S1")])   # answered from memory once the put is done
        assert again == first
        got = await harness.receive("G", "T")
        assert sorted(d.message.body for d in got) == [b"S1", b"S2"]
        await harness.stop()
    run(scenario())
