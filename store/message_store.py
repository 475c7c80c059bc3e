"""MessageStore: the commit log, its consume queues and checkpoint behind one facade.

(stub: being filled in)
"""
from __future__ import annotations

from typing import Callable, Sequence

from metadata.message import MessageDraft, StoredMessage
from store.config import FlushDiskType, StoreConfig
from store.errors import (BadOffset, BadReplicationData, BatchTooLarge, DiskFull, FlushTimeout,
                          MessageTooLarge, StoreClosed, StoreError)
from store.results import GetResult, GetStatus, RecoveryReport

__all__ = ["MessageStore", "StoreConfig", "FlushDiskType", "GetResult", "GetStatus", "RecoveryReport",
           "StoreError", "FlushTimeout", "MessageTooLarge", "BatchTooLarge", "StoreClosed", "DiskFull",
           "BadReplicationData", "BadOffset"]


class MessageStore:
    def __init__(self, config: StoreConfig, now_ms: Callable[[], int]):
        self.config = config
        self._now_ms = now_ms

    def start(self) -> RecoveryReport:
        raise NotImplementedError

    async def put(self, drafts: Sequence[MessageDraft]) -> list[StoredMessage]:
        raise NotImplementedError

    def get(self, topic: str, queue_id: int, offset: int, max_count: int, max_bytes: int = 4 << 20,
            tag_codes: frozenset[int] | None = None) -> GetResult:
        raise NotImplementedError

    def read_at(self, commit_offset: int) -> StoredMessage | None:
        raise NotImplementedError

    def min_offset(self, topic: str, queue_id: int) -> int:
        raise NotImplementedError

    def max_offset(self, topic: str, queue_id: int) -> int:
        raise NotImplementedError

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        raise NotImplementedError

    def earliest_store_time(self, topic: str, queue_id: int) -> int | None:
        raise NotImplementedError

    def queues(self) -> dict[str, list[int]]:
        raise NotImplementedError

    def delete_topic(self, topic: str) -> None:
        raise NotImplementedError

    def clean_expired(self) -> int:
        raise NotImplementedError

    def add_append_listener(self, fn: Callable[[str, int, int], None]) -> None:
        raise NotImplementedError

    def disk_usage_bytes(self) -> int:
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError

    # replication hooks
    def read_raw(self, commit_offset: int, max_bytes: int) -> bytes:
        raise NotImplementedError

    def append_raw(self, commit_offset: int, data: bytes) -> None:
        raise NotImplementedError

    def truncate(self, commit_offset: int) -> None:
        raise NotImplementedError

    @property
    def commit_log_min_offset(self) -> int:
        raise NotImplementedError

    @property
    def commit_log_max_offset(self) -> int:
        raise NotImplementedError

    @property
    def flushed_offset(self) -> int:
        raise NotImplementedError
