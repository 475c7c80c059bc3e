"""An in-memory MessageStore with the real store's API, for broker tests that need no disk.

Rules: same method names and results as ``store.message_store.MessageStore``; everything is
"durable" as soon as ``put`` returns; the commit offset grows by each record's body size + 100.
"""
from __future__ import annotations

from typing import Callable, Sequence

from metadata.message import MessageDraft, StoredMessage
from store import record
from store.results import GetResult, GetStatus, RecoveryReport


class FakeStore:
    def __init__(self, config=None, now_ms: Callable[[], int] = lambda: 0):
        self.config = config
        self._now_ms = now_ms
        self._queues: dict[tuple[str, int], list[StoredMessage]] = {}
        self._by_offset: dict[int, StoredMessage] = {}
        self._next_commit = 0
        self._listeners: list[Callable[[str, int, int], None]] = []
        self.fail_next_puts = 0  # tests: make the next N puts raise a transient error
        self.derived_generation = 0  # MessageStore.invalidate_derived

    def invalidate_derived(self) -> None:
        self.derived_generation += 1

    def start(self) -> RecoveryReport:
        return RecoveryReport(0, self._next_commit, 0, 0, 0, len(self._queues), True)

    async def put(self, drafts: Sequence[MessageDraft]) -> list[StoredMessage]:
        if self.fail_next_puts:
            from store.errors import FlushTimeout
            self.fail_next_puts -= 1
            raise FlushTimeout("injected")
        stored = []
        for draft in drafts:
            queue = self._queues.setdefault((draft.topic, draft.queue_id), [])
            size = len(draft.body) + 100
            message = StoredMessage(draft, self._next_commit, size, len(queue), self._now_ms())
            self._next_commit += size
            queue.append(message)
            self._by_offset[message.commit_offset] = message
            stored.append(message)
        for message in stored:
            for listener in self._listeners:
                listener(message.topic, message.queue_id, message.queue_offset + 1)
        return stored

    async def put_rows(self, rows) -> tuple[int, list[tuple[int, int, int]]]:
        """MessageStore.put_rows: rows (store.put_rows.Row) in, (now, where each went) out."""
        drafts = [record.decode(record.seal(tail, queue_id, 0, 0, 0, born_ms), 0, 0, 1 << 30).draft
                  for topic, queue_id, born_ms, tail, _ in rows]
        stored = await self.put(drafts)
        return self._now_ms(), [(s.commit_offset, s.size, s.queue_offset) for s in stored]

    def get(self, topic: str, queue_id: int, offset: int, max_count: int, max_bytes: int = 4 << 20,
            tag_codes: frozenset[int] | None = None) -> GetResult:
        queue = self._queues.get((topic, queue_id), [])
        if not queue:
            return GetResult([], 0, 0, 0, GetStatus.NO_MESSAGE_IN_QUEUE)
        if offset < 0:
            return GetResult([], 0, 0, len(queue), GetStatus.OFFSET_TOO_SMALL)
        if offset >= len(queue):
            return GetResult([], len(queue), 0, len(queue), GetStatus.OFFSET_OVERFLOW)
        from metadata.message import tag_hash
        found, position = [], offset
        while position < len(queue) and position - offset < max_count:
            message = queue[position]
            position += 1
            if tag_codes is None or tag_hash(message.tag) in tag_codes:
                found.append(message)
        status = GetStatus.FOUND if found else GetStatus.NO_MATCHED
        return GetResult(found, position, 0, len(queue), status)

    def read_at(self, commit_offset: int) -> StoredMessage | None:
        return self._by_offset.get(commit_offset)

    def min_offset(self, topic: str, queue_id: int) -> int:
        return 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        return len(self._queues.get((topic, queue_id), []))

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        queue = self._queues.get((topic, queue_id), [])
        for message in queue:
            if message.store_timestamp_ms >= timestamp_ms:
                return message.queue_offset
        return len(queue)

    def earliest_store_time(self, topic: str, queue_id: int) -> int | None:
        queue = self._queues.get((topic, queue_id), [])
        return queue[0].store_timestamp_ms if queue else None

    def queues(self) -> dict[str, list[int]]:
        result: dict[str, list[int]] = {}
        for topic, queue_id in self._queues:
            result.setdefault(topic, []).append(queue_id)
        return {topic: sorted(ids) for topic, ids in result.items()}

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self._queues if k[0] == topic]:
            del self._queues[key]

    def clean_expired(self) -> int:
        return 0

    def add_append_listener(self, fn: Callable[[str, int, int], None]) -> None:
        self._listeners.append(fn)

    def disk_usage_bytes(self) -> int:
        return self._next_commit

    def shutdown(self) -> None:
        pass
