"""The table of consume queues, one per (topic, queue_id), loaded from ``consumequeue/``.

Rules: the event-loop thread creates, writes and deletes queues; the flush thread only
syncs, over a snapshot taken under the table's lock, so it never sees a half-built table.
Directory names are the topic and the decimal queue id, as RocketMQ's.

The table numbers the writes to its queues (``write_serial``) and keeps each queue's last
one, the most recent last (:meth:`written_since`): a reader that follows every queue's new
entries (the replication index, store.replica_index) visits the queues written since it last
looked instead of all of them.  With 8,000 queues it visited every one for every batch
shipped to a slave, 1.8 ms a batch of one record (bench/bench_replication_index.py).
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
        self.write_serial = 0  # counts writes to any queue (event-loop thread)
        self._last_writes: dict[tuple[str, int], int] = {}  # key -> serial of its last write, oldest first

    def _written(self, key: tuple[str, int]) -> None:
        self.write_serial += 1
        last = self._last_writes
        last.pop(key, None)  # to the end: the dict stays ordered by last write
        last[key] = self.write_serial

    def written_since(self, serial: int) -> list[tuple[str, int]]:
        """The queues written after write number ``serial``, most recent first; each once."""
        found = []
        for key, written in reversed(self._last_writes.items()):
            if written <= serial:
                break
            found.append(key)
        return found

    def _adopt(self, queue: ConsumeQueue) -> ConsumeQueue:
        queue.on_put = self._written
        return queue

    def load(self) -> None:
        if not self.directory.exists():
            return
        for topic_dir in sorted(self.directory.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.is_dir() and queue_dir.name.isdigit():
                    key = (topic_dir.name, int(queue_dir.name))
                    self._queues[key] = self._adopt(ConsumeQueue(key[0], key[1], queue_dir, self.segment_size,
                                                                 self._layers_of(*key)))

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            queue = self._adopt(ConsumeQueue(topic, queue_id, self.directory / topic / str(queue_id),
                                             self.segment_size, self._layers_of(topic, queue_id)))
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
            for key in doomed:
                self._last_writes.pop(key, None)
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

