"""Consumer offsets and their DataVersion, as ``config/consumerOffset.json`` carries them.

Rules (reference section 3, and the lesson of upstream #9711):
- :meth:`OffsetKeeper.commit` counts commits in a per-process counter (it restarts at 0);
  every ``consumerOffsetUpdateVersionStep``-th commit bumps the DataVersion.
- :meth:`OffsetKeeper.table_to_persist` and :meth:`OffsetKeeper.versioned_table` (the
  copy a replica hands to its peers) also bump the DataVersion when offsets changed since the
  last bump, so a replica's DataVersion always moves when its offsets move and two copies
  with one DataVersion hold the same offsets.  ``table_to_persist`` returns None when
  nothing changed since the last write (no write needed); the table is immutable, so its
  document and text can be made later, in a snapshot's worker thread.
- :meth:`OffsetKeeper.adopt` takes a peer's table with its DataVersion as it is (the caller
  decides and writes the file first); the adopted table counts as written.
- :meth:`OffsetKeeper.write` sets offsets with the DataVersion an admin write decided
  (``metadata.offset_write``); the table must then be written before anyone relies on it.
- ``stateVersion`` stays as loaded, except that a slave that starts acting opens the next one
  and a controller-mode master opens its epoch (:meth:`OffsetKeeper.open_state_version`).
Pure: time is an argument, the driver does the file write.
"""
from __future__ import annotations

from typing import Mapping

from metadata.consumer_offsets import ConsumerOffsetTable
from metadata.data_version import DataVersion, UpdateStep


class OffsetKeeper:
    def __init__(self, version_step: int, table: ConsumerOffsetTable | None = None):
        self.step = UpdateStep(version_step)
        self._table = table if table is not None else ConsumerOffsetTable()
        # commits not yet folded into the frozen table (folding copies it: once per read, not per ack)
        self._pending: dict[tuple[str, str, int], int] = {}
        self._pending_version: DataVersion | None = None
        self._dirty = False  # changed since the last write
        self.taken = 0  # tables handed out by table_to_persist: a write of this keeper's own is on its way
        self._unversioned = False  # changed since the last DataVersion bump

    @property
    def table(self) -> ConsumerOffsetTable:
        if self._pending:
            self._table = self._table.with_offsets(self._pending, self._pending_version or self._table.data_version)
            self._pending, self._pending_version = {}, None
        return self._table

    @table.setter
    def table(self, table: ConsumerOffsetTable) -> None:
        self._table = table
        self._pending, self._pending_version = {}, None

    @property
    def commits(self) -> int:
        return self.step.commits

    def commit(self, topic: str, group: str, queue_id: int, offset: int, now_ms: int) -> None:
        bump = self.step.commit()
        if bump:
            self._pending_version = (self._pending_version or self._table.data_version).next_version(now_ms)
        self._pending[(topic, group, queue_id)] = offset
        self._dirty = True
        self._unversioned = not bump

    def get(self, topic: str, group: str, queue_id: int) -> int | None:
        pending = self._pending.get((topic, group, queue_id))
        return pending if pending is not None else self._table.get(topic, group, queue_id)

    def drop_group(self, group: str, now_ms: int) -> None:
        self.table = self.table.without_group(group, self.table.data_version.next_version(now_ms))
        self._dirty = True
        self._unversioned = False

    def versioned_table(self, now_ms: int) -> ConsumerOffsetTable:
        """The table, its DataVersion bumped first if offsets moved since the last bump."""
        if self._unversioned:
            self.table = self.table.with_offsets({}, self.table.data_version.next_version(now_ms))
            self._unversioned = False
        return self.table

    def table_to_persist(self, now_ms: int) -> ConsumerOffsetTable | None:
        if not self._dirty:
            return None
        self._dirty = False
        self.taken += 1
        return self.versioned_table(now_ms)

    def write(self, offsets: Mapping[tuple[str, str, int], int], data_version: DataVersion) -> None:
        self.table = self.table.with_offsets(offsets, data_version)
        self._dirty = True
        self._unversioned = False

    def open_state_version(self, now_ms: int, state_version: int | None = None) -> bool:
        """Bump to ``state_version`` (None: ``stateVersion + 1``, a slave starting to act: its
        table is then newer than any its absent master wrote, so the master adopts it when it
        returns; controller mode: the new master's epoch).  False when already there."""
        table = self.table
        opened = table.data_version.opening(now_ms, state_version)
        if opened == table.data_version:
            return False
        self.table = table.with_offsets({}, opened)
        self._dirty = True
        self._unversioned = False
        return True

    def holds(self, table: ConsumerOffsetTable) -> bool:
        """Whether the offsets are ``table``'s still: no commit, write or adoption since."""
        return self._table is table and not self._pending

    def mark_unwritten(self) -> None:
        """The file may hold another table than this: the next snapshot writes this one."""
        self._dirty = True

    def adopt(self, table: ConsumerOffsetTable) -> None:
        self.table = table
        self._dirty = False
        self._unversioned = False
