"""The controller's asyncio Raft driver: stopping it is bounded, whatever is in flight."""
from __future__ import annotations

import asyncio
import time

from ha.raft.types import Message, MessageKind, RaftConfig, Ready, SoftState
from scheduler.clock import SystemClock
from services.controller.raft_driver import DriverLimits, RaftDriver


class NullStorage:
    def save_ready(self, ready: Ready) -> None:
        pass


class NullMachine:
    def apply_entry(self, entry) -> None:
        pass

    def snapshot_encoder(self):
        return lambda: b""

    def restore(self, data: bytes) -> None:
        pass

    def role_changed(self, soft: SoftState, term: int) -> None:
        pass


def test_stop_is_not_swallowed_by_a_peer_message_arriving_in_the_same_loop_iteration():
    """asyncio.wait_for (3.11) returned the inbox item and dropped the cancel: stop() hung."""
    async def scenario():
        config = RaftConfig(node_id=1, peers=(1, 2, 3))
        # ticks far apart: the loop sits in its inbox wait, with no tick to wake it
        driver = RaftDriver.create(config, 7, None, NullStorage(), lambda messages: None, NullMachine(),
                                   SystemClock(), DriverLimits(tick_ms=60_000, inbox_capacity=16,
                                                               snapshot_every_entries=1_000))
        driver.start()
        await asyncio.sleep(0.05)  # let the loop reach its inbox wait
        driver.deliver(Message(MessageKind.HEARTBEAT_RESPONSE, 2, 1, 0))
        stopping = asyncio.ensure_future(driver.stop())  # cancels in the iteration the item lands
        done, _ = await asyncio.wait({stopping}, timeout=2)
        assert stopping in done, "stop() hung: the Raft loop swallowed its cancellation"
        stopping.result()

    asyncio.run(scenario())


def _driver(tick_ms: int, storage=None) -> RaftDriver:
    config = RaftConfig(node_id=1, peers=(1, 2, 3))
    return RaftDriver.create(config, 7, None, storage or NullStorage(), lambda messages: None, NullMachine(),
                             SystemClock(), DriverLimits(tick_ms=tick_ms, inbox_capacity=16,
                                                         snapshot_every_entries=1_000))


def test_a_stalled_loop_takes_one_tick_not_a_burst():
    """Time the loop could not observe is not silence of the leader: no burst of ticks."""
    async def scenario():
        driver = _driver(tick_ms=10)
        driver.start()
        await asyncio.sleep(0.05)
        ticks_before = driver.node._election_elapsed
        time.sleep(0.3)  # the whole process stalls for 30 ticks
        await asyncio.sleep(0.005)
        assert driver.node._election_elapsed - ticks_before <= 2
        assert driver.stalls >= 1
        await driver.stop()
    asyncio.run(scenario())


def test_the_loop_keeps_ticking_and_taking_messages_while_a_save_is_slow():
    class SlowStorage(NullStorage):
        def save_ready(self, ready: Ready) -> None:
            time.sleep(0.3)

    async def scenario():
        driver = _driver(tick_ms=10, storage=SlowStorage())
        driver.start()
        await asyncio.sleep(0.05)  # the first save (none needed) is done; campaign soon saves a term
        driver.deliver(Message(MessageKind.HEARTBEAT, 2, 1, 5))  # a leader in term 5: hard state to save
        await asyncio.sleep(0.1)  # inside the 300 ms save
        driver.deliver(Message(MessageKind.HEARTBEAT, 2, 1, 5))
        await asyncio.sleep(0.02)
        assert driver._inbox.empty(), "inputs waited behind the save"
        await driver.stop()
    asyncio.run(scenario())


def test_stop_does_not_swallow_the_callers_cancellation():
    async def scenario():
        driver = _driver(tick_ms=10)
        driver.start()
        await asyncio.sleep(0.02)

        async def stopper():
            await driver.stop()
            return "returned normally"
        task = asyncio.ensure_future(stopper())
        await asyncio.sleep(0)
        task.cancel()  # the caller of stop() is cancelled while stopping
        try:
            result = await task
        except asyncio.CancelledError:
            result = "cancelled"
        assert result == "cancelled"
        assert driver._task is None
    asyncio.run(scenario())


def test_first_compaction_waits_for_the_members_stagger():
    """Members snapshot at different indexes: three encodings at once starved a leader's loop."""
    async def applied_after(count: int, stagger: int) -> int:
        config = RaftConfig(node_id=1, peers=(1,))  # a group of one elects itself and commits alone
        driver = RaftDriver.create(config, 7, None, NullStorage(), lambda messages: None, NullMachine(),
                                   SystemClock(), DriverLimits(tick_ms=10, inbox_capacity=64,
                                                               snapshot_every_entries=20,
                                                               compaction_stagger_entries=stagger))
        driver.start()
        while driver.node.role.name != "LEADER":
            await asyncio.sleep(0.01)
        for _ in range(count):
            await driver.propose([b"x"])
        # the decision is taken right after the apply that resolved the last proposal: an
        # encoding is under way (it finishes in a thread, then comes back through the inbox)
        started = driver._compacting is not None or driver.node._log.snapshot_index > 0
        if started:
            async with asyncio.timeout(10):
                while driver.node._log.snapshot_index == 0:
                    await asyncio.sleep(0.01)
        snapshot_index = driver.node._log.snapshot_index
        await driver.stop()
        return started, snapshot_index

    started, index = asyncio.run(applied_after(25, stagger=0))
    assert started and index >= 20
    assert asyncio.run(applied_after(25, stagger=10)) == (False, 0)  # 26 applied (with the leader's empty entry) < 30
    started, index = asyncio.run(applied_after(32, stagger=10))
    assert started and index >= 30


def test_members_of_a_group_get_different_compaction_staggers():
    from services.controller.config import controller_config
    from services.controller.server import driver_limits

    peers = "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858"
    staggers = [driver_limits(controller_config({"controllerDLegerPeers": peers, "controllerDLegerSelfId": name},
                                                "f")).compaction_stagger_entries for name in ("n0", "n1", "n2")]
    assert staggers == [0, 3333, 6666]
