"""The epoch file ``{storePathRootDir}/epochFileCheckpoint`` and its ``.bak`` (reference section 7).

Format (text, ``\\n`` line ends, byte-compatible with upstream's ``CheckpointFile``)::

    2              <- number of entries
    1190946436     <- CRC32 of the entry lines, each with its newline, & 0x7FFFFFFF (0: unchecked)
    1-0            <- epoch-startOffset, oldest first
    2-1570

Rules:

* Reading falls back to ``.bak`` when the file is missing, empty, unparsable, or its count or
  CRC does not match; if neither is good the history is empty (a fresh store).
* Writing keeps the previous good content as ``.bak`` (fsynced), then replaces the file
  atomically (temp file, fsync, rename, fsync directory), so a crash leaves the old or the new
  history and ``.bak`` always holds a complete one.
* An empty entry list is never written: the empty history is the absence of both files
  (``.bak`` is removed first so that a crash cannot revive a stale backup alone).
* End offsets are not stored; :class:`ha.epochs.EpochHistory` derives them.
"""
from __future__ import annotations

import os
import zlib
from pathlib import Path

from ha.epochs import EpochHistory
from store.segmented_file import fsync_directory

FILE_NAME = "epochFileCheckpoint"


def epoch_crc(entry_text: bytes) -> int:
    return zlib.crc32(entry_text) & 0x7FFFFFFF


def encode_epoch_file(pairs: tuple[tuple[int, int], ...]) -> bytes:
    assert pairs, "an empty epoch list is never written"
    entries = "".join(f"{epoch}-{start}\n" for epoch, start in pairs).encode("ascii")
    return f"{len(pairs)}\n{epoch_crc(entries)}\n".encode("ascii") + entries


def decode_epoch_file(data: bytes) -> tuple[tuple[int, int], ...] | None:
    """The ``(epoch, start)`` pairs, or None when the content is empty or fails its checks."""
    try:
        lines = data.decode("ascii").split("\n")
        count, crc = int(lines[0]), int(lines[1])
        entry_lines = [line for line in lines[2:] if line]
        if count != len(entry_lines) or count <= 0:
            return None
        if crc != 0 and crc != epoch_crc("".join(line + "\n" for line in entry_lines).encode("ascii")):
            return None
        pairs = tuple(_pair(line) for line in entry_lines)
    except (ValueError, IndexError, UnicodeDecodeError):
        return None
    return pairs if _ordered(pairs) else None


def _pair(line: str) -> tuple[int, int]:
    epoch, start = line.split("-")
    return int(epoch), int(start)


def _ordered(pairs: tuple[tuple[int, int], ...]) -> bool:
    if any(epoch < 0 or start < 0 for epoch, start in pairs):
        return False
    return all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(pairs, pairs[1:]))


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def read_epoch_file(path: Path) -> EpochHistory:
    for candidate in (path, backup_path(path)):
        try:
            pairs = decode_epoch_file(candidate.read_bytes())
        except FileNotFoundError:
            continue
        if pairs is not None:
            return EpochHistory.from_pairs(pairs)
    return EpochHistory()


def write_epoch_file(path: Path, history: EpochHistory) -> None:
    """Persist ``history`` durably; returns only after fsync (file and directory)."""
    backup = backup_path(path)
    if history.is_empty():
        for stale in (backup, path):
            stale.unlink(missing_ok=True)
        fsync_directory(path.parent)
        return
    try:
        previous = path.read_bytes()
    except FileNotFoundError:
        previous = None
    if previous is not None and decode_epoch_file(previous) is not None:
        _write_synced(backup, previous)
    temporary = path.with_name(path.name + ".tmp")
    _write_synced(temporary, encode_epoch_file(history.pairs()))
    os.replace(temporary, path)
    fsync_directory(path.parent)


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
