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
  reason (a string) for the first thing wrong.  The entries of all slices, merged by commit
  offset, must tile the run: each entry is a message record whose header states the same
  size, commit offset, queue id and queue offset, and whose topic is the slice's; between
  entries there may only be a BLANK running to its segment's end, or whole message records
  that no queue indexes (their topic was deleted on the master), each checked in full
  (store.record.check).  The batch CRC (checked by the slave session) proves the bytes
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
from store.record import HEADER_SIZE, MESSAGE_MAGIC, Invalid, check

# size, magic, (crc), queue id, (flags), queue offset, commit offset, (timestamps), topic length
_HEAD = struct.Struct(">II4xi4xqq16xH")
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
    faithful copy, or None.  ``next_offsets``: the slave's next queue offset per queue."""
    merged, ends = [], {}
    for number, piece in enumerate(index):
        key = (piece.topic, piece.queue_id)
        expected = ends.get(key, next_offsets.get(key))
        if expected is not None and piece.first_queue_offset != expected:
            return (f"index of {piece.topic}/{piece.queue_id} starts at queue offset {piece.first_queue_offset}, "
                    f"the slave's queue ends at {expected}")
        ends[key] = piece.first_queue_offset + len(piece.entries) // CQ_ENTRY_SIZE
        queue_offset = piece.first_queue_offset
        for commit_offset, size, _ in ENTRY.iter_unpack(piece.entries):
            if size > 0:
                merged.append((commit_offset, size, queue_offset, number))
            queue_offset += 1
    merged.sort()
    topics = [(len(t := piece.topic.encode()), t) for piece in index]
    head, pos, length = _HEAD.unpack_from, 0, len(data)
    for commit_offset, size, queue_offset, number in merged:
        at = commit_offset - offset
        if at != pos:
            if at < pos:
                return f"index entry at {commit_offset} overlaps the record before it"
            reason = _unindexed(data, pos, min(at, length), offset, segment_size)
            if reason is not None:
                return reason
            pos = at
        if at + _HEAD.size > length or at + size > length:
            return f"index entry at {commit_offset} (size {size}) runs past the batch's end {offset + length}"
        record_size, magic, queue_id, record_queue_offset, record_commit, topic_length = head(data, at)
        topic_size, topic = topics[number]
        if (magic != MESSAGE_MAGIC or record_size != size or record_commit != commit_offset
                or queue_id != index[number].queue_id or record_queue_offset != queue_offset
                or topic_length != topic_size or not data.startswith(topic, at + HEADER_SIZE + 2)):
            piece = index[number]
            return (f"index entry {piece.topic}/{piece.queue_id}@{queue_offset} does not describe the record "
                    f"at {commit_offset}")
        if size > segment_size - commit_offset % segment_size:
            return f"record at {commit_offset} crosses its segment's end"
        pos = at + size
    return _unindexed(data, pos, length, offset, segment_size) if pos < length else None


def _unindexed(data: bytes, pos: int, until: int, offset: int, segment_size: int) -> str | None:
    """Records in ``data[pos:until]`` that no index entry names: BLANKs to their segment's end,
    or messages of deleted topics; each must be whole and valid."""
    while pos < until:
        at = offset + pos
        info = check(data, pos, at, segment_size - at % segment_size)
        if isinstance(info, Invalid):
            return f"unindexed record at {at} is invalid ({info.value})"
        pos += info.size
        if pos > until:
            return f"unindexed record at {at} runs into an indexed one"
    return None
