"""Configuration of the message store: one frozen dataclass, RocketMQ key names.

Rules: every limit of the store is a field here, with its unit and default documented in
its declaration; the container binds it from a config file with :func:`metadata.config.bind`
(keys are RocketMQ's: ``storePathRootDir``, ``mappedFileSizeCommitLog``, ...).  Values are
checked once, here, with errors that name the key; the store trusts them afterwards.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from metadata.config import ConfigError, config_field

CQ_ENTRY_SIZE = 20  # bytes of one consume-queue entry: commit offset 8, size 4, tag code 8


class FlushDiskType(str, Enum):
    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


@dataclass(frozen=True)
class StoreConfig:
    store_path_root_dir: Path = config_field(
        "storePathRootDir", unit="path", doc="directory holding commitlog/, consumequeue/, checkpoint")
    mapped_file_size_commit_log: int = config_field(
        "mappedFileSizeCommitLog", 1 << 30, unit="bytes", minimum=4096,
        doc="size of one commit-log segment file; a record never spans two segments")
    mapped_file_size_consume_queue: int = config_field(
        "mappedFileSizeConsumeQueue", 300_000 * CQ_ENTRY_SIZE, unit="bytes", minimum=CQ_ENTRY_SIZE,
        doc="size of one consume-queue segment file, a multiple of the 20-byte entry")
    flush_disk_type: FlushDiskType = config_field(
        "flushDiskType", FlushDiskType.ASYNC_FLUSH, unit="enum",
        doc="SYNC_FLUSH acknowledges a put after fdatasync (group commit); ASYNC_FLUSH right after the write")
    flush_interval_commit_log_ms: int = config_field(
        "flushIntervalCommitLog", 500, unit="ms", minimum=1, doc="ASYNC_FLUSH: period of fdatasync")
    flush_interval_consume_queue_ms: int = config_field(
        "flushIntervalConsumeQueue", 1000, unit="ms", minimum=1,
        doc="period of consume-queue and checkpoint fdatasync (they are rebuilt from the log at recovery)")
    sync_flush_timeout_ms: int = config_field(
        "syncFlushTimeout", 5000, unit="ms", minimum=1,
        doc="SYNC_FLUSH: a put waits at most this for fdatasync, then fails with FLUSH_DISK_TIMEOUT")
    group_commit_window_us: int = config_field(
        "groupCommitWindowMicros", 2000, unit="us", minimum=0, maximum=100_000,
        doc="SYNC_FLUSH: the first put of a group commit waits this long for others to share its fdatasync, "
            "but only while three or more messages arrive together (one or two producers' single sends sync at "
            "once); 0: every group syncs at once")
    file_reserved_time_hours: float = config_field(
        "fileReservedTime", 72.0, unit="hours", minimum=0,
        doc="commit-log segments whose last write is older than this are deleted")
    disk_max_used_space_ratio: int = config_field(
        "diskMaxUsedSpaceRatio", 75, unit="percent", minimum=1, maximum=99,
        doc="above this disk usage the oldest segments are deleted even if young")
    disk_space_warning_level_ratio: int = config_field(
        "diskSpaceWarningLevelRatio", 90, unit="percent", minimum=1, maximum=100,
        doc="at or above this disk usage puts are refused (DISK_FULL) until retention frees space")
    max_message_size: int = config_field(
        "maxMessageSize", 4 * 1024 * 1024, unit="bytes", minimum=1,
        doc="largest encoded record accepted by a put (also bounded by the segment size)")
    max_batch_put: int = config_field(
        "maxBatchPut", 1024, unit="records", minimum=1, doc="most records in one put call")
    max_get_count: int = config_field(
        "maxTransferCountOnMessageInMemory", 32 * 1024, unit="records", minimum=1,
        doc="upper bound on max_count of one get")
    max_get_scan_entries: int = config_field(
        "maxGetScanEntries", 16_000, unit="entries", minimum=1,
        doc="most consume-queue entries one get examines (tag filtering skips entries)")
    delete_files_batch_max: int = config_field(
        "deleteFileNum", 10, unit="segments", minimum=1, doc="most commit-log segments deleted per clean_expired run")
    shared_storage: bool = config_field(
        "sharedStorage", False,
        doc="storePathRootDir is on storage other containers reach: the store is served by the container its "
            "ownership claims name (the first to open it claims it), and can be moved (docs/reassign.md)")

    def __post_init__(self) -> None:
        where = "store config"
        if self.mapped_file_size_consume_queue % CQ_ENTRY_SIZE:
            raise ConfigError(where, "mappedFileSizeConsumeQueue",
                              f"{self.mapped_file_size_consume_queue} is not a multiple of {CQ_ENTRY_SIZE}")
        if not isinstance(self.flush_disk_type, FlushDiskType):
            object.__setattr__(self, "flush_disk_type", FlushDiskType(self.flush_disk_type))
        object.__setattr__(self, "store_path_root_dir", Path(self.store_path_root_dir))
