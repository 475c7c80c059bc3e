"""The timer checkpoint of a large index is taken again only once enough changed
(scheduler.timer.checkpoint_due), and a crash in between loses and repeats nothing: the
restarted broker replays the timer and op topics from the older checkpoint's cursors.  A Broker
over the real message store in a tmp dir, time on a ManualClock; the threshold is lowered so
40 pending messages count as a large index."""
from __future__ import annotations

import asyncio
import json

import pytest

from metadata.message import MessageType
from scheduler.timer import TimerIndex
from tests.scenario.test_broker_flows import Harness, _with_topic, run
from tests.scenario.test_derived_state_after_cut import _crash_copy

COUNT = 40  # pending; a checkpoint is due after COUNT // 8 = 5 changes


@pytest.fixture
def harness(tmp_path):
    return Harness(tmp_path)


def _file_pending(harness) -> set[int]:
    document = json.loads((harness.tmp_path / "config" / "timerCheckpoint.json").read_text())
    assert isinstance(document["pending"], dict)  # the object form, which earlier versions read too
    return set(TimerIndex.from_document(document).pending)


async def _large_index(harness):
    broker = await _with_topic(harness, kind="DELAY", queues=1)
    broker.timer.amortized_from = 8
    now = harness.clock.now_ms()
    for i in range(COUNT):  # due 100 ms apart from now + 100
        await harness.send("T", f"d{i}".encode(), kind=MessageType.DELAY, due=now + 100 * (i + 1))
    broker.persist()  # forced: the index as it is
    return broker


async def _deliver(harness, count: int, broker=None) -> None:
    """Make ``count`` more messages due and wait until they are delivered (by this call's tick
    or by the broker's own timer task, which runs beside it)."""
    broker = broker or harness.broker
    left = len(broker.timer.index.pending) - count
    harness.clock.advance(100 * count)
    for _ in range(200):
        await broker.run_timer()
        if len(broker.timer.index.pending) == left:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(broker.timer.index.pending)} pending, expected {left}")


def test_a_large_index_is_written_again_only_once_an_eighth_of_it_changed(harness):
    async def scenario():
        broker = await _large_index(harness)
        assert len(_file_pending(harness)) == COUNT
        shared = broker.timer.shared_checkpoint()
        await _deliver(harness, 3)
        assert broker.timer.shared_checkpoint() is shared  # 3 changes, 37 // 8 = 4: the last one still
        await broker.persist_in_background()
        assert len(_file_pending(harness)) == COUNT  # not rewritten
        fresh = broker.timer.versioned_checkpoint()  # what a peer compares with: the index as it is
        assert len(fresh.document["pending"]) == COUNT - 3 and fresh.data_version.compare(shared.data_version) > 0
        assert broker.timer.versioned_checkpoint() is fresh  # nothing changed since: no new version
        assert broker.timer.shared_checkpoint() is fresh  # the last one taken
        await _deliver(harness, 2)
        await broker.persist_in_background()  # 2 changes since the last one taken, 35 // 8 = 4: not due
        assert len(_file_pending(harness)) == COUNT - 3  # the one taken, written
        await _deliver(harness, 2)
        await broker.persist_in_background()  # 4 changes: due
        assert len(_file_pending(harness)) == COUNT - 7
        await harness.stop()
    run(scenario())


def test_a_crash_after_changes_the_checkpoint_left_out_delivers_each_message_once(harness, tmp_path_factory):
    async def before_crash():
        await _large_index(harness)
        await _deliver(harness, 3)
        await harness.broker.persist_in_background()
        assert len(_file_pending(harness)) == COUNT  # the file still lists the 3 delivered
        copy = _crash_copy(harness, tmp_path_factory)
        copy.clock = harness.clock
        return copy

    async def after_crash(restarted):
        broker = await restarted.start()
        live = harness.broker.timer.index
        assert broker.timer.index.pending == live.pending and len(live.pending) == COUNT - 3
        assert await broker.run_timer() == 0  # none of the 3 again
        await _deliver(restarted, COUNT - 3, broker)
        received = []
        while got := await restarted.receive("G", "T"):
            received += [d.message.body for d in got]
        assert sorted(received) == sorted(f"d{i}".encode() for i in range(COUNT))  # each once
        await restarted.stop()

    restarted = run(before_crash())
    run(after_crash(restarted))
    run(harness.stop())
