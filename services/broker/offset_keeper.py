"""Consumer offsets and their DataVersion, as ``config/consumerOffset.json`` carries them.

Rules (reference section 3, and the lesson of upstream #9711):
- :meth:`OffsetKeeper.commit` counts commits in a per-process counter (it restarts at 0);
  every ``consumerOffsetUpdateVersionStep``-th commit bumps the DataVersion.
- :meth:`OffsetKeeper.document_to_persist` also bumps the DataVersion when offsets changed
  since the last persist and no bump happened in between, so a replica's DataVersion always
  moves when its offsets move.  It returns None when nothing changed (no write needed).
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
        self._dirty = False
        self._bumped_since_persist = False

    def commit(self, topic: str, group: str, queue_id: int, offset: int, now_ms: int) -> None:
        self.commits += 1
        version = self.table.data_version
        if self.commits % self.version_step == 0:
            version = version.next_version(now_ms)
            self._bumped_since_persist = True
        self.table = self.table.with_offsets({(topic, group, queue_id): offset}, version)
        self._dirty = True

    def get(self, topic: str, group: str, queue_id: int) -> int | None:
        return self.table.get(topic, group, queue_id)

    def drop_group(self, group: str, now_ms: int) -> None:
        self.table = self.table.without_group(group, self.table.data_version.next_version(now_ms))
        self._dirty = True
        self._bumped_since_persist = True

    def document_to_persist(self, now_ms: int) -> dict[str, Any] | None:
        if not self._dirty:
            return None
        if not self._bumped_since_persist:
            self.table = self.table.with_offsets({}, self.table.data_version.next_version(now_ms))
        self._dirty = False
        self._bumped_since_persist = False
        return self.table.to_document()
