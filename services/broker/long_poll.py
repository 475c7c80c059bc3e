"""Long polling: receives with nothing to deliver wait for an append to their topics.

Rules:

* A waiter registers *before* the receive looks for messages, so an append between the look
  and the wait still wakes it; the store's append listener may run on any thread and is
  handed to the loop with ``call_soon_threadsafe``; a wait is always bounded by its caller.
* An append wakes **one** waiting receive per consumer group (and per queue, for receives that
  name one), the longest waiting, as RocketMQ's PopLongPollingService wakes one request per
  group: each woken receive looks again, about 40 us of the loop, and waking every waiter
  of the topic made a paced producer's message cost the loop ``waiting consumers x 40 us``
  (50 consumers of one group: 2.6 ms a message, bench/bench_long_poll.py).  A woken
  receive that delivered passes the wake on to the next waiter of its group (more may be
  there: a batch larger than its own, several appends); one that found nothing does not
  (nothing is left for the group).  A woken waiter that goes away without looking (its call
  cancelled) passes the wake on as it closes.
* A rise of the replicas' confirm offset wakes the topics it made readable, the same way;
  a role change, a lifted limit and a backlog elsewhere wake every waiter.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Iterable

WaiterKey = tuple[str, int]  # (consumer group, queue id; -1: any queue)


class Waiter:
    def __init__(self, notifier: "AppendNotifier", topics: tuple[str, ...], group: str, queue_id: int):
        self.event = asyncio.Event()
        self.topics = topics
        self.key: WaiterKey = (group, queue_id)
        self.looked = False  # woken and resumed: its receive looks again (and passes the wake on)
        self._notifier = notifier

    async def wait(self, timeout_ms: int) -> bool:
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
        # races the event (bpo-42130), and a long poll must stop when the server stops.
        try:
            async with asyncio.timeout(max(0, timeout_ms) / 1000):
                await self.event.wait()
            self.looked = True
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self._notifier.unregister(self)
        if self.event.is_set() and not self.looked:  # woken for others too: do not swallow it
            self._notifier.pass_on(self)


class AppendNotifier:
    def __init__(self) -> None:
        # topic -> waiter key -> its waiters, longest waiting first
        self._waiters: dict[str, dict[WaiterKey, dict[Waiter, None]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    def bind_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    def register(self, topics: Iterable[str], group: str = "", queue_id: int = -1) -> Waiter:
        waiter = Waiter(self, tuple(topics), group, queue_id)
        for topic in waiter.topics:
            self._waiters.setdefault(topic, {}).setdefault(waiter.key, {})[waiter] = None
        return waiter

    def unregister(self, waiter: Waiter) -> None:
        for topic in waiter.topics:
            keys = self._waiters.get(topic)
            if keys is None:
                continue
            waiters = keys.get(waiter.key)
            if waiters is not None:
                waiters.pop(waiter, None)
                if not waiters:
                    del keys[waiter.key]
            if not keys:
                del self._waiters[topic]

    def waiting(self, topic: str) -> int:
        """How many receives wait for ``topic`` now."""
        return sum(len(waiters) for waiters in self._waiters.get(topic, {}).values())

    def on_append(self, topic: str, queue_id: int, max_offset: int) -> None:
        if self._loop is not None and threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self.wake_topic, topic, queue_id)
        else:
            self.wake_topic(topic, queue_id)

    def wake_topic(self, topic: str, queue_id: int = -1, group: str | None = None) -> None:
        """New messages of ``topic`` for every group (or ``group``): the longest waiting receive of
        each group, and of each queue a receive names, looks again, unless one of them is woken
        already and about to.  (``queue_id`` is not used to choose: a receive of one queue also
        reads its group's retry topic, whose queue is 0.)"""
        keys = self._waiters.get(topic)
        if not keys:
            return
        for key, waiters in keys.items():
            if group is None or key[0] == group:
                _wake_first(waiters, None)

    def pass_on(self, waiter: Waiter) -> None:
        """``waiter``'s receive delivered after a wake, or went away woken: the next waiter of its
        group looks too."""
        for topic in waiter.topics:
            waiters = self._waiters.get(topic, {}).get(waiter.key)
            if waiters:
                _wake_first(waiters, waiter)

    def wake_every(self, topic: str) -> None:
        """Every receive waiting for ``topic`` looks again (a backlog on another broker)."""
        for waiters in list(self._waiters.get(topic, {}).values()):
            for waiter in list(waiters):
                waiter.event.set()

    def wake_all(self) -> None:
        """Every waiting receive looks again (a role change; the read limit lifted)."""
        for topic in list(self._waiters):
            self.wake_every(topic)

    def wake_visible(self, topics: frozenset[str] | None) -> None:
        """The replicas' confirm offset advanced over records of ``topics`` (None: of any topic)."""
        if topics is None:
            self.wake_all()
            return
        for topic in topics:
            self.wake_topic(topic)


def _wake_first(waiters: dict[Waiter, None], besides: Waiter | None) -> None:
    """Wake the longest waiting of ``waiters`` other than ``besides``, unless it is woken already."""
    for waiter in waiters:
        if waiter is besides:
            continue
        if not waiter.event.is_set():
            waiter.event.set()
        return
