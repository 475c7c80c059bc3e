"""Consumer offsets and their DataVersion, as ``config/consumerOffset.json`` carries them.

Rules (reference section 3, and the lesson of upstream #9711):
- :meth:`OffsetKeeper.commit` counts commits in a per-process counter (it restarts at 0);
  every ``consumerOffsetUpdateVersionStep``-th commit bumps the DataVersion.
- :meth:`OffsetKeeper.document_to_persist` and :meth:`OffsetKeeper.versioned_table` (the
  copy a replica hands to its peers) also bump the DataVersion when offsets changed since the
  last bump, so a replica's DataVersion always moves when its offsets move and two copies
  with one DataVersion hold the same offsets.  ``document_to_persist`` returns None when
  nothing changed since the last write (no write needed).
- :meth:`OffsetKeeper.adopt` takes a peer's table with its DataVersion as it is (the caller
  decides and writes the file first); the adopted table counts as written.
- ``stateVersion`` stays as loaded (0 until controller mode sets it).
Pure: time is an argument, the driver does the file write.
"""
from __future__ import annotations

from typing import Any

from metadata.consumer_offsets import ConsumerOffsetTable


class OffsetKeeper:
    def __init__(self, version_step: int, table: ConsumerOffsetTable | None = None):
        assert version_step >= 1
        self.version_step = version_step
        self.table = table if table is not None else ConsumerOffsetTable()
        self.commits = 0
        self._dirty = False  # changed since the last write
        self._unversioned = False  # changed since the last DataVersion bump

    def commit(self, topic: str, group: str, queue_id: int, offset: int, now_ms: int) -> None:
        self.commits += 1
        version = self.table.data_version
        bump = self.commits % self.version_step == 0
        if bump:
            version = version.next_version(now_ms)
        self.table = self.table.with_offsets({(topic, group, queue_id): offset}, version)
        self._dirty = True
        self._unversioned = not bump

    def get(self, topic: str, group: str, queue_id: int) -> int | None:
        return self.table.get(topic, group, queue_id)

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

    def document_to_persist(self, now_ms: int) -> dict[str, Any] | None:
        if not self._dirty:
            return None
        self._dirty = False
        return self.versioned_table(now_ms).to_document()

    def adopt(self, table: ConsumerOffsetTable) -> None:
        self.table = table
        self._dirty = False
        self._unversioned = False
