"""The ``checkpoint`` file's content: RocketMQ's layout plus our recovery offsets, no I/O.

Rules: 4 KiB, big-endian longs at RocketMQ's positions (0 physicMsgTimestamp,
8 logicsMsgTimestamp, 16 indexMsgTimestamp, 24 masterFlushedOffset, 32 confirmPhyOffset),
then ours: 40 commit_log_flushed_offset (every commit-log byte below it was fdatasynced),
48 consume_queue_flushed_offset (every consume-queue entry for a record below it was
fdatasynced), 56 clean_shutdown (1 or 0), and at 64 a CRC32 of bytes [0, 64).  A file that
fails its CRC is treated as absent, which makes recovery replay the whole log: slower, never
wrong.  The file is replaced atomically (write temp, fsync, rename, fsync directory).
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

CHECKPOINT_SIZE = 4096
_LONGS = struct.Struct(">8q")
_CRC = struct.Struct(">I")


@dataclass(frozen=True)
class Checkpoint:
    physic_msg_timestamp_ms: int = 0
    logics_msg_timestamp_ms: int = 0
    index_msg_timestamp_ms: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0
    commit_log_flushed_offset: int = 0
    consume_queue_flushed_offset: int = 0
    clean_shutdown: bool = False


def encode_checkpoint(point: Checkpoint) -> bytes:
    head = _LONGS.pack(point.physic_msg_timestamp_ms, point.logics_msg_timestamp_ms,
                       point.index_msg_timestamp_ms, point.master_flushed_offset,
                       point.confirm_phy_offset, point.commit_log_flushed_offset,
                       point.consume_queue_flushed_offset, int(point.clean_shutdown))
    data = head + _CRC.pack(zlib.crc32(head))
    return data + bytes(CHECKPOINT_SIZE - len(data))


def decode_checkpoint(data: bytes) -> Checkpoint | None:
    """The checkpoint, or None if ``data`` is short or fails its CRC."""
    if len(data) < _LONGS.size + _CRC.size:
        return None
    head = data[:_LONGS.size]
    if _CRC.unpack_from(data, _LONGS.size)[0] != zlib.crc32(head):
        return None
    values = _LONGS.unpack(head)
    if min(values) < 0 or values[7] not in (0, 1):
        return None
    return Checkpoint(*values[:7], clean_shutdown=bool(values[7]))
