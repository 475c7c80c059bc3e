"""The metrics refresh's consumer lag (services.broker.consumer_lag) is what each group's
consumer_progress adds up to, for the groups asked about only.  A Broker over the real store."""
from __future__ import annotations

import pytest

from metadata.topic_config import TopicConfig
from services.broker.consumer_lag import lags_by_group_topic
from tests.scenario.test_broker_flows import Harness, _with_topic, run


@pytest.fixture
def harness(tmp_path):
    return Harness(tmp_path)


def test_lags_are_the_sums_of_each_groups_progress(harness):
    async def scenario():
        broker = await _with_topic(harness, "T", queues=4)
        await broker.upsert_topic(TopicConfig("U", 2, 2))
        for number in range(10):
            await harness.send("T", f"t{number}".encode())
        for number in range(3):
            await harness.send("U", f"u{number}".encode())
        got = await harness.receive("G1", "T", batch=5)  # in flight: pop state, nothing committed yet
        for delivery in got[:2]:
            await broker.ack("G1", "T", delivery.message.message_id, delivery.receipt_handle)
        for delivery in await harness.receive("G2", "U"):  # all acked: no lag
            await broker.ack("G2", "U", delivery.message.message_id, delivery.receipt_handle)
        await harness.receive("G3", "T")  # not asked about
        lags = {(g, t): v for g, t, v in lags_by_group_topic(broker, ["G1", "G2", "missing"])}
        expected = {}
        for group in ("G1", "G2"):
            for row in broker.consumer_progress(group):
                expected[(group, row.topic)] = expected.get((group, row.topic), 0) + row.lag
        assert lags == expected
        assert lags[("G2", "U")] == 0 and 8 <= lags[("G1", "T")] <= 10 and not any(g == "G3" for g, _ in lags)
        await harness.stop()
    run(scenario())
