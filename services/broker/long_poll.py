"""Long polling: receives with nothing to deliver wait for an append to their topics.

Rules: a waiter registers *before* the receive looks for messages, so an append between the
look and the wait still wakes it; the store's append listener may run on any thread and is
handed to the loop with ``call_soon_threadsafe``; a wait is always bounded by its caller.  A
rise of the replicas' confirm offset wakes the receives of the topics it made readable, not
every receive waiting in the broker.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Iterable


class Waiter:
    def __init__(self, notifier: "AppendNotifier", topics: tuple[str, ...]):
        self.event = asyncio.Event()
        self.topics = topics
        self._notifier = notifier

    async def wait(self, timeout_ms: int) -> bool:
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
        # races the event (bpo-42130), and a long poll must stop when the server stops.
        try:
            async with asyncio.timeout(max(0, timeout_ms) / 1000):
                await self.event.wait()
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self._notifier.unregister(self)


class AppendNotifier:
    def __init__(self) -> None:
        self._waiters: dict[str, set[Waiter]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    def bind_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    def register(self, topics: Iterable[str]) -> Waiter:
        waiter = Waiter(self, tuple(topics))
        for topic in waiter.topics:
            self._waiters.setdefault(topic, set()).add(waiter)
        return waiter

    def unregister(self, waiter: Waiter) -> None:
        for topic in waiter.topics:
            waiters = self._waiters.get(topic)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[topic]

    def on_append(self, topic: str, queue_id: int, max_offset: int) -> None:
        if self._loop is not None and threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self.wake_topic, topic)
        else:
            self.wake_topic(topic)

    def wake_all(self) -> None:
        """More may be readable everywhere (a role change; the read limit lifted)."""
        for waiters in list(self._waiters.values()):
            for waiter in list(waiters):
                waiter.event.set()

    def wake_visible(self, topics: frozenset[str] | None) -> None:
        """The replicas' confirm offset advanced over records of ``topics`` (None: of any topic):
        only their receives look again (store.notifications)."""
        if topics is None:
            self.wake_all()
            return
        for topic in topics:
            self.wake_topic(topic)

    def wake_topic(self, topic: str) -> None:
        """Receives waiting for ``topic`` look again (an append, a FIFO batch acked, a backlog elsewhere)."""
        for waiter in list(self._waiters.get(topic, ())):
            waiter.event.set()
