"""The epoch history of one store, kept on disk next to its commit log (RIP-44, reference 7).

Rules:

* The history in memory is always the one on disk: every change goes through
  :meth:`EpochLog.replace`, which writes the file (fsynced, with its ``.bak``) before it
  returns, so nothing that depends on an epoch entry (a slave's ack, a master's first
  record of a new epoch) can leave before the entry is durable.
* Recovery and retention reconcile the history with the log's ``[min, max]``: entries that
  start beyond the log's end are dropped, entries that end at or before its start are
  forgotten (:meth:`ha.epochs.EpochHistory.within`).
* A master opens an epoch with :meth:`start_epoch` before its first write in that epoch.
"""
from __future__ import annotations

from pathlib import Path

from ha.epochs import EpochHistory
from store.epoch_file import FILE_NAME, read_epoch_file, write_epoch_file


class EpochLog:
    def __init__(self, root: Path):
        self.path = Path(root) / FILE_NAME
        self.history = read_epoch_file(self.path)

    def replace(self, history: EpochHistory) -> bool:
        """Make ``history`` the durable history; returns whether anything changed."""
        if history == self.history:
            return False
        write_epoch_file(self.path, history)
        self.history = history
        return True

    def reconcile(self, min_offset: int, max_offset: int) -> bool:
        return self.replace(self.history.within(min_offset, max_offset))

    def start_epoch(self, epoch: int, start_offset: int) -> bool:
        """Open ``epoch`` at ``start_offset`` unless the history already has it (or a newer one)."""
        if self.history.last_epoch >= epoch:
            return False
        return self.replace(self.history.append(epoch, start_offset))
