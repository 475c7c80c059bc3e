"""Stopping owned tasks never swallows the caller's own cancellation (issue 3)."""
from __future__ import annotations

import asyncio

import pytest

from services.controller.shutdown import cancel_and_wait
from services.controller.transport import PeerSender


async def _cancel_while_running(coroutine) -> str:
    task = asyncio.ensure_future(coroutine)
    await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return "cancelled"
    return "returned"


def test_cancel_and_wait_ends_the_tasks_and_reraises_the_callers_cancel():
    async def scenario():
        owned = asyncio.ensure_future(asyncio.sleep(60))
        assert await _cancel_while_running(cancel_and_wait([owned])) == "cancelled"
        assert owned.cancelled()
        other = asyncio.ensure_future(asyncio.sleep(60))
        await cancel_and_wait([other, None])  # not cancelled itself: returns normally
        assert other.cancelled()
    asyncio.run(scenario())


def test_peer_sender_close_is_cancellable():
    async def scenario():
        sender = PeerSender("127.0.0.1:9", "group", 4)
        assert await _cancel_while_running(sender.close()) == "cancelled"
        assert sender._task.done()
    asyncio.run(scenario())


@pytest.mark.parametrize("error", [RuntimeError("boom")])
def test_a_task_that_failed_is_logged_not_raised(error, caplog):
    async def scenario():
        async def fails():
            raise error
        task = asyncio.ensure_future(fails())
        await asyncio.sleep(0)
        await cancel_and_wait([task])
    asyncio.run(scenario())
    assert "ended with an error" in caplog.text
