"""Subscribers to replica-group changes (the push half of "role changes reach brokers").

Rules: a bounded number of subscribers (``controllerMaxWatchers``), each with a bounded
queue (``controllerWatchQueueCapacity``); a subscriber that falls behind loses its oldest
notices and keeps the newest (a broker only needs the latest view; ``getReplicaInfo``
polling stays the fallback).
"""
from __future__ import annotations

import asyncio

from ha.controller.requests import GroupView


class TooManyWatchers(Exception):
    pass


class Watchers:
    def __init__(self, max_watchers: int, queue_capacity: int) -> None:
        self._max = max_watchers
        self._capacity = queue_capacity
        self._queues: dict[asyncio.Queue, str] = {}

    def subscribe(self, broker_name: str) -> asyncio.Queue:
        if len(self._queues) >= self._max:
            raise TooManyWatchers(f"{self._max} watchers already subscribed")
        queue: asyncio.Queue = asyncio.Queue(maxsize=self._capacity)
        self._queues[queue] = broker_name
        return queue

    def unsubscribe(self, queue: asyncio.Queue) -> None:
        self._queues.pop(queue, None)

    def publish(self, broker_name: str, view: GroupView | None) -> None:
        for queue, wanted in self._queues.items():
            if wanted and wanted != broker_name:
                continue
            if queue.full():
                queue.get_nowait()
            queue.put_nowait((broker_name, view))

    def __len__(self) -> int:
        return len(self._queues)
