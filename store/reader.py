"""Reading the store: get by queue offset, read by commit offset, offsets and timestamps.

Rules: reads go through consume queues bounded by the queue's [min, max), then check every
record's CRC and position before serving it; a record that fails is skipped and logged, never
served.  Tag filtering compares consume-queue tag codes and skips without reading the log.
A get examines at most ``maxGetScanEntries`` entries and returns at least one message if one
is found even when it exceeds ``max_bytes``.  With replication, the read limit (the confirm
offset, set by the replication driver with ``set_read_limit``; None: no limit) caps what
consumers see: no record ending beyond it is served from a user topic.  Mixed into
MessageStore, which owns the state (``_log``, ``_queues``, ``config``, ``_read_limit``).
"""
from __future__ import annotations

import logging

from metadata.message import StoredMessage
from metadata.names import SYSTEM_TOPIC_PREFIX
from store.consume_queue import ConsumeQueue
from store.cq_entry import CqEntry, first_index
from store.record import STORE_TS_POSITION
from store.results import GetResult, GetStatus

log = logging.getLogger(__name__)


class Reader:
    def _check_open(self) -> None:  # overridden by MessageStore
        raise NotImplementedError

    def get(self, topic: str, queue_id: int, offset: int, max_count: int, max_bytes: int = 4 << 20,
            tag_codes: frozenset[int] | None = None) -> GetResult:
        self._check_open()
        queue = self._queues.get(topic, queue_id)
        if queue is None or queue.max_offset == 0:
            return GetResult([], 0, 0, 0, GetStatus.NO_MESSAGE_IN_QUEUE)
        low, high = queue.min_offset, queue.max_offset
        if offset < low:
            return GetResult([], low, low, high, GetStatus.OFFSET_TOO_SMALL)
        if offset >= high:
            return GetResult([], high, low, high, GetStatus.OFFSET_OVERFLOW)
        messages, next_offset = self._collect(queue, offset, max(1, min(max_count, self.config.max_get_count)),
                                              max_bytes, tag_codes)
        status = GetStatus.FOUND if messages else GetStatus.NO_MATCHED
        return GetResult(messages, next_offset, low, high, status)

    def _collect(self, queue: ConsumeQueue, offset: int, max_count: int, max_bytes: int,
                 tag_codes: frozenset[int] | None) -> tuple[list[StoredMessage], int]:
        messages: list[StoredMessage] = []
        total, scanned, cursor = 0, 0, offset
        budget = self.config.max_get_scan_entries
        # consumers see only what the replicas confirmed; the broker's own logs are read in full
        limit = None if queue.topic.startswith(SYSTEM_TOPIC_PREFIX) else self._read_limit
        while scanned < budget and len(messages) < max_count:
            # unfiltered, an entry is at most one message: decode no more entries than are wanted
            want = 1024 if tag_codes is not None else max(max_count - len(messages), 16)
            batch = queue.entries(cursor, min(budget - scanned, want, 1024))
            if not batch:
                break
            # first choose what to serve from the entries alone, then read it in one go
            # (store.commit_log.read_messages: one pread for records close together)
            chosen, count, size_total, end, stop = [], len(messages), total, cursor, False
            for entry in batch:
                if count >= max_count or (count and size_total + entry.size > max_bytes) or (
                        limit is not None and not entry.is_hole and entry.end > limit):
                    stop = True  # full, or not confirmed by the replicas yet
                    break
                end += 1
                if entry.is_hole or (tag_codes is not None and entry.tag_code not in tag_codes):
                    continue
                chosen.append(entry)
                count, size_total = count + 1, size_total + entry.size
            found = self._log.read_messages([(entry.commit_offset, entry.size) for entry in chosen])
            if None not in found:
                messages += found
                total, scanned, cursor = size_total, scanned + end - cursor, end
                if stop:
                    return messages, cursor
                continue
            # a record is missing or corrupt: take this batch entry by entry, skipping it
            for entry in batch:
                if len(messages) >= max_count or (messages and total + entry.size > max_bytes):
                    return messages, cursor
                if limit is not None and not entry.is_hole and entry.end > limit:
                    return messages, cursor  # not confirmed by the replicas yet
                cursor, scanned = cursor + 1, scanned + 1
                if entry.is_hole or (tag_codes is not None and entry.tag_code not in tag_codes):
                    continue
                message = self._log.read_message(entry.commit_offset, entry.size)
                if message is None:
                    log.error("%s-%d offset %d: commit-log record at %d is missing or corrupt; skipped",
                              queue.topic, queue.queue_id, cursor - 1, entry.commit_offset)
                    continue
                messages.append(message)
                total += entry.size
        return messages, cursor

    def read_at(self, commit_offset: int) -> StoredMessage | None:
        self._check_open()
        return self._log.read_message(commit_offset)

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get(topic, queue_id)
        return queue.min_offset if queue else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get(topic, queue_id)
        return queue.max_offset if queue else 0

    def queues(self) -> dict[str, list[int]]:
        return self._queues.topics()

    def _store_time(self, entry: CqEntry | None) -> int | None:
        if entry is None or entry.is_hole:
            return None
        data = self._log.read(entry.commit_offset + STORE_TS_POSITION, 8)
        return int.from_bytes(data, "big", signed=True) if len(data) == 8 else None

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first offset whose store time is >= ``timestamp_ms`` (max offset if none)."""
        queue = self._queues.get(topic, queue_id)
        if queue is None:
            return 0
        low = queue.min_offset

        def at_or_after(index: int) -> bool:
            stored = self._store_time(queue.entry(low + index))
            return stored is not None and stored >= timestamp_ms

        return low + first_index(queue.max_offset - low, at_or_after)

    def messages_from(self, commit_offset: int) -> int:
        """How many consume-queue entries (messages of every topic, system topics included) point
        at or beyond ``commit_offset``: a replica acknowledged up to there lacks that many.  A
        queue whose last entry lies below ``commit_offset`` has none (a queue's entries follow
        the log), so only the others are searched, one binary search each; 0 at once past the end.

        Why the look at the last entry: a metrics scrape counted this for every queue, and
        searched each: 61.5 ms of the event loop per scrape with 8,000 queues and a slave one
        message behind (bench/bench_replication_index.py)."""
        self._check_open()
        if commit_offset >= self._log.write_offset:
            return 0
        total = 0
        for queue in self._queues.all():
            low, high = queue.min_offset, queue.max_offset
            if high <= low:
                continue
            last = queue.last_entry()
            if last is not None and not last.is_hole and last.commit_offset < commit_offset:
                continue

            def at_or_beyond(index: int, queue=queue, low=low) -> bool:
                entry = queue.entry(low + index)
                return entry is not None and not entry.is_hole and entry.commit_offset >= commit_offset

            total += high - low - first_index(high - low, at_or_beyond)
        return total

    def earliest_store_time(self, topic: str, queue_id: int) -> int | None:
        queue = self._queues.get(topic, queue_id)
        if queue is None or queue.min_offset >= queue.max_offset:
            return None
        return self._store_time(queue.entry(queue.min_offset))
