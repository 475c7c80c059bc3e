"""Values the store returns: the outcome of a get and the report of a recovery.

Rules: frozen dataclasses, no behaviour; ``GetStatus`` names every way a get can come back
so the broker answers without inspecting lists.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from metadata.message import StoredMessage


class GetStatus(str, Enum):
    FOUND = "FOUND"
    NO_MATCHED = "NO_MATCHED"  # entries were read but none passed the tag filter
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"  # offset < min: next_offset is min
    OFFSET_OVERFLOW = "OFFSET_OVERFLOW"  # offset >= max (max is the next offset written)
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"  # the queue is empty (or unknown)


@dataclass(frozen=True)
class GetResult:
    messages: list[StoredMessage]
    next_offset: int
    min_offset: int
    max_offset: int
    status: GetStatus


@dataclass(frozen=True)
class RecoveryReport:
    commit_log_min_offset: int
    commit_log_max_offset: int  # end of the last valid record after recovery
    truncated_bytes: int  # bytes of torn or corrupt tail cut from the commit log
    records_replayed: int  # records re-indexed into consume queues
    consume_queue_entries_cut: int  # CQ entries dropped because they pointed past the log end
    queues: int  # number of (topic, queue) consume queues after recovery
    clean_shutdown: bool
    notes: tuple[str, ...] = field(default=())
