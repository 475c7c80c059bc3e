"""Replication's index: the master ships its consume-queue entries with each batch; the slave
checks them against the copied bytes and writes them as they are.

Rules:

* Master (:class:`IndexCursor`): for a batch ``[start, end)`` of the commit log, every
  queue's entries whose record starts in it, in queue-offset order, exactly as the master's
  consume queues hold them (holes included).  Entries of records still awaiting their
  fdatasync come from the store's pending list: under SYNC_FLUSH they reach the queues only
  after the flush, and a slave copies before it.  A cursor follows one slave stream; per
  queue it keeps the queue offset of the first entry not yet shipped and, once read, that
  entry's commit offset, so a batch costs reads only for the queues it touches.  A batch
  that does not start where the last one ended (a new stream, a truncation) positions
  every queue again by binary search.
* Slave (:func:`check_indexed_run`): a run is accepted whole or not at all; the result is a
  reason (a string) for the first thing wrong.  Every entry must name a message record of
  the run whose header states the same size, commit offset, queue id and queue offset, and
  whose topic is the slice's, and every record must be named by its queue's entry, except a
  BLANK running to its segment's end or a message no queue indexes (its topic was deleted
  on the master), which is checked in full (store.record.check).  A queue comes at most
  once per batch.  The batch CRC (checked by the slave session) proves the bytes
  arrived as the master read them; this check proves the index describes them, so the
  slave's queues equal the master's with a few struct reads per record, not a parse.
* A slice of a queue the slave already has must start at that queue's next offset.
"""
from __future__ import annotations

import struct
from typing import Iterable

from ha.replication.messages import QueueSlice
from store.config import CQ_ENTRY_SIZE
from store.consume_queue import ConsumeQueue
from store.cq_entry import ENTRY, first_index
from store.queue_table import QueueTable
from store.record import BLANK_SIZE, HEADER_SIZE, MESSAGE_MAGIC, Invalid, check

# size, magic, (crc), queue id, (flags), queue offset, commit offset, (timestamps), topic length
_HEAD = struct.Struct(">II4xi4xqq16xH")
_TOPIC_AT = _HEAD.size  # the topic's bytes follow its u16 length
_READ_ENTRIES = 1024  # consume-queue entries read per file read


class IndexCursor:
    """Master side, one per slave stream: where each queue's next unshipped entry is."""

    def __init__(self) -> None:
        self._at = -1          # the commit offset the next batch is expected to start at
        self._generation = -1  # of the queue table the heads were built against
        # (topic, queue id) -> [queue offset of the next entry to ship, its commit offset or None]
        self._heads: dict[tuple[str, int], list] = {}

    def slices(self, queues: QueueTable, pending: Iterable[tuple[int, str, int, int, bytes]],
               indexed_offset: int, start: int, end: int) -> tuple[QueueSlice, ...]:
        """The entries of records starting in ``[start, end)``: from the consume queues below
        ``indexed_offset``, from ``pending`` (end offset, topic, queue id, queue offset,
        entry) at and above it."""
        if start != self._at:
            self._heads.clear()
            self._generation = -1
        if self._generation != queues.generation:
            self._follow(queues, start)
        self._at = end
        found: dict[tuple[str, int], tuple[int, list[bytes]]] = {}
        cutoff = min(end, indexed_offset)
        for key, head in self._heads.items():
            if head[1] is not None and head[1] >= cutoff:
                continue
            queue = queues.get(*key)
            if queue is None or queue.max_offset <= head[0]:
                head[1] = None
                continue
            blob, head[0], head[1] = _take(queue, head[0], cutoff)
            if blob:
                found[key] = (head[0] - len(blob) // CQ_ENTRY_SIZE, [blob])
        if end > indexed_offset:
            for _, topic, queue_id, queue_offset, entry in pending:
                commit_offset = ENTRY.unpack_from(entry)[0]
                if commit_offset < start or commit_offset >= end:
                    continue
                key = (topic, queue_id)
                first, parts = found.setdefault(key, (queue_offset, []))
                parts.append(entry)
                self._heads[key] = [queue_offset + 1, None]
        return tuple(QueueSlice(topic, queue_id, first, b"".join(parts))
                     for (topic, queue_id), (first, parts) in found.items())

    def _follow(self, queues: QueueTable, start: int) -> None:
        """Heads for queues created since the last look (at ``start``); forget deleted ones."""
        current = {(q.topic, q.queue_id): q for q in queues.all()}
        for key in [key for key in self._heads if key not in current]:
            del self._heads[key]
        for key, queue in current.items():
            if key not in self._heads:
                self._heads[key] = [_position(queue, start), None]
        self._generation = queues.generation


def _position(queue: ConsumeQueue, commit_offset: int) -> int:
    """The queue offset of the first entry whose record starts at or after ``commit_offset``,
    moved back over holes just before it (they ship with the entries after them)."""
    low = queue.min_offset

    def at_or_after(index: int) -> bool:
        entry = queue.entry(low + index)
        return entry is None or (not entry.is_hole and entry.commit_offset >= commit_offset)

    found = low + first_index(queue.max_offset - low, at_or_after)
    while found > low and (entry := queue.entry(found - 1)) is not None and entry.is_hole:
        found -= 1
    return found


def _take(queue: ConsumeQueue, queue_offset: int, cutoff: int) -> tuple[bytes, int, int | None]:
    """Entries from ``queue_offset`` whose record starts below ``cutoff`` (holes ride along):
    their bytes, the next queue offset, and its entry's commit offset (None: not read)."""
    parts, at = [], queue_offset
    while at < queue.max_offset:
        count = min(queue.max_offset - at, _READ_ENTRIES)
        chunk = queue.files.read(at * CQ_ENTRY_SIZE, count * CQ_ENTRY_SIZE)
        if len(chunk) < CQ_ENTRY_SIZE:
            break
        taken = 0
        for commit_offset, size, _ in ENTRY.iter_unpack(memoryview(chunk)[:len(chunk) - len(chunk) % CQ_ENTRY_SIZE]):
            if size > 0 and commit_offset >= cutoff:
                parts.append(chunk[:taken * CQ_ENTRY_SIZE])
                return b"".join(parts), at + taken, commit_offset
            taken += 1
        parts.append(chunk[:taken * CQ_ENTRY_SIZE])
        at += taken
    return b"".join(parts), at, None


def check_indexed_run(data: bytes, offset: int, segment_size: int, index: tuple[QueueSlice, ...],
                      next_offsets: dict[tuple[str, int], int]) -> str | None:
    """Why ``data`` (records that should sit at commit ``offset``) and ``index`` are not a
    faithful copy, or None.  ``next_offsets``: the slave's next queue offset per queue.

    One walk over the records: each message's (topic, queue id) picks its slice, whose next
    entry must name it (commit offset, size, queue offset); a message whose slice's next
    entry lies further on is unindexed and checked in full; at the end every entry must have
    been met.
    """
    by_topic: dict[bytes, dict[int, list]] = {}
    for piece in index:
        queues = by_topic.setdefault(piece.topic.encode(), {})
        if piece.queue_id in queues:
            return f"index of {piece.topic}/{piece.queue_id} comes twice in one batch"
        expected = next_offsets.get((piece.topic, piece.queue_id))
        if expected is not None and piece.first_queue_offset != expected:
            return (f"index of {piece.topic}/{piece.queue_id} starts at queue offset {piece.first_queue_offset}, "
                    f"the slave's queue ends at {expected}")
        # [entries, next entry number, entry count, first queue offset, slice]
        queues[piece.queue_id] = [piece.entries, 0, len(piece.entries) // CQ_ENTRY_SIZE, piece.first_queue_offset, piece]
    head, entry_at, pos, length = _HEAD.unpack_from, ENTRY.unpack_from, 0, len(data)
    topic, queues = b"", None
    # locals, not globals, in the loop (this runs once per record)
    head_size, magic_message, topic_at, entry_size = _HEAD.size, MESSAGE_MAGIC, _TOPIC_AT, CQ_ENTRY_SIZE
    least, spare = HEADER_SIZE, BLANK_SIZE
    while pos < length:
        at = offset + pos
        if length - pos < head_size or (fields := head(data, pos))[1] != magic_message:
            reason, pos = _unindexed(data, pos, offset, segment_size)
            if reason is not None:
                return reason
            continue
        size, _, queue_id, queue_offset, commit_offset, topic_length = fields
        if topic_length != len(topic) or not data.startswith(topic, pos + topic_at):
            topic = data[pos + topic_at:pos + topic_at + topic_length]
            queues = by_topic.get(topic)
        state = queues.get(queue_id) if queues is not None else None
        if state is not None:
            entries, number, count = state[0], state[1], state[2]
            while number < count and (entry := entry_at(entries, number * entry_size))[1] <= 0:
                number += 1  # a hole: written as it is, names no record
            state[1] = number
            if number < count and entry[0] <= at:
                if (entry[0] != at or entry[1] != size or commit_offset != at or size < least
                        or queue_offset != state[3] + number):
                    piece = state[4]
                    return (f"index entry {piece.topic}/{piece.queue_id}@{state[3] + number} "
                            f"(at {entry[0]}, size {entry[1]}) does not describe the record at {at}")
                if pos + size > length:
                    return f"index entry at {at} (size {size}) runs past the batch's end {offset + length}"
                if size > segment_size - at % segment_size - spare:
                    return f"record at {at} crosses its segment's end"
                state[1] = number + 1
                pos += size
                continue
        reason, pos = _unindexed(data, pos, offset, segment_size)
        if reason is not None:
            return reason
    for queues in by_topic.values():
        for entries, number, count, first, piece in queues.values():
            while number < count and entry_at(entries, number * CQ_ENTRY_SIZE)[1] <= 0:
                number += 1
            if number < count:
                return (f"index entry {piece.topic}/{piece.queue_id}@{first + number} "
                        f"(at {entry_at(entries, number * CQ_ENTRY_SIZE)[0]}) names no record of the batch")
    return None


def _unindexed(data: bytes, pos: int, offset: int, segment_size: int) -> tuple[str | None, int]:
    """The record at ``pos`` that no index entry names (a BLANK to its segment's end, or a
    message of a deleted topic), checked in full: (why not valid or None, the next position)."""
    at = offset + pos
    info = check(data, pos, at, segment_size - at % segment_size)
    if isinstance(info, Invalid):
        return f"unindexed record at {at} is invalid ({info.value})", pos
    if pos + info.size > len(data):
        return f"unindexed record at {at} runs past the batch's end", pos
    return None, pos + info.size
