"""An exclusive lock on a data directory, held for the life of the process that took it.

Rules:
- :func:`lock_directory` opens (creating it) ``<directory>/lock`` and takes
  ``flock(LOCK_EX | LOCK_NB)`` on it before anything in the directory is read: a broker
  store before recovery, a controller's Raft store before its log is loaded.  Then the file
  holds the holder's pid and what it is (one line, for the next process's refusal).
- A second process (or a second open in this one) gets :class:`DirectoryLocked`, whose
  message names the directory and the holder's pid; nothing is waited for.
- The kernel releases the lock when the process exits, however it exits (SIGKILL too), so a
  crashed holder never leaves a stale lock; the file itself stays (it is never deleted: a
  deleted file could be locked by two processes through two inodes).
- :meth:`DirectoryLock.release` is for a store closed while the process lives on (a broker
  removed at runtime); it is idempotent.

What it does not guarantee (docs/storage-lock.md): on a shared filesystem the lock is as good
as the filesystem's locking (NFSv4 leases can expire during a partition, ``nolock`` mounts
lock locally only), and it is never a fence: it does not stop a process that already holds
the directory open from writing after it lost the lock.
"""
from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

LOCK_FILE = "lock"
_HOLDER_MAX_BYTES = 256


class DirectoryLocked(Exception):
    """Another process holds the directory; the message is the one line a user sees."""

    def __init__(self, directory: Path, holder: str):
        super().__init__(f"{directory} is in use by {holder}: refusing to open it twice "
                         f"(two processes on one store corrupt it)")
        self.directory = directory
        self.holder = holder


class DirectoryLock:
    def __init__(self, directory: Path, fd: int):
        self.directory = directory
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None


def describe_holder(text: str) -> str:
    """What the lock file says about its holder, as a phrase: ``process 123 (broker-a-0)``."""
    words = text.strip().split(None, 1)
    if not words or not words[0].isdigit():
        return "another process (its pid is not recorded yet)"
    what = f" ({words[1][:100]})" if len(words) > 1 else ""
    return f"process {words[0]}{what}"


def lock_directory(directory: Path, what: str = "", name: str = LOCK_FILE) -> DirectoryLock:
    """Take the directory's lock (creating the directory); raise :class:`DirectoryLocked`.
    ``name``: the lock file (a store on shared storage locks one per owner: two containers
    may hold it, as a move needs, while one container never opens it twice)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as failure:
        holder = os.pread(fd, _HOLDER_MAX_BYTES, 0).decode("utf-8", "replace")
        os.close(fd)
        if failure.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise DirectoryLocked(directory, describe_holder(holder)) from None
        raise
    line = f"{os.getpid()} {what}".strip() + "\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, line.encode(), 0)
    return DirectoryLock(directory, fd)
