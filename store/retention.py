"""Retention: which commit-log segments to delete, decided by a pure function.

Rules:

* Never the active (last) segment, never one holding bytes not yet flushed.
* A segment expires when its last write is older than ``fileReservedTime``.  Its last write
  is the store time of the next segment's first record (the next segment was started right
  after this one filled), or the file's mtime when that is unreadable.
* While disk usage is at or above ``diskMaxUsedSpaceRatio`` the oldest segments go too, even
  if young.  Deletion is oldest first and contiguous (the log's min only moves forward), at
  most ``deleteFileNum`` per run.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from store.config import StoreConfig
from store.record import STORE_TS_POSITION


@dataclass(frozen=True)
class SegmentAge:
    start: int
    end: int  # start + segment size
    last_write_ms: int


def choose(segments: list[SegmentAge], *, now_ms: int, config: StoreConfig, disk_used_percent: float) -> list[int]:
    """Starts of the segments to delete, oldest first (``segments`` excludes the active one)."""
    reserved_ms = config.file_reserved_time_hours * 3600 * 1000
    pressure = disk_used_percent >= config.disk_max_used_space_ratio
    doomed = []
    for segment in segments:
        if len(doomed) >= config.delete_files_batch_max:
            break
        if pressure or now_ms - segment.last_write_ms >= reserved_ms:
            doomed.append(segment.start)
            continue
        break
    return doomed


def describe_segments(log, flushed_offset: int) -> list[SegmentAge]:
    """Driver side: the deletable candidates of ``log`` (a CommitLog) with their ages."""
    starts = log.files.starts()
    found = []
    for start, following in zip(starts, starts[1:]):
        end = start + log.segment_size
        if end > flushed_offset:
            break
        data = log.files.read(following + STORE_TS_POSITION, 8)
        if len(data) == 8:
            last_write = int.from_bytes(data, "big", signed=True)
        else:
            last_write = int(os.stat(log.files.directory / f"{start:020d}").st_mtime * 1000)
        found.append(SegmentAge(start, end, last_write))
    return found


def disk_used_percent(path: Path) -> float:
    stats = os.statvfs(path)
    total = stats.f_blocks * stats.f_frsize
    free = stats.f_bavail * stats.f_frsize
    return 100.0 * (total - free) / total if total else 0.0
