"""popState.json is written by the periodic snapshot only when the pop state changed since the file
was written (PopTable.signature), and again after a snapshot whose write failed.  A Broker over the
real message store in a tmp dir, time on a ManualClock."""
from __future__ import annotations

import json

import pytest

import services.broker.broker as broker_module
from metadata import fastjson
from services.broker.config_files import document_text
from tests.scenario.test_broker_flows import Harness, _with_topic, run


@pytest.fixture
def harness(tmp_path):
    return Harness(tmp_path)


def _state(harness) -> dict:
    return json.loads((harness.tmp_path / "config" / "popState.json").read_text())


def test_an_unchanged_pop_state_is_not_written_again_and_a_failed_write_is_retried(harness, monkeypatch):
    async def scenario():
        broker = await _with_topic(harness, queues=1)
        for number in range(3):
            await harness.send("T", b"m%d" % number)
        got = await harness.receive("G", "T")
        await broker.persist_in_background()
        assert len(_state(harness)["queues"][0]["i"]) == 3   # the file holds three in flight

        writes = []
        record = lambda path, document: writes.append((path.name, fastjson.loads(document_text(path, document))))  # noqa: E731
        broker.pop.persist(record, periodic=True)
        assert writes == []                                   # nothing changed: nothing written
        await broker.ack("G", "T", got[0].message.message_id, got[0].receipt_handle)
        broker.pop.persist(record, periodic=True)
        assert [(name, len(doc["queues"][0]["i"])) for name, doc in writes if name == "popState.json"] == [("popState.json", 2)]
        broker.pop.persist(record)                            # forced (a stop, an acting slave): written whatever
        assert sum(name == "popState.json" for name, _ in writes) == 2

        def failing(path, document):
            def write():
                raise OSError(28, "No space left on device")
            return write
        await broker.ack("G", "T", got[1].message.message_id, got[1].receipt_handle)
        monkeypatch.setattr(broker_module, "snapshot_document", failing)
        await broker.persist_in_background()                  # logged, the file stays older
        assert len(_state(harness)["queues"][0]["i"]) == 3
        monkeypatch.undo()
        await broker.persist_in_background()                  # nothing changed since, but the file is behind
        assert len(_state(harness)["queues"][0]["i"]) == 1
        await harness.stop()
    run(scenario())
