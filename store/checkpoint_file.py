"""Reading and atomically replacing the ``checkpoint`` file (format: store.checkpoint).

Rules: replace = write a temp file, fsync it, rename over, fsync the directory, so a crash
leaves either the old or the new checkpoint, never a mix; a missing or unreadable file reads
as None and recovery replays the whole log.  ``CheckpointFile`` is the store's one checkpoint,
written by the event loop (start, truncation, shutdown) and by the flush thread: one writer at
a time through the one temporary file, and every change of the last checkpoint (the confirm
offset's too) under the same lock, so no writer undoes another's newer field.
"""
from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable

from store.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from store.segmented_file import fsync_directory


def read_checkpoint(path: Path) -> Checkpoint | None:
    try:
        return decode_checkpoint(path.read_bytes())
    except FileNotFoundError:
        return None


def write_checkpoint(path: Path, point: Checkpoint) -> None:
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, encode_checkpoint(point))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    fsync_directory(path.parent)


class CheckpointFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.last = Checkpoint()   # what the next write starts from (replaced whole, under the lock)
        self._lock = threading.Lock()

    def read(self) -> Checkpoint | None:
        return read_checkpoint(self.path)

    def adopt(self, point: Checkpoint) -> None:
        with self._lock:
            self.last = point

    def set_confirm(self, offset: int) -> None:
        with self._lock:
            self.last = replace(self.last, confirm_phy_offset=offset)

    def write(self, now_ms: int, log_flushed: int, queues_flushed: int, clean: bool,
              still_true: Callable[[], bool] = lambda: True) -> bool:
        """Write the flushed offsets (queues' at most the log's) unless ``still_true()`` is False
        once this writer's turn comes; True when written."""
        with self._lock:
            if not still_true():
                return False
            self.last = Checkpoint(
                physic_msg_timestamp_ms=now_ms, logics_msg_timestamp_ms=now_ms,
                master_flushed_offset=self.last.master_flushed_offset, confirm_phy_offset=self.last.confirm_phy_offset,
                commit_log_flushed_offset=log_flushed, consume_queue_flushed_offset=min(queues_flushed, log_flushed),
                clean_shutdown=clean)
            write_checkpoint(self.path, self.last)
            return True
