"""The store's exceptions: misuse or an operational failure the caller must handle.

Rules: every failure a caller can see is a subclass of :class:`StoreError` with a ``reason``
(:class:`StoreErrorReason`) so the broker maps it to a status in one place; corruption found
on disk is never an exception to a reader (corrupt records are cut at recovery, not served).
"""
from __future__ import annotations

from enum import Enum


class StoreErrorReason(str, Enum):
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"
    BATCH_TOO_LARGE = "BATCH_TOO_LARGE"
    STORE_CLOSED = "STORE_CLOSED"
    DISK_FULL = "DISK_FULL"
    BAD_REPLICATION_DATA = "BAD_REPLICATION_DATA"
    BAD_OFFSET = "BAD_OFFSET"
    IO_ERROR = "IO_ERROR"
    NOT_WRITABLE = "NOT_WRITABLE"


class StoreError(Exception):
    reason: StoreErrorReason = StoreErrorReason.IO_ERROR

    def __init__(self, message: str):
        super().__init__(f"{self.reason.value}: {message}")
        self.message = message


class NotWritable(StoreError):
    """Local puts are refused: this replica copies its log from a master (or has no role)."""
    reason = StoreErrorReason.NOT_WRITABLE


class FlushTimeout(StoreError):
    reason = StoreErrorReason.FLUSH_DISK_TIMEOUT


class MessageTooLarge(StoreError):
    reason = StoreErrorReason.MESSAGE_TOO_LARGE


class BatchTooLarge(StoreError):
    reason = StoreErrorReason.BATCH_TOO_LARGE


class StoreClosed(StoreError):
    reason = StoreErrorReason.STORE_CLOSED


class DiskFull(StoreError):
    reason = StoreErrorReason.DISK_FULL


class BadReplicationData(StoreError):
    """append_raw got bytes that are not whole, valid records at the expected offset."""
    reason = StoreErrorReason.BAD_REPLICATION_DATA


class BadOffset(StoreError):
    """An offset outside the log was asked for (truncate past the end, read_raw below min)."""
    reason = StoreErrorReason.BAD_OFFSET


class StoreIOError(StoreError):
    reason = StoreErrorReason.IO_ERROR
