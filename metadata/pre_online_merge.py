"""The pre-online merge: what a returning master takes from the other replicas of its group.

This is the one rule.  The broker's pre-online (``services.ha.pre_online``, through
``metadata.replica_metadata.decide_adoption``) applies it to the tables it pulls back, and the
offset diff (``spark_tools``) computes its "native outcome" from the same plan, so the diff
predicts exactly what a rejoin does.

Rules (reference 2.5 and 3; upstream ``BrokerPreOnlineService.syncMetadataReverse``):
- Each versioned table is merged on its own, from its DataVersions alone.  The master starts
  from its own table and version and visits the other replicas in ascending broker id; it
  adopts a replica's table when ``current.compare(replica) <= 0`` -- stateVersion, then
  counter, then timestamp; ties adopt the replica -- and from then on holds that replica's
  version, so a later replica is compared with the version adopted so far
  (:func:`plan_merge`).
- A keyed table (consumer offsets: ``topic@group`` -> queue -> offset) is adopted entry by
  entry (RocketMQ's ``putAll``): an entry the adopted replica holds replaces the master's whole
  entry (a queue missing from it disappears), an entry only the master holds is kept.  So each
  entry comes from the last adopted replica that holds it (:meth:`MergePlan.entry_source`).
- A document (timer checkpoint, pop state, transaction checkpoint) is adopted whole.
- Pure: no clock, no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Container, Hashable, Mapping, TypeVar

from metadata.consumer_offsets import ConsumerOffsetTable
from metadata.data_version import DataVersion, reverse_sync_adopts

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True)
class MergePlan:
    """What pre-online does to one table of one broker group, decided from the versions alone."""

    master_id: int
    visit_order: tuple[int, ...]  # the master first, then the others in ascending id
    adopted: tuple[int, ...]  # the master first (it starts from its own table), then each adopted replica
    version: DataVersion  # the merged table's version

    @property
    def winner(self) -> int:
        """The replica whose version the merged table carries (the last one adopted)."""
        return self.adopted[-1]

    def adopts(self, replica_id: int) -> bool:
        return replica_id != self.master_id and replica_id in self.adopted

    def rank(self, replica_id: int) -> int | None:
        """Position in the adoption order (0: the master's own table); None: not adopted."""
        return self.adopted.index(replica_id) if replica_id in self.adopted else None

    def entry_source(self, holders: Container[int]) -> int | None:
        """The replica an entry comes from: the last adopted one that holds it; None when no
        adopted replica (the master included) holds it."""
        for replica_id in reversed(self.adopted):
            if replica_id in holders:
                return replica_id
        return None


def plan_merge(master_id: int, versions: Mapping[int, DataVersion]) -> MergePlan:
    """The visit of ``versions`` (replica id -> its table's version; the master's included)."""
    assert master_id in versions, "the master's own version is where the merge starts"
    others = sorted(replica_id for replica_id in versions if replica_id != master_id)
    version, adopted = versions[master_id], [master_id]
    for replica_id in others:
        if reverse_sync_adopts(version, versions[replica_id]):
            version = versions[replica_id]
            adopted.append(replica_id)
    return MergePlan(master_id, (master_id, *others), tuple(adopted), version)


def merge_entries(plan: MergePlan, tables: Mapping[int, Mapping[K, V]]) -> dict[K, V]:
    """``putAll`` of each adopted table over the master's, in adoption order."""
    merged: dict[K, V] = {}
    for replica_id in plan.adopted:
        merged.update(tables.get(replica_id, {}))
    return merged


def merge_offsets(master_id: int, tables: Mapping[int, ConsumerOffsetTable]) -> ConsumerOffsetTable:
    """The consumer offsets a master holds after pre-online with ``tables`` (its own included)."""
    plan = plan_merge(master_id, {replica_id: table.data_version for replica_id, table in tables.items()})
    if plan.adopted == (master_id,):
        return tables[master_id]
    entries = merge_entries(plan, {replica_id: table.offsets for replica_id, table in tables.items()})
    return ConsumerOffsetTable(plan.version, entries)
