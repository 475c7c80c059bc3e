import asyncio

import pytest

from metadata.message import MessageDraft
from services.broker.internal_put import put_retrying
from store.errors import FlushTimeout
from tests.support.fake_store import FakeStore


def test_internal_put_survives_transient_errors_then_gives_up():
    async def scenario():
        store = FakeStore()
        store.fail_next_puts = 2
        stored = await put_retrying(store, [MessageDraft("T", 0, b"x", 0)], retries=2, backoff_ms=1, what="commit")
        assert stored[0].queue_offset == 0
        store.fail_next_puts = 3
        with pytest.raises(FlushTimeout):
            await put_retrying(store, [MessageDraft("T", 0, b"x", 0)], retries=2, backoff_ms=1, what="commit")
    asyncio.run(scenario())
