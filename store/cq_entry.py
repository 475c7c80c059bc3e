"""Consume-queue entry format: 20 bytes, as RocketMQ's, with no file I/O.

Rules: big-endian ``commit_offset`` (i64), ``size`` (i32), ``tag_code`` (i64).  Entry ``n``
of a queue sits at byte ``n * 20`` of the queue's concatenated segment files.  An entry with
``size <= 0`` is a hole (zeros never written, or a cut entry) and is never served.  Entries
of one queue are written in queue-offset order, so their commit offsets only grow; binary
searches rely on it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

from metadata.frozen_values import quick_init
from store.config import CQ_ENTRY_SIZE

ENTRY = struct.Struct(">qiq")
assert ENTRY.size == CQ_ENTRY_SIZE


@quick_init
@dataclass(frozen=True)
class CqEntry:
    commit_offset: int
    size: int
    tag_code: int

    @property
    def is_hole(self) -> bool:
        return self.size <= 0

    @property
    def end(self) -> int:
        return self.commit_offset + self.size


def encode_entry(commit_offset: int, size: int, tag_code: int) -> bytes:
    return ENTRY.pack(commit_offset, size, tag_code)


def decode_entries(buf: bytes | memoryview) -> list[CqEntry]:
    """Every whole entry in ``buf`` (a trailing partial entry is ignored)."""
    whole = len(buf) - len(buf) % CQ_ENTRY_SIZE
    return [CqEntry(*fields) for fields in ENTRY.iter_unpack(memoryview(buf)[:whole])]


def first_index(count: int, predicate: Callable[[int], bool]) -> int:
    """The smallest index in ``[0, count)`` for which the monotone ``predicate`` holds, else ``count``."""
    low, high = 0, count
    while low < high:
        middle = (low + high) // 2
        if predicate(middle):
            high = middle
        else:
            low = middle + 1
    return low
