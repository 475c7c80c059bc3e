"""A broker's simulated disk: the commit log (written vs durable), the epoch file, the checkpoint.

Rules (the durability model of store/, under power loss rather than kill -9):

* ``log`` holds every byte written; ``durable`` is how much of it an fdatasync covered.  A
  flush makes everything written durable, unless the disk is slow (then it may not run).
* The epoch file and the truncation are durable when written (fsync + rename, ftruncate +
  fsync).  The checkpoint's confirm offset is durable when set (a lower bound in reality).
* A kill -9 keeps every byte written (the page cache survives the process); a power loss
  keeps the durable bytes and a random prefix of the rest, maybe with one byte corrupted (a
  torn write); recovery cuts at the last whole valid record and reconciles the
  epoch history with the log (``EpochHistory.within``), as store.recovery and EpochLog do.
"""
from __future__ import annotations

import random

from ha.epochs import EpochHistory
from tests.support.group_sim import records


class SimDisk:
    def __init__(self) -> None:
        self.log = bytearray()
        self.durable = 0
        self.epochs = EpochHistory()
        self.confirm = 0
        self.slow = False

    @property
    def end(self) -> int:
        return len(self.log)

    def append(self, data: bytes) -> int:
        self.log += data
        return len(self.log)

    def flush(self, rng: random.Random) -> bool:
        """fdatasync; False when a slow disk did not get to it this step."""
        if self.slow and rng.random() < 0.8:
            return False
        self.durable = len(self.log)
        return True

    def truncate(self, offset: int) -> None:
        assert offset <= len(self.log), (offset, len(self.log))
        del self.log[offset:]
        self.durable = min(self.durable, offset)
        self.epochs = self.epochs.within(0, offset)

    def crash(self, rng: random.Random, power_loss: bool) -> None:
        """kill -9 keeps every written byte (the page cache survives); a power loss keeps the
        durable ones and a torn part of the rest."""
        if not power_loss:
            self.recover()
            return
        kept = rng.randint(self.durable, len(self.log))
        del self.log[kept:]
        if kept > self.durable and rng.random() < 0.3:
            position = rng.randrange(self.durable, kept)
            self.log[position] ^= 0xFF
        self.recover()

    def recover(self) -> None:
        end = records.valid_end(self.log)
        del self.log[end:]
        self.durable = end
        self.epochs = self.epochs.within(0, end)
