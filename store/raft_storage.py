"""RaftStorage: the durable side of a Raft node, one append-only file of CRC'd records.

Rules:
- save() returns only after an fsync: term, vote and log are durable before the
  driver sends the messages that depend on them.
- Record = u32 length | u32 crc32(payload) | payload; payload = kind byte + body.
  An ENTRY record at index i replaces every entry from i on (suffix truncation);
  a SNAPSHOT record drops the entries it covers, and drops the whole log when the
  log does not contain the snapshot's last entry (a leader's snapshot replaced it).
- load() replays the file. A torn or corrupt *tail* (a partial record, or a bad
  CRC with nothing valid after it) is cut off: that write never returned, so
  nothing depended on it. A bad record followed by valid ones is corruption of
  acknowledged data and raises CorruptRaftLog rather than silently losing votes.
- When the file holds more than `rewrite_after_records` dead records (after a
  snapshot, or many hard-state updates) it is rewritten to a temporary file,
  fsynced and atomically renamed; compaction never loses data on a crash.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from ha.raft.types import Entry, HardState, Ready, RecoveredState, Snapshot

_HEADER = struct.Struct("<II")
_HARD_STATE = 1
_ENTRY = 2
_SNAPSHOT = 3
_NO_VOTE = -1
_FILE_NAME = "raft.log"


class CorruptRaftLog(Exception):
    """A record in the middle of the Raft log failed its CRC: acknowledged data is damaged."""


@dataclass(frozen=True)
class StorageConfig:
    rewrite_after_records: int = 10_000  # dead records tolerated before the file is rewritten
    max_record_bytes: int = 256 * 1024 * 1024  # a larger length field is garbage


class _State:
    def __init__(self) -> None:
        self.hard_state = HardState(0, None, 0)
        self.snapshot: Snapshot | None = None
        self.entries: list[Entry] = []

    def apply(self, kind: int, body: bytes) -> None:
        if kind == _HARD_STATE:
            term, vote, commit = struct.unpack("<qqq", body)
            self.hard_state = HardState(term, None if vote == _NO_VOTE else vote, commit)
        elif kind == _ENTRY:
            self.append(_decode_entry(body))
        elif kind == _SNAPSHOT:
            self.install(_decode_snapshot(body))
        else:
            raise CorruptRaftLog(f"unknown record kind {kind}")

    def append(self, entry: Entry) -> None:
        first = self.entries[0].index if self.entries else entry.index
        del self.entries[max(entry.index - first, 0):]
        expected = self.entries[-1].index + 1 if self.entries else entry.index
        if entry.index == expected:
            self.entries.append(entry)

    def install(self, snapshot: Snapshot) -> None:
        if self.snapshot is not None and snapshot.index <= self.snapshot.index:
            return
        keep = any(e.index == snapshot.index and e.term == snapshot.term for e in self.entries)
        self.entries = [e for e in self.entries if e.index > snapshot.index] if keep else []
        self.snapshot = snapshot

    def live_records(self) -> int:
        return 1 + (self.snapshot is not None) + len(self.entries)


def _encode_entry(entry: Entry) -> bytes:
    return struct.pack("<qq", entry.term, entry.index) + entry.data


def _decode_entry(body: bytes) -> Entry:
    term, index = struct.unpack_from("<qq", body)
    return Entry(term, index, body[16:])


def _encode_snapshot(snapshot: Snapshot) -> bytes:
    head = struct.pack("<qqI", snapshot.index, snapshot.term, len(snapshot.peers))
    peers = struct.pack(f"<{len(snapshot.peers)}q", *snapshot.peers)
    return head + peers + snapshot.data


def _decode_snapshot(body: bytes) -> Snapshot:
    index, term, count = struct.unpack_from("<qqI", body)
    peers = struct.unpack_from(f"<{count}q", body, 20)
    return Snapshot(index, term, body[20 + 8 * count:], tuple(peers))


def _encode_hard_state(hard_state: HardState) -> bytes:
    vote = _NO_VOTE if hard_state.vote is None else hard_state.vote
    return struct.pack("<qqq", hard_state.term, vote, hard_state.commit)


def _record(kind: int, body: bytes) -> bytes:
    payload = bytes([kind]) + body
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def _read_record(data: bytes, offset: int, limit: int) -> tuple[int, bytes] | None:
    """(next offset, payload) of a valid record at offset, or None."""
    if offset + _HEADER.size > len(data):
        return None
    length, crc = _HEADER.unpack_from(data, offset)
    end = offset + _HEADER.size + length
    if length == 0 or length > limit or end > len(data):
        return None
    payload = data[offset + _HEADER.size:end]
    if zlib.crc32(payload) != crc:
        return None
    return end, payload


class RaftStorage:
    def __init__(self, path: Path, config: StorageConfig | None = None) -> None:
        self.path = Path(path)
        self.config = config or StorageConfig()
        self.path.mkdir(parents=True, exist_ok=True)
        self.file_path = self.path / _FILE_NAME
        self._state = _State()
        self._records = 0
        self.cut_bytes = 0  # how much torn tail the last load() removed
        self._loaded = False

    def load(self) -> RecoveredState:
        """Recover the durable state, cutting a torn tail; raises CorruptRaftLog on mid-file damage."""
        data = self.file_path.read_bytes() if self.file_path.exists() else b""
        state, offset, records = _State(), 0, 0
        while offset < len(data):
            parsed = _read_record(data, offset, self.config.max_record_bytes)
            if parsed is None:
                self._check_tail(data, offset)
                break
            offset, payload = parsed
            state.apply(payload[0], payload[1:])
            records += 1
        self.cut_bytes = len(data) - offset
        if self.cut_bytes:
            with open(self.file_path, "r+b") as handle:
                handle.truncate(offset)
                handle.flush()
                os.fsync(handle.fileno())
        self._state, self._records = state, records
        self._loaded = True
        return self.recovered()

    def _check_tail(self, data: bytes, offset: int) -> None:
        """A bad record is a torn tail unless a valid record follows it."""
        if offset + _HEADER.size > len(data):
            return
        length, _ = _HEADER.unpack_from(data, offset)
        after = offset + _HEADER.size + length
        if 0 < length <= self.config.max_record_bytes and after < len(data) \
                and _read_record(data, after, self.config.max_record_bytes) is not None:
            raise CorruptRaftLog(f"{self.file_path}: bad record at byte {offset} before valid ones")

    def recovered(self) -> RecoveredState:
        state = self._state
        return RecoveredState(state.hard_state, state.snapshot, tuple(state.entries))

    def save(self, hard_state: HardState | None, entries: tuple[Entry, ...],
             snapshot: Snapshot | None, compaction: Snapshot | None = None) -> None:
        """Durably record one Ready's worth of state; returns after fsync."""
        assert self._loaded, "load() before save(): saving blind could rewrite away the log"
        chunks: list[bytes] = []
        for snap in (snapshot, compaction):
            if snap is not None:
                self._state.install(snap)
                chunks.append(_record(_SNAPSHOT, _encode_snapshot(snap)))
        for entry in entries:
            self._state.append(entry)
            chunks.append(_record(_ENTRY, _encode_entry(entry)))
        if hard_state is not None:
            self._state.hard_state = hard_state
            chunks.append(_record(_HARD_STATE, _encode_hard_state(hard_state)))
        if not chunks:
            return
        self._records += len(chunks)
        if self._records - self._state.live_records() > self.config.rewrite_after_records \
                or (snapshot or compaction) is not None:
            self._rewrite()
            return
        with open(self.file_path, "ab") as handle:
            handle.write(b"".join(chunks))
            handle.flush()
            os.fsync(handle.fileno())

    def save_ready(self, ready: Ready) -> None:
        """save() everything a Ready asks to persist, compaction included."""
        self.save(ready.hard_state, ready.entries, ready.snapshot, ready.compaction)

    def _rewrite(self) -> None:
        state = self._state
        chunks = [_record(_HARD_STATE, _encode_hard_state(state.hard_state))]
        if state.snapshot is not None:
            chunks.append(_record(_SNAPSHOT, _encode_snapshot(state.snapshot)))
        chunks.extend(_record(_ENTRY, _encode_entry(e)) for e in state.entries)
        temporary = self.file_path.with_suffix(".tmp")
        with open(temporary, "wb") as handle:
            handle.write(b"".join(chunks))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.file_path)
        directory = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        self._records = len(chunks)
