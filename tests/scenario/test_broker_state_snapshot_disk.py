"""The periodic state snapshot on a disk that refuses writes (ENOSPC): one warning, the task
goes on, the files on disk stay whole, and the next snapshot after the disk is back is written."""
from __future__ import annotations

import asyncio
import errno
import json
import logging

from services.broker import broker as broker_module
from tests.scenario.test_broker_flows import Harness, _with_topic


def test_a_full_disk_costs_the_snapshot_a_warning_not_a_traceback(tmp_path, monkeypatch, caplog):
    async def scenario():
        harness = Harness(tmp_path)
        broker = await _with_topic(harness, queues=1)
        for _ in range(2):
            await harness.send("T")
        assert len(await harness.receive("G", "T", batch=1)) == 1   # the group is made
        await broker.persist_in_background()
        written = {path.name: path.read_bytes() for path in tmp_path.rglob("*.json")}
        assert written, "a snapshot writes its state files"
        real = broker_module.snapshot_document

        def full_disk(path, document):
            def write():
                raise OSError(errno.ENOSPC, "No space left on device")
            return write

        assert len(await harness.receive("G", "T", batch=1)) == 1   # the pop state changed: the next snapshot writes it
        monkeypatch.setattr(broker_module, "snapshot_document", full_disk)
        with caplog.at_level(logging.WARNING, logger="services.broker.broker"):
            await broker.persist_in_background()   # raised, and the periodic task logged a traceback
        assert any("state snapshot not written" in r.getMessage() and "No space left" in r.getMessage()
                   for r in caplog.records)
        assert {path.name: path.read_bytes() for path in tmp_path.rglob("*.json")} == written
        for content in written.values():
            json.loads(content)
        monkeypatch.setattr(broker_module, "snapshot_document", real)
        await broker.persist_in_background()
        await harness.stop()

    asyncio.run(scenario())
