"""Consumer groups: the table and its file ``config/subscriptionGroup.json``.

Rules: a group used by a consumer but never created is created with defaults (RocketMQ's
``autoCreateSubscriptionGroup``, on by default) and persisted; every change bumps the
DataVersion and is written atomically before returning.  :meth:`GroupManager.adopt` replaces
the whole table by a peer's, DataVersion included, as ``metadata.replica_metadata`` decides.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from metadata.replica_metadata import Adopt, Adoption, SyncDirection, decide_adoption
from metadata.subscription_group import SubscriptionGroupConfig, SubscriptionGroupTable
from services.broker.config_files import read_document, write_document

FILE_NAME = "subscriptionGroup.json"


class GroupManager:
    def __init__(self, config_dir: Path, on_change: Callable[[], None] = lambda: None):
        """``on_change()`` after every change this broker makes (not after adopting a peer's)."""
        self.path = config_dir / FILE_NAME
        self.table = SubscriptionGroupTable()
        self._on_change = on_change

    def load(self) -> None:
        table = read_document(self.path, SubscriptionGroupTable.from_document)
        self.table = table if table is not None else SubscriptionGroupTable()

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.table.groups.get(group)

    def get_or_create(self, group: str, now_ms: int) -> SubscriptionGroupConfig:
        existing = self.get(group)
        if existing is not None:
            return existing
        config = SubscriptionGroupConfig(group).validate()
        self.upsert(config, now_ms)
        return config

    def upsert(self, config: SubscriptionGroupConfig, now_ms: int) -> None:
        config.validate()
        self.table = self.table.with_group(config, self.table.data_version.next_version(now_ms))
        write_document(self.path, self.table.file_document())
        self._on_change()

    def delete(self, group: str, now_ms: int) -> bool:
        if group not in self.table.groups:
            return False
        self.table = self.table.without_group(group, self.table.data_version.next_version(now_ms))
        write_document(self.path, self.table.file_document())
        self._on_change()
        return True

    def adopt(self, remote: SubscriptionGroupTable, direction: SyncDirection = SyncDirection.FROM_MASTER) -> Adoption:
        decision = decide_adoption(self.table.data_version, remote.data_version, direction)
        if isinstance(decision, Adopt):
            write_document(self.path, remote.file_document())
            self.table = remote
        return decision
