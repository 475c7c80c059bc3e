"""The transaction checkpoint is written again only when its table changed, and keeps its
DataVersion until then (TransactionTable.signature).  A Broker over the real message store
in a tmp dir, time on a ManualClock."""
from __future__ import annotations

import json

import pytest

from metadata.message import MessageType
from tests.scenario.test_broker_flows import Harness, _with_topic, run


@pytest.fixture
def harness(tmp_path):
    return Harness(tmp_path)


def test_an_unchanged_transaction_table_is_not_written_again_and_keeps_its_version(harness):
    async def scenario():
        broker = await _with_topic(harness, kind="TRANSACTION", queues=1)
        half = await harness.send("T", b"t", kind=MessageType.TRANSACTION)
        await broker.persist_in_background()  # the file holds the half
        assert json.loads((harness.tmp_path / "config" / "transactionCheckpoint.json").read_text())["pending"]
        version = broker.transactions.versioned_checkpoint().data_version
        writes = []
        record = lambda path, document: writes.append(document)  # noqa: E731 - what the snapshot would write
        broker.transactions.persist(record, periodic=True)
        assert writes == [] and broker.transactions.versioned_checkpoint().data_version == version
        await broker.end_transaction("T", half.message_id, half.transaction_id, True, False)
        broker.transactions.persist(record, periodic=True)
        assert [w["pending"] for w in writes] == [[]]
        assert broker.transactions.versioned_checkpoint().data_version.compare(version) > 0
        broker.transactions.persist(record)  # forced (a stop, a new state version): written whatever
        assert len(writes) == 2
        await harness.stop()
    run(scenario())
