"""The table of consume queues, one per (topic, queue_id), loaded from ``consumequeue/``.

Rules: the event-loop thread creates, writes and deletes queues; the flush thread only
syncs, over a snapshot taken under the table's lock, so it never sees a half-built table.
Directory names are the topic and the decimal queue id, as RocketMQ's.
"""
from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Callable

from store.consume_queue import ConsumeQueue


class QueueTable:
    def __init__(self, directory: Path, segment_size: int,
                 layers_of: Callable[[str, int], tuple[tuple[int, int], ...]] | None = None):
        """``layers_of(topic, queue_id)``: a moved store's consume-queue layers
        (store.consume_queue; None: a store never moved)."""
        self.directory = directory
        self.segment_size = segment_size
        self._layers_of = layers_of or (lambda topic, queue_id: ((0, 0),))
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.Lock()
        self.generation = 0  # changes whenever a queue is created or deleted

    def load(self) -> None:
        if not self.directory.exists():
            return
        for topic_dir in sorted(self.directory.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.is_dir() and queue_dir.name.isdigit():
                    key = (topic_dir.name, int(queue_dir.name))
                    self._queues[key] = ConsumeQueue(key[0], key[1], queue_dir, self.segment_size,
                                                     self._layers_of(*key))

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            queue = ConsumeQueue(topic, queue_id, self.directory / topic / str(queue_id), self.segment_size,
                                 self._layers_of(topic, queue_id))
            with self._lock:
                self._queues[(topic, queue_id)] = queue
                self.generation += 1
        return queue

    def all(self) -> list[ConsumeQueue]:
        with self._lock:
            return list(self._queues.values())

    def topics(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for topic, queue_id in sorted(self._queues):
            found.setdefault(topic, []).append(queue_id)
        return found

    def delete_topic(self, topic: str) -> None:
        with self._lock:
            doomed = [key for key in self._queues if key[0] == topic]
            queues = [self._queues.pop(key) for key in doomed]
            self.generation += 1
        for queue in queues:
            queue.destroy()
        shutil.rmtree(self.directory / topic, ignore_errors=True)

    def sync_all(self) -> None:
        for queue in self.all():
            queue.sync()

    def close(self) -> None:
        for queue in self.all():
            queue.close()

