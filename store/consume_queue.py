"""One consume queue: the index of (topic, queue_id) into the commit log.

Rules:

* Entry ``n`` (queue offset ``n``) is 20 bytes at byte ``n * 20`` of segment files under
  ``consumequeue/TOPIC/QUEUE_ID/``, named by their start byte offset.
* ``max_offset`` is the next queue offset to be written; ``min_offset`` the first entry
  still backed by the commit log (entries below the log's min are retained files only).
* A consume queue is never trusted beyond the commit log: :meth:`cut_beyond` drops every
  tail entry that ends past the log's end, physically (upstream bug #7689 served offsets
  that ran ahead of a truncated log).
* On shared storage after takeovers (issue 26, store.ownership) a queue is read through
  layers: each epoch's own files (``<start>.e<epoch>``, written sparse from the queue's max
  offset at its takeover, no entry copied) serve the entries from that offset on, the older
  epoch's files those below it (``ownership.queue_layers``).  A fenced old owner's late
  entries go to its own files past the split, which no layer reads.  Only the newest layer
  is written; a cut never goes below its split.
* Written only from the event-loop thread; :meth:`sync` may run on the flush thread.
* Every write is reported to ``on_put`` (set by the queue table: store.queue_table), so a
  reader that follows new entries visits only the queues written since it last looked.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

from store.config import CQ_ENTRY_SIZE
from store.cq_entry import CqEntry, decode_entries, encode_entry, first_index
from store.segmented_file import SegmentedFile

CUT_SCAN_ENTRIES = 4096


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, directory: Path, segment_size: int,
                 layers: tuple[tuple[int, int], ...] = ((0, 0),)):
        """``layers``: (epoch, first queue offset) oldest first, the newest written
        (``store.ownership.queue_layers``; a store never moved has the one plain layer)."""
        self.topic, self.queue_id = topic, queue_id
        self.directory = directory
        moved = layers != ((0, 0),)
        self._layers = [(split, SegmentedFile(directory, segment_size, epoch, only_epoch=moved))
                        for epoch, split in layers]
        self.split, self.files = self._layers[-1]
        self.entries_per_segment = segment_size // CQ_ENTRY_SIZE
        starts = self._layers[0][1].starts()
        self.min_offset = starts[0] // CQ_ENTRY_SIZE if starts else self.split
        self.max_offset = max(self.split, self.files.end() // CQ_ENTRY_SIZE)
        self.dirty = False
        self._last: tuple[int, CqEntry | None] | None = None  # (max_offset, the entry before it) as last read
        self.on_put: Callable[[tuple[str, int]], None] | None = None  # told (topic, queue id) after a write

    # --- writing -------------------------------------------------------------------------------
    def put(self, queue_offset: int, entries: bytes) -> None:
        """Write encoded entries (concatenated) for ``queue_offset``, ``queue_offset + 1``, ...;
        one write per segment."""
        if not entries:
            return
        assert len(entries) % CQ_ENTRY_SIZE == 0, len(entries)
        if queue_offset < self.split:  # a replay of records below the split: the older layer holds them
            skip = min(self.split - queue_offset, len(entries) // CQ_ENTRY_SIZE)
            entries, queue_offset = entries[skip * CQ_ENTRY_SIZE:], queue_offset + skip
            if not entries:
                return
        if self.max_offset == self.min_offset == 0 and not self.files.starts():
            self.min_offset = queue_offset - queue_offset % self.entries_per_segment
        segment_bytes = self.entries_per_segment * CQ_ENTRY_SIZE
        at, done = queue_offset * CQ_ENTRY_SIZE, 0
        while done < len(entries):
            room = segment_bytes - (at + done) % segment_bytes
            part = entries[done:done + room] if done or room < len(entries) else entries
            self.files.write(at + done, part)
            done += len(part)
        self.max_offset = max(self.max_offset, queue_offset + len(entries) // CQ_ENTRY_SIZE)
        self.dirty, self._last = True, None
        if self.on_put is not None:
            self.on_put((self.topic, self.queue_id))

    def put_one(self, queue_offset: int, commit_offset: int, size: int, tag_code: int) -> None:
        self.put(queue_offset, encode_entry(commit_offset, size, tag_code))

    # --- reading -------------------------------------------------------------------------------
    def entries(self, offset: int, count: int) -> list[CqEntry]:
        """Up to ``count`` entries from ``offset`` (fewer at a segment end or at max_offset)."""
        count = min(count, self.max_offset - offset)
        if count <= 0 or offset < 0:
            return []
        files, upto = self._layer_of(offset)
        count = min(count, upto - offset)
        return decode_entries(files.read(offset * CQ_ENTRY_SIZE, count * CQ_ENTRY_SIZE))

    def _layer_of(self, offset: int) -> tuple[SegmentedFile, int]:
        """The files entry ``offset`` is read from, and where that layer's range ends."""
        upto = self.max_offset
        for split, files in reversed(self._layers):
            if offset >= split:
                return files, upto
            upto = split
        return self._layers[0][1], upto

    def entry(self, offset: int) -> CqEntry | None:
        found = self.entries(offset, 1)
        return found[0] if found else None

    def last_entry(self) -> CqEntry | None:
        """The entry at ``max_offset - 1`` (None for an empty queue): read once after each write
        or cut, then kept."""
        if self._last is None or self._last[0] != self.max_offset:
            self._last = (self.max_offset, self.entry(self.max_offset - 1) if self.max_offset > self.min_offset else None)
        return self._last[1]

    # --- repair --------------------------------------------------------------------------------
    def cut_beyond(self, log_end: int) -> int:
        """Drop tail entries that end past ``log_end``; returns how many were dropped."""
        keep = self.max_offset
        while keep > max(self.min_offset, self.split):
            low = max(self.min_offset, self.split, keep - CUT_SCAN_ENTRIES)
            batch = self._read_range(low, keep)
            inside = [i for i, entry in enumerate(batch) if not entry.is_hole and entry.end <= log_end]
            if inside:
                keep = low + inside[-1] + 1
                break
            keep = low
        dropped = self.max_offset - keep
        if dropped or self.files.end() > keep * CQ_ENTRY_SIZE:
            self.files.truncate(keep * CQ_ENTRY_SIZE)
            self.max_offset, self._last = keep, None
            self.min_offset = min(self.min_offset, keep)
        return dropped

    def _read_range(self, low: int, high: int) -> list[CqEntry]:
        found: list[CqEntry] = []
        while low + len(found) < high:
            more = self.entries(low + len(found), high - low - len(found))
            if not more:
                break
            found += more
        return found

    def advance_min(self, log_min: int) -> None:
        """Forget entries whose record is below the commit log's min (deleted by retention)."""
        for start in sorted({s for _, files in self._layers for s in files.starts()})[:-1]:
            last = self.entry(start // CQ_ENTRY_SIZE + self.entries_per_segment - 1)
            if last is not None and last.end <= log_min:
                for _, files in self._layers:
                    files.delete_segment(start)
        starts = sorted({s for _, files in self._layers for s in files.starts()})
        base = max(self.min_offset, starts[0] // CQ_ENTRY_SIZE if starts else self.max_offset)
        count = self.max_offset - base

        def backed(index: int) -> bool:
            entry = self.entry(base + index)
            return entry is not None and not entry.is_hole and entry.commit_offset >= log_min

        self.min_offset = base + first_index(count, backed)

    # --- lifecycle -----------------------------------------------------------------------------
    def sync(self) -> None:
        if self.dirty:
            self.dirty = False
            self.files.sync_all()

    def close(self) -> None:
        for _, files in self._layers:
            files.close()

    def destroy(self) -> None:
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)
