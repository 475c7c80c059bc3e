"""An acting slave's pop journal: its pop records, durable, outside its commit log.

Why: on a master every pop decision (receive, ack, invisibility change) is a record in the
commit log before it is answered.  An acting slave must not write its own log (it stays a copy
of its master's), yet an answered ack must survive a crash of the slave as on a master.

Rules:
- :meth:`PopJournal.append` writes the encoded records (``scheduler.pop.records``) as one
  frame -- length, CRC32, body -- and fsyncs before it returns; the caller answers after.
- :meth:`PopJournal.replay` returns every whole frame's records in order and stops at the
  first torn or corrupt frame (a crash mid-append): that frame was never answered.  Pop
  records apply idempotently, so replaying frames a snapshot already holds is harmless.
- :meth:`PopJournal.clear` empties it once the pop state that holds its records is written
  (the slave stopped acting and handed its state over).
"""
from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Sequence

from scheduler.pop.records import Record, decode_records, encode_records

_HEADER = struct.Struct(">II")  # body length, CRC32 of the body
MAX_FRAME_BYTES = 64 << 20


class PopJournal:
    def __init__(self, path: Path):
        self.path = path
        self.appended = 0  # frames appended by this process

    def append(self, records: Sequence[Record]) -> None:
        frames = b""
        for body in encode_records(records):
            assert len(body) <= MAX_FRAME_BYTES
            frames += _HEADER.pack(len(body), zlib.crc32(body)) + body
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, frames)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        self.appended += 1

    def replay(self) -> list[Record]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        records: list[Record] = []
        position = 0
        while position + _HEADER.size <= len(data):
            length, crc = _HEADER.unpack_from(data, position)
            body = data[position + _HEADER.size:position + _HEADER.size + length]
            if length > MAX_FRAME_BYTES or len(body) != length or zlib.crc32(body) != crc:
                break
            records += decode_records(body)
            position += _HEADER.size + length
        return records

    def clear(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
