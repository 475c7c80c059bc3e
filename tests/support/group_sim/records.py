"""The simulated commit log's records: ``size u32 | id u64 | crc u32 | filler``.

Rules: a record's size and filler follow from its id (deterministic); :func:`valid_end`
walks a log from 0 and returns the end of the last whole record whose CRC matches, which is
where recovery cuts a torn or corrupt tail (as store.commit_log's scan does).
"""
from __future__ import annotations

import struct
import zlib

HEADER = struct.Struct(">IQI")


def encode(message_id: int) -> bytes:
    filler = bytes((message_id * 7 + i) % 251 for i in range(message_id % 41))
    crc = zlib.crc32(struct.pack(">Q", message_id) + filler)
    return HEADER.pack(HEADER.size + len(filler), message_id, crc) + filler


def walk(data: bytes | bytearray, start: int = 0, end: int | None = None):
    """(offset, id, size) of each whole valid record from ``start`` (a record boundary)."""
    end = len(data) if end is None else end
    offset = start
    while offset + HEADER.size <= end:
        size, message_id, crc = HEADER.unpack_from(data, offset)
        if size < HEADER.size or offset + size > end:
            return
        filler = bytes(data[offset + HEADER.size:offset + size])
        if zlib.crc32(struct.pack(">Q", message_id) + filler) != crc:
            return
        yield offset, message_id, size
        offset += size


def valid_end(data: bytes | bytearray) -> int:
    end = 0
    for offset, _, size in walk(data):
        end = offset + size
    return end


def whole_records(data: bytes | bytearray, start: int, max_bytes: int) -> bytes:
    """Whole records from ``start`` up to ``max_bytes`` (at least one, as read_raw)."""
    end = start
    for offset, _, size in walk(data, start):
        if end > start and offset + size - start > max_bytes:
            break
        end = offset + size
    return bytes(data[start:end])


def ids_at(data: bytes | bytearray, end: int) -> dict[int, int]:
    """offset -> message id of every record below ``end``."""
    return {offset: message_id for offset, message_id, _ in walk(data, 0, end)}
