"""Reading and atomically replacing the ``checkpoint`` file (format: store.checkpoint).

Rules: replace = write a temp file, fsync it, rename over, fsync the directory, so a crash
leaves either the old or the new checkpoint, never a mix; a missing or unreadable file reads
as None and recovery replays the whole log.
"""
from __future__ import annotations

import os
from pathlib import Path

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
