"""A broker's replicated metadata: the snapshot it hands to a peer and the adoption of a peer's.

Rules:
- :func:`snapshot` is synchronous, so the four tables are one consistent state of the broker
  (no other coroutine runs in between).  Offsets are handed out with a DataVersion that
  covers every change so far (bumped first if needed), so two replicas with one DataVersion
  hold the same table.  The timer checkpoint is the last one taken
  (``TimerService.shared_checkpoint``): one DataVersion still names one document, whose
  cursors say where the adopter replays the timer and op topics from.
- :func:`adopt` lets each manager decide by DataVersion (``metadata.replica_metadata``) and
  persist atomically before it uses the adopted table.  ``FROM_MASTER`` adopts every item;
  pre-online (``REVERSE``) passes the items it pulls back (offsets and timer checkpoint).
"""
from __future__ import annotations

from typing import Iterable

from metadata.replica_metadata import Adoption, ReplicaMetadata, SyncDirection

ITEMS = ("topics", "groups", "offsets", "timer_checkpoint")


def snapshot(broker) -> ReplicaMetadata:
    broker.pop.catch_up()
    offsets = broker.pop.keeper.versioned_table(broker.clock.now_ms())
    return ReplicaMetadata(broker_name=broker.name, broker_id=broker.broker_id, role=broker.role,
                           topics=broker.topics.table, groups=broker.groups.table, offsets=offsets,
                           timer_checkpoint=broker.timer.shared_checkpoint())


def adopt(broker, remote: ReplicaMetadata, direction: SyncDirection = SyncDirection.FROM_MASTER,
          items: Iterable[str] = ITEMS) -> dict[str, Adoption]:
    """Adopt ``remote``'s copy of each item where its DataVersion says so; the decisions by item."""
    chosen = tuple(items)
    assert set(chosen) <= set(ITEMS), f"unknown items {set(chosen) - set(ITEMS)}"
    decisions: dict[str, Adoption] = {}
    if "topics" in chosen:
        decisions["topics"] = broker.topics.adopt(remote.topics, direction)
    if "groups" in chosen:
        decisions["groups"] = broker.groups.adopt(remote.groups, direction)
    if "offsets" in chosen:
        decisions["offsets"] = broker.pop.adopt_offsets(remote.offsets, direction)
    if "timer_checkpoint" in chosen:
        decisions["timer_checkpoint"] = broker.timer.adopt_checkpoint(remote.timer_checkpoint, direction)
    return decisions
