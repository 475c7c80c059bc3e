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
  every queue again by binary search.  Otherwise a batch visits only the queues written
  since the last batch (the queue table's write serials) and those whose next entry was
  known but past the last batch's end: with 8,000 queues, visiting every head cost the
  master 1.8 ms a batch of one record, against 12 us with 8 (bench/bench_replication_index.py).
* Slave (:func:`check_indexed_run`): a run is accepted whole or not at all; the result is a
  reason (a string) for the first thing wrong.  Every entry must name a message record of
  the run whose header states the same size, commit offset, queue id and queue offset, and
  whose topic is the slice's, and every record must be named by its queue's entry, except a
  BLANK running to its segment's end or a message no queue indexes (its topic was deleted
  on the master), which is checked in full (store.record.check).  A queue comes at most
  once per batch.  The entries are checked together with numpy (one gather of every named
  record's header): per record in Python this was the slave's largest cost.  A batch of at
  most :data:`FEW_ENTRIES` entries (a put of one message or of one request's batch under
  load: most batches) is checked by a plain loop instead, the same checks in the same order
  with the same words (numpy's fixed cost, about 60 us a call, was the slave's largest cost
  then; the loop is cheaper up to about 90 entries: 43 vs 83 us for 32, 76 vs 96 for 64,
  154 vs 120 for 128; the two are held equal by a differential test).  The batch CRC (checked by the slave session) proves the bytes
  arrived as the master read them; this check proves the index describes them, so the
  slave's queues equal the master's with a few struct reads per record, not a parse.
* A slice of a queue the slave already has must start at that queue's next offset.
* A checked run becomes a :class:`StagedRun`: where its bytes go (file, position, part) and
  its queues' entries, so the slave can write the bytes on another thread while it checks
  the next batch (MessageStore.stage_raw / write_staged / commit_staged).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ha.replication.messages import QueueSlice
from store.config import CQ_ENTRY_SIZE
from store.consume_queue import ConsumeQueue
from store.cq_entry import ENTRY, first_index
from store.queue_table import QueueTable
from store.record import BLANK_SIZE, HEADER_SIZE, MESSAGE_MAGIC, Invalid, check
from store.segmented_file import pwrite_all


@dataclass(frozen=True)
class StagedRun:
    """A checked run of replicated records, its place in the log reserved, not yet visible."""

    start: int
    end: int
    writes: tuple[tuple[int, int, bytes | memoryview], ...]  # (fd, position in file, bytes), one per segment
    runs: tuple[tuple[str, int, int, bytes], ...]  # (topic, queue id, first queue offset, entries)

    def write(self) -> None:
        """The bytes into their files: any thread, while the store keeps the files open."""
        for fd, position, part in self.writes:
            pwrite_all(fd, position, part)

# size, magic, (crc), queue id, (flags), queue offset, commit offset, (timestamps), topic length
_HEAD = struct.Struct(">II4xi4xqq16xH")
_TOPIC_AT = _HEAD.size  # the topic's bytes follow its u16 length
_COMMIT_OFFSET = struct.Struct(">q").unpack_from  # a consume-queue entry's first field
_READ_ENTRIES = 1024  # consume-queue entries read per file read
FEW_ENTRIES = 64  # a batch with at most this many index entries is checked without numpy


class IndexCursor:
    """Master side, one per slave stream: where each queue's next unshipped entry is."""

    def __init__(self) -> None:
        self._at = -1          # the commit offset the next batch is expected to start at
        self._generation = -1  # of the queue table the heads were built against
        # (topic, queue id) -> [queue offset of the next entry to ship, its commit offset or None]
        self._heads: dict[tuple[str, int], list] = {}
        self._seen = 0  # the queue table's write serial when the heads were last brought up to date
        self._known: set[tuple[str, int]] = set()  # heads whose next entry (commit offset) is known

    def slices(self, queues: QueueTable, pending: Iterable[tuple[int, str, int, int, bytes]],
               indexed_offset: int, start: int, end: int) -> tuple[QueueSlice, ...]:
        """The entries of records starting in ``[start, end)``: from the consume queues below
        ``indexed_offset``, from ``pending`` (end offset, topic, queue id, queue offset,
        entry) at and above it."""
        if start != self._at:
            self._heads.clear()
            self._known.clear()
            self._generation = -1
        if self._generation != queues.generation:
            self._follow(queues, start)
            visit = list(self._heads)
        else:  # a head not written since it was brought up to date has nothing new
            visit = [*queues.written_since(self._seen), *self._known]
        self._seen, self._at = queues.write_serial, end
        found: dict[tuple[str, int], tuple[int, list[bytes]]] = {}
        cutoff = min(end, indexed_offset)
        heads, known = self._heads, self._known
        for key in visit:
            head = heads.get(key)
            if head is None or key in found:  # a queue created and deleted since; or visited
                continue
            if head[1] is not None and head[1] >= cutoff:
                known.add(key)
                continue
            queue = queues.get(*key)
            if queue is None or queue.max_offset <= head[0]:
                head[1] = None
                known.discard(key)
                continue
            blob, head[0], head[1] = _take(queue, head[0], cutoff)
            if head[1] is None:
                known.discard(key)
            else:
                known.add(key)
            if blob:
                found[key] = (head[0] - len(blob) // CQ_ENTRY_SIZE, [blob])
        if end > indexed_offset:
            last: dict[tuple[str, int], int] = {}  # key -> the queue offset of its last entry taken
            for _, topic, queue_id, queue_offset, entry in pending:
                commit_offset = _COMMIT_OFFSET(entry)[0]
                if commit_offset < start or commit_offset >= end:
                    continue
                key = (topic, queue_id)
                slot = found.get(key)
                if slot is None:
                    slot = found[key] = (queue_offset, [])
                slot[1].append(entry)
                last[key] = queue_offset
            for key, queue_offset in last.items():  # the heads once per queue, not once per record
                self._heads[key] = [queue_offset + 1, None]
                known.discard(key)
        return tuple(QueueSlice(topic, queue_id, first, b"".join(parts))
                     for (topic, queue_id), (first, parts) in found.items())

    def _follow(self, queues: QueueTable, start: int) -> None:
        """Heads for queues created since the last look (at ``start``); forget deleted ones."""
        current = {(q.topic, q.queue_id): q for q in queues.all()}
        for key in [key for key in self._heads if key not in current]:
            del self._heads[key]
        self._known.intersection_update(self._heads)
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
        whole = len(chunk) // CQ_ENTRY_SIZE
        if not whole:
            break
        entries = np.frombuffer(chunk, dtype=_ENTRY_DTYPE, count=whole)
        beyond = (entries["size"] > 0) & (entries["commit_offset"] >= cutoff)
        if beyond.any():
            taken = int(np.argmax(beyond))
            parts.append(chunk[:taken * CQ_ENTRY_SIZE])
            return b"".join(parts), at + taken, int(entries["commit_offset"][taken])
        parts.append(chunk[:whole * CQ_ENTRY_SIZE])
        at += whole
    return b"".join(parts), at, None


# the bytes of a message record's header a check reads (store.record: size, magic, queue id,
# queue offset, commit offset, topic length; crc, flags and timestamps left out), as numpy
# reads them once gathered side by side
_HEAD_COLUMNS = np.concatenate([np.arange(0, 8), np.arange(12, 16), np.arange(20, 36),
                                np.arange(_HEAD.size - 2, _HEAD.size)]).astype(np.int32)
_HEAD_DTYPE = np.dtype([("size", ">u4"), ("magic", ">u4"), ("queue_id", ">i4"), ("queue_offset", ">i8"),
                        ("commit_offset", ">i8"), ("topic_length", ">u2")])
_ENTRY_DTYPE = np.dtype([("commit_offset", ">i8"), ("size", ">i4"), ("tag_code", ">i8")])
assert _HEAD_DTYPE.itemsize == len(_HEAD_COLUMNS) and _ENTRY_DTYPE.itemsize == CQ_ENTRY_SIZE


def check_indexed_run(data: bytes, offset: int, segment_size: int, index: tuple[QueueSlice, ...],
                      next_offsets: dict[tuple[str, int], int]) -> str | None:
    """Why ``data`` (records that should sit at commit ``offset``) and ``index`` are not a
    faithful copy, or None.  ``next_offsets``: the slave's next queue offset per queue.

    Vectorised (numpy) over the entries: every named record's header is gathered at once and
    compared with its entry; the entries sorted by position must not overlap, and what lies
    between them (BLANKs, messages no queue indexes) is walked and checked in full.
    """
    reason = _check_slices(index, next_offsets)
    if reason is not None:
        return reason
    if sum(len(piece.entries) for piece in index) <= FEW_ENTRIES * CQ_ENTRY_SIZE:
        return _check_few(data, offset, segment_size, index)
    return _check_many(data, offset, segment_size, index)


def _check_many(data: bytes, offset: int, segment_size: int, index: tuple[QueueSlice, ...]) -> str | None:
    """:func:`check_indexed_run`'s entry checks, vectorised."""
    length = len(data)
    entries = np.frombuffer(b"".join(piece.entries for piece in index), dtype=_ENTRY_DTYPE)
    named = entries["size"] > 0  # a hole is written as it is and names no record
    if not named.any():
        return _walk_unindexed(data, 0, length, offset, segment_size)
    counts = [len(piece.entries) // CQ_ENTRY_SIZE for piece in index]
    number = np.repeat(np.arange(len(index)), counts)[named]
    firsts = np.asarray([piece.first_queue_offset for piece in index], dtype=np.int64)
    slice_starts = np.cumsum([0] + counts[:-1])
    queue_offset = (firsts[number] + np.flatnonzero(named) - slice_starts[number]).astype(np.int64)
    commit = entries["commit_offset"][named].astype(np.int64)
    size = entries["size"][named].astype(np.int64)
    at = commit - offset
    outside = (at < 0) | (at + _HEAD.size > length) | (at + size > length)
    if outside.any():
        return _entry_problem(index, number, queue_offset, commit, size, int(np.argmax(outside)),
                              f"runs past the batch [{offset}, {offset + length})")
    # one gather: each named record's header and the bytes where its topic should be
    topics = [piece.topic.encode() for piece in index]
    widest = max(len(topic) for topic in topics)
    raw = np.frombuffer(data, dtype=np.uint8)
    columns = np.concatenate([_HEAD_COLUMNS, np.arange(_TOPIC_AT, _TOPIC_AT + widest, dtype=np.int32)])
    spots = np.minimum(at.astype(np.int32)[:, None] + columns, length - 1)
    gathered = raw[spots]
    heads = np.ascontiguousarray(gathered[:, :_HEAD_DTYPE.itemsize]).view(_HEAD_DTYPE).reshape(-1)
    expected_topics = np.zeros((len(index), widest), dtype=np.uint8)
    topic_lengths = np.zeros(len(index), dtype=np.int64)
    for row, topic in enumerate(topics):
        expected_topics[row, :len(topic)] = np.frombuffer(topic, dtype=np.uint8)
        topic_lengths[row] = len(topic)
    in_topic = np.arange(widest) < topic_lengths[number][:, None]
    queue_ids = np.asarray([piece.queue_id for piece in index], dtype=np.int64)
    wrong = ((heads["magic"] != MESSAGE_MAGIC) | (heads["size"] != size) | (heads["commit_offset"] != commit)
             | (heads["queue_offset"] != queue_offset) | (heads["queue_id"] != queue_ids[number])
             | (heads["topic_length"] != topic_lengths[number])
             | ((gathered[:, _HEAD_DTYPE.itemsize:] != expected_topics[number]) & in_topic).any(axis=1)
             | (size < HEADER_SIZE) | (size > segment_size - commit % segment_size - BLANK_SIZE))
    if wrong.any():
        return _entry_problem(index, number, queue_offset, commit, size, int(np.argmax(wrong)),
                              "does not describe the record there")
    order = np.argsort(at, kind="stable")
    starts, ends = at[order], at[order] + size[order]
    if (starts[1:] < ends[:-1]).any():
        where = int(np.argmax(starts[1:] < ends[:-1])) + 1
        return _entry_problem(index, number, queue_offset, commit, size, int(order[where]),
                              "overlaps the record before it")
    return _check_gaps(data, starts, ends, offset, segment_size)


def _check_few(data: bytes, offset: int, segment_size: int, index: tuple[QueueSlice, ...]) -> str | None:
    """:func:`check_indexed_run`'s entry checks as :func:`_check_many` makes them, one entry at a time."""
    length, named = len(data), []  # (slice number, queue offset, commit, size)
    for number, piece in enumerate(index):
        for position, (commit, size, _) in enumerate(ENTRY.iter_unpack(piece.entries)):
            if size > 0:
                named.append((number, piece.first_queue_offset + position, commit, size))
    if not named:
        return _walk_unindexed(data, 0, length, offset, segment_size)
    for number, queue_offset, commit, size in named:
        at = commit - offset
        if at < 0 or at + _HEAD.size > length or at + size > length:
            return _few_problem(index, number, queue_offset, commit, size, f"runs past the batch [{offset}, {offset + length})")
    for number, queue_offset, commit, size in named:
        piece, at = index[number], commit - offset
        topic = piece.topic.encode()
        head_size, magic, queue_id, head_queue_offset, head_commit, topic_length = _HEAD.unpack_from(data, at)
        low = at + _TOPIC_AT
        stored = data[low:low + len(topic)] if low + len(topic) <= length else \
            bytes(data[min(low + j, length - 1)] for j in range(len(topic)))  # as numpy's clipped gather
        if (magic != MESSAGE_MAGIC or head_size != size or head_commit != commit or head_queue_offset != queue_offset
                or queue_id != piece.queue_id or topic_length != len(topic) or stored != topic
                or size < HEADER_SIZE or size > segment_size - commit % segment_size - BLANK_SIZE):
            return _few_problem(index, number, queue_offset, commit, size, "does not describe the record there")
    spans = sorted((commit - offset, item, commit - offset + size) for item, (_, _, commit, size) in enumerate(named))
    for (_, _, end), (start, item, _) in zip(spans, spans[1:]):
        if start < end:
            return _few_problem(index, *named[item], "overlaps the record before it")
    bounds = [0] + [edge for start, _, end in spans for edge in (start, end)] + [length]
    for low, high in zip(bounds[::2], bounds[1::2]):
        if low < high:
            reason = _walk_unindexed(data, low, high, offset, segment_size)
            if reason is not None:
                return reason
    return None


def _few_problem(index, number: int, queue_offset: int, commit: int, size: int, what: str) -> str:
    piece = index[number]
    return f"index entry {piece.topic}/{piece.queue_id}@{queue_offset} (at {commit}, size {size}) {what}"


def _check_slices(index: tuple[QueueSlice, ...], next_offsets: dict[tuple[str, int], int]) -> str | None:
    """Each queue at most once, starting where the slave's copy of it ends."""
    seen: set[tuple[str, int]] = set()
    for piece in index:
        key = (piece.topic, piece.queue_id)
        if key in seen:
            return f"index of {piece.topic}/{piece.queue_id} comes twice in one batch"
        seen.add(key)
        expected = next_offsets.get(key)
        if expected is not None and piece.first_queue_offset != expected:
            return (f"index of {piece.topic}/{piece.queue_id} starts at queue offset {piece.first_queue_offset}, "
                    f"the slave's queue ends at {expected}")
    return None


def _check_gaps(data: bytes, starts, ends, offset: int, segment_size: int) -> str | None:
    """The stretches between named records (sorted ``starts``/``ends``) hold only unindexed records."""
    gaps = np.flatnonzero(starts[1:] != ends[:-1])
    for low, high in [(0, int(starts[0]))] + [(int(ends[g]), int(starts[g + 1])) for g in gaps] \
            + [(int(ends[-1]), len(data))]:
        if low < high:
            reason = _walk_unindexed(data, low, high, offset, segment_size)
            if reason is not None:
                return reason
    return None


def _entry_problem(index, number, queue_offset, commit, size, which: int, what: str) -> str:
    piece = index[int(number[which])]
    return (f"index entry {piece.topic}/{piece.queue_id}@{int(queue_offset[which])} "
            f"(at {int(commit[which])}, size {int(size[which])}) {what}")


def _walk_unindexed(data: bytes, pos: int, until: int, offset: int, segment_size: int) -> str | None:
    """Records in ``data[pos:until]`` that no entry names (BLANKs to their segment's end, or
    messages of topics deleted on the master), each checked in full; they must end at ``until``."""
    while pos < until:
        at = offset + pos
        info = check(data, pos, at, segment_size - at % segment_size)
        if isinstance(info, Invalid):
            return f"unindexed record at {at} is invalid ({info.value})"
        pos += info.size
    if pos != until:
        return f"unindexed record ending at {offset + pos} runs into an indexed one at {offset + until}"
    return None
