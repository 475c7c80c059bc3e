"""The master's transfer plan: where the next batch starts, how long it may be, which epoch.

Rules: a batch never crosses an epoch boundary (it is clipped at the epoch's end, and the
next batch carries the next epoch); it is at most ``batch_size_bytes``; it starts at the
slave's position, which must lie in ``[min_offset, max_offset]``.  The driver reads whole
records up to the planned length (``MessageStore.read_raw``), so a batch may be shorter.
"""
from __future__ import annotations

from dataclasses import dataclass

from ha.epochs import EpochHistory


@dataclass(frozen=True)
class BatchPlan:
    start_offset: int
    max_bytes: int          # 0: nothing to send (a heartbeat)
    epoch: int
    epoch_start_offset: int


def plan_batch(epochs: EpochHistory, position: int, max_offset: int, batch_size_bytes: int) -> BatchPlan | None:
    """The next batch from ``position``; None if no epoch covers it (an empty history)."""
    assert position <= max_offset, (position, max_offset)
    entry = epochs.entry_for(position)
    if entry is None:
        last = epochs.last
        if last is None or position < last.start_offset:
            return None
        entry = last
    end = max_offset if entry.end_offset is None else min(entry.end_offset, max_offset)
    return BatchPlan(position, max(0, min(batch_size_bytes, end - position)), entry.epoch, entry.start_offset)
