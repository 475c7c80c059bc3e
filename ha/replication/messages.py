"""The replication protocol's messages as frozen values (reference 4.7's frames, without bytes).

Rules: these are what the cores consume and produce; the gRPC driver converts them to and
from ``proto/ha.proto`` and validates the peer's values (non-negative offsets) at that edge.
A transfer batch lies inside one epoch: ``epoch_start_offset <= start_offset`` and the payload
ends at or before the epoch's end.  An empty payload is a heartbeat.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlaveHandshake:
    slave_id: int
    sync_from_last_file: bool = False
    async_learner: bool = False


@dataclass(frozen=True)
class SlaveAck:
    max_offset: int


@dataclass(frozen=True)
class MasterHandshake:
    epochs: tuple[tuple[int, int], ...]   # (epoch, start_offset), oldest first
    max_offset: int
    min_offset: int
    last_file_start: int                  # start of the master's last commit-log file


@dataclass(frozen=True)
class TransferBatch:
    start_offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    payload: bytes = b""

    @property
    def end_offset(self) -> int:
        return self.start_offset + len(self.payload)
