"""The users and ACLs a container enforces, kept in one TOML file (``authorizationMetadataFile``).

A driver around :class:`metadata.acl_state.AclState` (the core decides; this module reads,
watches and writes the file).

Rules:
- The file is the truth.  At start it is read once; a file that does not parse is a
  ConfigError naming the line (the container does not start).  That is version 1.
- While running the file is watched (:meth:`AclStore.watch`, a periodic task every
  ``authorizationMetadataWatchIntervalMillis``): a change of modification time, size or
  inode is read again.  A good file becomes the next version; a bad one (or a missing one)
  keeps the last good version, logged once per change with the line and key at fault.
- Admin changes (:meth:`AclStore.change`) decide on the current state (re-read first, so a
  hand edit is never overwritten unread; a bad file on disk refuses the change until it is
  fixed), write the new state to the file atomically (a temporary file in the same folder,
  fsync, rename, fsync of the folder), and only then enforce it: persist, then apply.  Each
  applied event adds one to the version.  Changes are serialized by one lock.  The rewrite
  keeps users and ACLs, not comments.
- The version counts from 1 at each start; ``list-acl`` reports it.
- Lookups used on every call (:meth:`secret_key`, :meth:`disabled`, :attr:`state`) read
  one attribute: the state is replaced whole, never changed in place.
"""
from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from metadata.acl_files import dump_acl_toml, parse_acl_toml
from metadata.acl_model import UserStatus
from metadata.acl_state import AclCommandDecision, AclState, apply_all
from metadata.config import ConfigError

log = logging.getLogger(__name__)
MAX_FILE_BYTES = 4 << 20


class AclFileBad(Exception):
    """The file on disk does not parse; admin changes wait until it is fixed."""


@dataclass(frozen=True)
class FileStamp:
    mtime_ns: int
    size: int
    inode: int

    @staticmethod
    def of(path: Path) -> "FileStamp | None":
        try:
            stat = path.stat()
        except OSError:
            return None
        return FileStamp(stat.st_mtime_ns, stat.st_size, stat.st_ino)


def _read_text(path: Path) -> str:
    """The file's text; ConfigError naming the file when it cannot be read."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(str(path), None, "file not found") from None
    except OSError as exc:
        raise ConfigError(str(path), None, f"cannot be read ({exc.strerror})") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(str(path), None, f"larger than {MAX_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), None, f"not UTF-8 text (byte {exc.start})") from None


read_acl_text = _read_text  # for services.access.acl_replica (the seed file under a controller)


def _load(path: Path, version: int) -> AclState:
    return parse_acl_toml(_read_text(path), str(path), version=version)


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: a temporary file beside it, fsync, rename, fsync the folder.
    The file keeps its permission bits (0600 for a new one: it holds passwords)."""
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


class AclUnavailable(Exception):
    """Users and ACLs cannot be changed here now (the controller holding them cannot commit);
    the message starts with a named reason."""


class AclStore:
    """The enforced :class:`AclState` and the file it comes from."""
    replicated = False  # changes reach this container only
    origin = ""

    def __init__(self, path: Path, state: AclState, stamp: FileStamp | None):
        self.path = path
        self._state = state
        self._stamp = stamp
        self._bad: str | None = None  # why the file on disk (at _stamp) is not the state, if it is bad
        self._lock = asyncio.Lock()

    @staticmethod
    def open(path: Path) -> "AclStore":
        """Version 1 from the file; ConfigError (naming the line) when it does not parse."""
        stamp = FileStamp.of(path)
        state = _load(path, 1)
        log.info("%s: version 1: %d users, %d ACL entries", path, len(state.users), state.entry_count)
        return AclStore(path, state, stamp)

    # ---- read on every call

    @property
    def state(self) -> AclState:
        return self._state

    @property
    def source(self) -> str:
        return str(self.path)

    def secret_key(self, access_key: str) -> str | None:
        user = self._state.users.get(access_key)
        return None if user is None else user.password

    def disabled(self, access_key: str) -> bool:
        user = self._state.users.get(access_key)
        return user is not None and user.status is UserStatus.DISABLED

    # ---- the watch

    async def watch(self) -> bool:
        """The periodic task: True when a changed file became the enforced version."""
        async with self._lock:
            return await self._maybe_reload()

    async def _maybe_reload(self) -> bool:
        """Read the file again if it changed since it was last read (off the event loop: a
        large file takes a while to parse); True when a new version is enforced."""
        stamp = FileStamp.of(self.path)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            if stamp is None:
                raise ConfigError(str(self.path), None, "file not found")
            state = await asyncio.to_thread(_load, self.path, self._state.version + 1)
        except ConfigError as exc:
            self._bad = str(exc)
            log.error("ACL file changed but is not valid; version %d stays enforced: %s", self._state.version, exc)
            return False
        self._bad = None
        if state.users == self._state.users and state.acls == self._state.acls:
            return False  # touched, or written back as it was: the same state, the same version
        self._state = state
        log.info("%s reloaded: version %d: %d users, %d ACL entries", self.path, state.version, len(state.users),
                 state.entry_count)
        return True

    # ---- admin changes

    async def change(self, decide: Callable[[AclState], AclCommandDecision]) -> AclCommandDecision:
        """Decide on the current state; when accepted, write the file, then enforce the new state."""
        async with self._lock:
            await self._maybe_reload()
            if self._bad is not None:
                raise AclFileBad(f"the file on disk is not valid, fix it first (version {self._state.version} is "
                                 f"enforced): {self._bad}")
            decision = decide(self._state)
            if decision.rejected:
                return decision
            state = apply_all(self._state, decision.events)
            await asyncio.to_thread(write_atomically, self.path, dump_acl_toml(state))
            self._stamp = FileStamp.of(self.path)
            self._state = state
            log.info("%s: version %d: %s", self.path, state.version, decision.reply.detail)
            return decision
