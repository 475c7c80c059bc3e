"""A logical byte space kept in fixed-size segment files named by their start offset.

Rules:

* Segment ``n`` covers ``[start, start + segment_size)`` and is the file named ``start``
  written as 20 digits (RocketMQ's naming).  Files grow as they are written; a write never
  crosses a segment boundary (callers arrange that).
* Zeros ahead (``zero_ahead`` bytes, the commit log's choice): :meth:`write` keeps the file
  written with zeros some way past its data, a chunk at a time.  An fdatasync after a write
  into bytes already written changes neither the file's size nor its blocks, so ext4 has no
  journal commit to make: on the reference VM 0.25 ms and ~100 us of CPU per sync instead
  of 0.65 ms and ~260 us for a growing file.  The file is then longer than its data; the
  reader of the space (the commit log's scan) tells data from the zeros that follow it.
* Creating, deleting and truncating a file fsyncs its directory, so a file that held
  acknowledged bytes cannot vanish after a crash.
* Ownership epochs (issue 26, store.ownership): a store on shared storage names the files an
  owner creates after a takeover by start and epoch (``<start>.e<epoch>``; epoch 0, the
  store's first owner, keeps the plain name).  Opened with a ``plan`` (store.ownership.plan),
  only the file of the epoch that owns each segment is opened, and it is read only up to its
  sealed end: what a fenced owner wrote afterwards is never read, and a file it made is
  never opened (:attr:`ignored`).  Without a plan every file must be plain (a store never
  moved); an epoch-named file then is refused, naming it.
* Plain ``os.pwrite``/``os.pread``/``os.fdatasync``.  Writes come from the event-loop thread;
  :meth:`sync` may run on the flush thread, and :func:`pwrite_all` on a file from
  :meth:`open_for_write` on another thread, whose caller keeps the file from being closed
  meanwhile.  A lock guards the table of open files against a concurrent sync, and is held
  during fdatasync so a file is never closed under it.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

NAME_DIGITS = 20


def segment_name(start: int, epoch: int = 0) -> str:
    return f"{start:0{NAME_DIGITS}d}" + (f".e{epoch}" if epoch else "")


def parse_segment_name(name: str) -> tuple[int, int] | None:
    """(start, epoch) of a segment file's name; None for any other file."""
    digits, dot, suffix = name.partition(".")
    if len(digits) != NAME_DIGITS or not digits.isdigit():
        return None
    if not dot:
        return int(digits), 0
    if suffix[:1] == "e" and suffix[1:].isdigit() and suffix[1:] != "0" and not suffix[1:].startswith("0"):
        return int(digits), int(suffix[1:])
    return None


def fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directories(path: Path) -> None:
    """``mkdir -p`` that fsyncs every parent whose entries changed."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        fsync_directory(directory.parent)


def pwrite_all(fd: int, position: int, data: bytes | memoryview) -> None:
    written = os.pwrite(fd, data, position)
    while written < len(data):  # pwrite on a regular file is short only on ENOSPC-like trouble
        more = os.pwrite(fd, memoryview(data)[written:], position + written)
        if more <= 0:
            raise OSError(f"short write (fd {fd}, {len(data) - written} of {len(data)} bytes left)")
        written += more


class SegmentedFile:
    def __init__(self, directory: Path, segment_size: int, epoch: int = 0, plan=None, only_epoch: bool = False):
        """``epoch``: the ownership epoch files created here are named with; ``plan``: a
        store.ownership.Plan saying which file of which epoch counts, up to where (None: a
        store never moved, every file plain); ``only_epoch``: open the files of ``epoch``
        alone, skipping the others (a consume queue's layer, store.consume_queue)."""
        self.directory = Path(directory)
        self.segment_size = segment_size
        self.epoch = epoch
        self._fds: dict[int, int] = {}
        self._names: dict[int, str] = {}
        self._ends: dict[int, int] = {}  # segment start -> sealed end (bytes past it belong to no one)
        self.ignored: list[str] = []     # files of a fenced owner, never opened
        self.zero_ahead = 0  # bytes of zeros kept written past the data (0: files grow as written)
        self._zeroed: dict[int, int] = {}  # segment start -> file bytes written so far (data or zeros)
        self._lock = threading.Lock()
        make_directories(self.directory)
        reads = None if plan is None else {(r.segment_start, r.epoch): r for r in plan.reads}
        for entry in sorted(self.directory.iterdir()):
            parsed = parse_segment_name(entry.name) if entry.is_file() else None
            if parsed is None:
                continue
            start, file_epoch = parsed
            if only_epoch and file_epoch != epoch:
                continue
            if start % segment_size:
                raise ValueError(f"{entry}: segment start {start} is not a multiple of {segment_size}; "
                                 f"was the segment size changed?")
            if reads is None and not only_epoch:
                if file_epoch:
                    raise ValueError(f"{entry}: a segment of ownership epoch {file_epoch} (a moved broker's store); "
                                     "it opens only with its ownership ledger")
            elif reads is not None and (start, file_epoch) not in reads:
                self.ignored.append(entry.name)
                continue
            elif reads is not None:
                high = reads[(start, file_epoch)].high
                if high is not None and high < start + segment_size:
                    self._ends[start] = high
            self._fds[start] = os.open(entry, os.O_RDWR)
            self._names[start] = entry.name

    # --- shape ---------------------------------------------------------------------------
    def starts(self) -> list[int]:
        return sorted(self._fds)

    def first_start(self) -> int | None:
        """The lowest segment's start (None: no segment); cheaper than ``starts()[0]`` (asked
        several times per replicated put)."""
        return min(self._fds) if self._fds else None

    def segment_start(self, offset: int) -> int:
        return offset - offset % self.segment_size

    def file_length(self, start: int) -> int:
        """The bytes of segment ``start`` that count: its file's length, up to a sealed end."""
        fd = self._fds.get(start)
        if fd is None:
            return 0
        size = os.fstat(fd).st_size
        sealed = self._ends.get(start)
        return size if sealed is None else min(size, sealed - start)

    def sealed_end(self, start: int) -> int | None:
        """Where segment ``start``'s bytes end for good (a fenced owner's), or None."""
        return self._ends.get(start)

    def end(self) -> int:
        """One past the last byte present in the last segment (0 when empty)."""
        starts = self.starts()
        return starts[-1] + self.file_length(starts[-1]) if starts else 0

    def total_bytes(self) -> int:
        return sum(self.file_length(start) for start in self.starts())

    # --- data ----------------------------------------------------------------------------
    def write(self, offset: int, data: bytes) -> None:
        fd, position = self.open_for_write(offset, len(data))
        pwrite_all(fd, position, data)
        if self.zero_ahead:
            self._zero_past(offset - position, fd, position + len(data))

    def _zero_past(self, start: int, fd: int, end: int) -> None:
        """Once data comes within half of ``zero_ahead`` of the zeroed end, write zeros up to
        ``zero_ahead`` past it (never past the segment).  A failure (a full disk) only costs
        the speed-up: the data write before it succeeded."""
        zeroed = self._zeroed.get(start)
        if zeroed is None:
            zeroed = os.fstat(fd).st_size
        zeroed = max(zeroed, end)
        if end + self.zero_ahead // 2 > zeroed:
            upto = min(self.segment_size, end + self.zero_ahead)
            try:
                pwrite_all(fd, zeroed, bytes(upto - zeroed))
                zeroed = upto
            except OSError:
                zeroed = os.fstat(fd).st_size
        self._zeroed[start] = zeroed

    def open_for_write(self, offset: int, length: int) -> tuple[int, int]:
        """(file descriptor, position in the file) where ``length`` bytes at ``offset`` go,
        creating the segment file if needed."""
        start = self.segment_start(offset)
        assert offset + length <= start + self.segment_size, "write crosses a segment boundary"
        assert start not in self._ends, f"segment {start} is sealed (another owner's): never written"
        fd = self._fds.get(start)
        if fd is None:
            fd = self._create(start)
        return fd, offset - start

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``offset``, never crossing into the next segment."""
        start = self.segment_start(offset)
        fd = self._fds.get(start)
        if fd is None:
            return b""
        length = min(length, self._ends.get(start, start + self.segment_size) - offset)
        return os.pread(fd, length, offset - start) if length > 0 else b""

    def sync(self, low: int, high: int) -> None:
        """fdatasync every segment holding bytes of ``[low, high)``."""
        if high <= low:
            return
        with self._lock:
            for start, fd in sorted(self._fds.items()):
                if start < high and start + self.segment_size > low:
                    os.fdatasync(fd)

    def sync_all(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.fdatasync(fd)

    # --- lifecycle -----------------------------------------------------------------------
    def _create(self, start: int) -> int:
        with self._lock:
            name = segment_name(start, self.epoch)
            fd = os.open(self.directory / name, os.O_RDWR | os.O_CREAT, 0o644)
            fsync_directory(self.directory)
            self._fds[start], self._names[start] = fd, name
            return fd

    def truncate(self, offset: int) -> None:
        """Cut the space to ``[.., offset)`` physically: shrink one file, delete later ones."""
        with self._lock:
            self._zeroed.clear()
            for start in sorted(self._fds, reverse=True):
                if start >= offset and not (start == offset and start == min(self._fds)):
                    os.close(self._fds.pop(start))
                    os.unlink(self.directory / self._names.pop(start))
                elif start + self.file_length_unlocked(start) > offset:
                    os.ftruncate(self._fds[start], offset - start)
                    os.fsync(self._fds[start])
            fsync_directory(self.directory)

    def file_length_unlocked(self, start: int) -> int:
        return os.fstat(self._fds[start]).st_size

    def delete_segment(self, start: int) -> None:
        with self._lock:
            fd = self._fds.pop(start, None)
            self._zeroed.pop(start, None)
            if fd is not None:
                os.close(fd)
                os.unlink(self.directory / self._names.pop(start))
                fsync_directory(self.directory)

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
            self._names.clear()
