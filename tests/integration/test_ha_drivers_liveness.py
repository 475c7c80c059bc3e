"""Issue 24, defect 6, on the replication drivers (one process, real connection and stores):
a replica's liveness does not depend on its event loop or its disk being punctual.

* A slave whose fdatasync takes longer than ``haHousekeepingInterval`` still acks what is
  durable every heartbeat: the master does not close it as SLAVE_SILENT.
* An event loop that stalls past ``haHousekeepingInterval`` (both drivers share it here)
  wakes to late ticks; neither side blames the other for its own pause.
"""
from __future__ import annotations

import asyncio
import logging
import time

import pytest

from tests.integration.test_ha_drivers import Group, draft, put

pytestmark = pytest.mark.integration


async def connected(group: Group) -> None:
    async with asyncio.timeout(10):
        while not group.master.streams:
            await asyncio.sleep(0.02)


def silent_closes(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "SILENT" in r.getMessage()]


def test_a_slave_with_a_slow_disk_is_not_silent(tmp_path, monkeypatch, caplog):
    asyncio.run(_slow_disk(tmp_path, monkeypatch, caplog))


async def _slow_disk(tmp_path, monkeypatch, caplog):
    group = Group(tmp_path, in_sync=1)                    # housekeeping 5000 ms, heartbeat 500 ms
    slave_store, disk_free = group.slave_store, asyncio.Event()
    disk_free.set()
    original = slave_store.wait_flushed

    async def wait_flushed(offset):
        await disk_free.wait()                            # an fdatasync that takes its time
        await original(offset)
    monkeypatch.setattr(slave_store, "wait_flushed", wait_flushed)
    await group.start()
    try:
        await connected(group)
        await put(group, 0, 20)
        await group.caught_up()
        token = next(iter(group.master.streams))
        with caplog.at_level(logging.INFO):
            disk_free.clear()
            await group.master_store.put([draft(i) for i in range(20, 30)])
            await asyncio.sleep(6.5)                      # longer than haHousekeepingInterval
            assert token in group.master.streams and not silent_closes(caplog), silent_closes(caplog)
            disk_free.set()
            await group.caught_up()
        assert group.master.status()["syncStateSet"] == [0, 1]
    finally:
        await group.stop()


def test_a_stalled_event_loop_blames_nobody_for_its_own_pause(tmp_path, caplog):
    asyncio.run(_stalled_loop(tmp_path, caplog))


async def _stalled_loop(tmp_path, caplog):
    group = Group(tmp_path, in_sync=1)
    await group.start()
    try:
        await connected(group)
        await put(group, 0, 20)
        await group.caught_up()
        token = next(iter(group.master.streams))
        with caplog.at_level(logging.INFO):
            time.sleep(6)                                 # the loop stalls past haHousekeepingInterval (5 s)
            await asyncio.sleep(2)                        # late ticks, then the acks waiting in the buffers
            assert token in group.master.streams and not silent_closes(caplog), silent_closes(caplog)
            await put(group, 20, 10)
            await group.caught_up()
        assert group.master.status()["syncStateSet"] == [0, 1]
    finally:
        await group.stop()
