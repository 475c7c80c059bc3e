"""The controller's asyncio Raft driver: stopping it is bounded, whatever is in flight."""
from __future__ import annotations

import asyncio

from ha.raft.types import Message, MessageKind, RaftConfig, Ready, SoftState
from scheduler.clock import SystemClock
from services.controller.raft_driver import DriverLimits, RaftDriver


class NullStorage:
    def save_ready(self, ready: Ready) -> None:
        pass


class NullMachine:
    def apply_entry(self, entry) -> None:
        pass

    def snapshot(self) -> bytes:
        return b""

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
