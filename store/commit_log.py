"""The commit log: records appended back to back in fixed-size segments.

Rules:

* ``write_offset`` is the end of the last whole, valid record; everything below it (down to
  ``min_offset``, the first segment's start) is a sequence of valid records.  Bytes above it
  are garbage to be overwritten or cut.
* A record never crosses a segment; when one does not fit (keeping ``BLANK_SIZE`` spare), a
  BLANK record fills the segment's rest and the record starts the next segment.
* Recovery (:meth:`scan`) trusts nothing: it walks records from a known boundary checking
  CRC and position, stops at the first invalid one and :meth:`cut` removes the rest
  physically, later segments included.  A torn or corrupt tail is therefore never served.
* Segments are kept written with zeros ``ZERO_AHEAD_BYTES`` past the data (store.segmented_file:
  a group commit's fdatasync then costs less than half), for a store that fdatasyncs each put
  (SYNC_FLUSH).  An ASYNC_FLUSH store writes no zeros: they doubled the bytes it wrote, and its
  batched sends cost 6% more CPU with them (bench/bench_broker.py, batches of 32, alternated
  runs: 22.1 and 22.6 ms per 1000 messages without, 23.8 and 25.3 with).  The scan ends cleanly where the
  records stop and nothing but zeros follows to the end of the last file; zeros followed by
  anything else, or zeros before a later segment, are a torn tail and are cut as before.
  Recovery's cut drops the zeros too; they are written again with the next record.
* A segment sealed by a takeover (store.ownership: another owner's, read up to where it was
  sealed) ends there: the scan goes on at the next segment, as after a BLANK.
* Replication moves whole records only: :meth:`read_raw` returns whole records (the slave
  checks them against the master's index, store.replica_index, before anything is
  written), :meth:`cut` fsyncs.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from store import record
from store.record import BLANK_SIZE, HEADER_SIZE, Invalid, Kind, RecordInfo
from store.segmented_file import SegmentedFile

SCAN_CHUNK_BYTES = 4 << 20
ZERO_AHEAD_BYTES = 4 << 20
READ_SPAN_MAX_BYTES = 1 << 20  # read_messages: records this close share one read


@dataclass(frozen=True)
class ScanEnd:
    offset: int  # end of the last valid record
    reason: Invalid | None  # why scanning stopped (None: clean end of the data)


class CommitLog:
    def __init__(self, directory: Path, segment_size: int, epoch: int = 0, plan=None,
                 zero_ahead: int = ZERO_AHEAD_BYTES):
        """``epoch``, ``plan``: a store on shared storage (store.segmented_file, store.ownership);
        ``zero_ahead``: bytes of zeros kept written past the data (0 for none)."""
        self.files = SegmentedFile(directory, segment_size, epoch, plan)
        self.files.zero_ahead = zero_ahead
        self.segment_size = segment_size
        starts = self.files.starts()
        self.write_offset = starts[0] if starts else 0  # set properly by recovery

    @property
    def min_offset(self) -> int:
        first = self.files.first_start()
        return self.write_offset if first is None else first

    def room(self, offset: int) -> int:
        return self.files.segment_start(offset) + self.segment_size - offset

    def max_record_size(self) -> int:
        return self.segment_size - BLANK_SIZE

    # --- appending -------------------------------------------------------------------------
    def place(self, size: int) -> tuple[int, bytes]:
        """Where a record of ``size`` goes next, and the blank to write first (maybe empty)."""
        assert size <= self.max_record_size()
        room = self.room(self.write_offset)
        if size + BLANK_SIZE <= room:
            return self.write_offset, b""
        return self.write_offset + room, record.encode_blank(room)

    def append(self, records: Iterable[tuple[bytes, int, int, int]], store_timestamp_ms: int) -> list[int]:
        """Seal and append records given as (tail, queue id, queue offset, born timestamp), one
        write per segment; their commit offsets, in order.  Each record's size is
        ``HEADER_SIZE + len(tail)``, at most :meth:`max_record_size`."""
        offsets: list[int] = []
        offset = self.write_offset
        chunk_start, chunk = offset, []
        segment_end = self.files.segment_start(offset) + self.segment_size
        seal_parts = record.seal_parts
        for tail, queue_id, queue_offset, born_timestamp_ms in records:
            size = HEADER_SIZE + len(tail)
            if offset + size + BLANK_SIZE > segment_end:
                chunk.append(record.encode_blank(segment_end - offset))
                self._write(chunk_start, chunk)
                offset = chunk_start = segment_end
                chunk, segment_end = [], segment_end + self.segment_size
            chunk += seal_parts(tail, queue_id, queue_offset, offset, store_timestamp_ms, born_timestamp_ms)
            offsets.append(offset)
            offset += size
        self._write(chunk_start, chunk)
        self.write_offset = offset
        return offsets

    def _write(self, start: int, parts: list[bytes]) -> None:
        if parts:
            self.files.write(start, b"".join(parts))

    # --- reading ---------------------------------------------------------------------------
    def read(self, offset: int, size: int) -> bytes:
        if offset < self.min_offset or offset + size > self.write_offset:
            return b""
        return self.files.read(offset, size)

    def read_message(self, offset: int, size: int | None = None):
        """The message at ``offset`` (checked and decoded), or None if there is none."""
        if offset < self.min_offset or offset >= self.write_offset:
            return None
        if size is None:
            size = record.declared_size(self.files.read(offset, 4))
        data = self.read(offset, size)
        if not data:
            return None
        decoded = record.decode(data, 0, offset, self.room(offset))
        return None if isinstance(decoded, Invalid) else decoded

    def read_messages(self, spans: list[tuple[int, int]]) -> list:
        """:meth:`read_message` of each (offset, size), in order; records of one segment within
        ``READ_SPAN_MAX_BYTES`` of each other are read with one pread (a receive of 32 records
        was 32 preads, a system call each)."""
        if len(spans) < 2:
            return [self.read_message(offset, size) for offset, size in spans]
        low = min(offset for offset, _ in spans)
        high = max(offset + size for offset, size in spans)
        if (high - low > READ_SPAN_MAX_BYTES or low < self.min_offset or high > self.write_offset
                or self.files.segment_start(low) != self.files.segment_start(high - 1)):
            return [self.read_message(offset, size) for offset, size in spans]
        data = self.files.read(low, high - low)
        if len(data) != high - low:
            return [self.read_message(offset, size) for offset, size in spans]
        found = []
        for offset, size in spans:
            decoded = record.decode(data, offset - low, offset, self.room(offset))
            found.append(None if isinstance(decoded, Invalid) or decoded.size != size else decoded)
        return found

    def info_at(self, offset: int) -> RecordInfo | Invalid:
        size = record.declared_size(self.files.read(offset, 4))
        return record.check(self.files.read(offset, max(size, 8)), 0, offset, self.room(offset))

    def read_raw(self, offset: int, max_bytes: int) -> bytes | memoryview:
        """Whole records from ``offset`` (a record boundary), at least one if any, within a segment.

        Records are not CRC-checked here (the batch carries a CRC, and the slave checks the records against the index): the
        log's end and a segment's end are record boundaries, so a read that reaches either is
        returned as it is, and a shorter one is cut after its last whole record by walking
        the size fields only.
        """
        if offset < self.min_offset or offset > self.write_offset:
            raise ValueError(f"offset {offset} outside the log [{self.min_offset}, {self.write_offset}]")
        limit = min(self.write_offset - offset, self.room(offset))
        if limit <= max_bytes:
            return self.files.read(offset, limit)
        data = self.files.read(offset, max(max_bytes, 8))
        end = _whole_records(data)
        if end == 0:  # the first record alone is longer than max_bytes: it goes whole
            return self.files.read(offset, min(limit, max(record.declared_size(data), BLANK_SIZE)))
        return memoryview(data)[:end]  # not data[:end]: that copies the batch once more

    # --- recovery and truncation -------------------------------------------------------------
    def scan(self, start: int, visit: Callable[[int, bytes | memoryview, int, RecordInfo], None]) -> ScanEnd:
        """Walk valid records from boundary ``start``; ``visit(offset, buf, pos, info)`` each message."""
        offset, needed = start, 0
        starts = set(self.files.starts())
        while True:
            segment = self.files.segment_start(offset)
            if segment not in starts:
                return ScanEnd(offset, None)
            sealed = self.files.sealed_end(segment)
            if sealed is not None and offset >= sealed:  # a fenced owner's end: its rest is a hole, like a BLANK
                offset, needed = segment + self.segment_size, 0
                continue
            room = self.room(offset)
            want = min(room, max(SCAN_CHUNK_BYTES, needed))
            data = self.files.read(offset, want)
            pos, info = self._walk(data, offset, room, visit)
            if isinstance(info, Invalid):
                if info is Invalid.TRUNCATED and len(data) == want < room:
                    # the chunk ended inside a record: read again from it, whole
                    needed = 0 if pos else record.declared_size(data)
                    offset += pos
                    continue
                clean = info is Invalid.EMPTY and self._zeros_to_end(offset + pos)
                return ScanEnd(offset + pos, None if clean else info)
            offset, needed = offset + pos, 0
            if pos == 0:
                return ScanEnd(offset, None if self._zeros_to_end(offset) else Invalid.EMPTY)

    def _zeros_to_end(self, offset: int) -> bool:
        """Nothing but zeros from ``offset`` to the end of the last file (the data's clean end)."""
        end = self.files.end()
        if self.files.segment_start(offset) != self.files.segment_start(max(offset, end - 1)):
            return offset == end  # a later segment exists: zeros here are a hole, not the end
        while offset < end:
            data = self.files.read(offset, min(end - offset, SCAN_CHUNK_BYTES))
            if not data or data.count(0) != len(data):
                return not data and offset >= end
            offset += len(data)
        return True

    @staticmethod
    def _walk(data, offset: int, room: int, visit) -> tuple[int, RecordInfo | Invalid | None]:
        pos, info = 0, None
        while pos < len(data):
            info = record.check(data, pos, offset + pos, room - pos)
            if isinstance(info, Invalid):
                return pos, info
            pos += info.size
            if info.kind is Kind.BLANK:
                return pos, info
            visit(offset + pos - info.size, data, pos - info.size, info)
        if pos < len(data):
            return pos, Invalid.TRUNCATED
        return pos, info

    def _last(self, segment: int) -> bool:
        return segment == self.files.starts()[-1]

    def cut(self, offset: int) -> int:
        """Remove every byte at or above ``offset`` physically (fsynced); returns bytes removed."""
        removed = sum(self.files.file_length(start) - max(0, offset - start)
                      for start in self.files.starts() if start + self.files.file_length(start) > offset)
        self.files.truncate(offset)
        self.write_offset = offset
        return removed


_SIZE = struct.Struct(">I")


def _whole_records(data: bytes) -> int:
    """Length of the whole records at the start of ``data`` (by their size fields, unchecked)."""
    end, length = 0, len(data)
    while end + 4 <= length:
        (size,) = _SIZE.unpack_from(data, end)
        if size < BLANK_SIZE or end + size > length:
            break
        end += size
    return end
