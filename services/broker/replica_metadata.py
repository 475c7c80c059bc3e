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
- :func:`follow_master` is a slave's periodic sync: :func:`adopt`, except that the offsets,
  which move at every sync under load, are written by a worker thread (80,000 offsets: 85 ms
  of text and two fsyncs, on a loop that also serves the container's masters).  The offsets
  are adopted after the write only if nothing changed them meanwhile (a promotion, then
  commits); otherwise this broker's own are kept and written by its next snapshot, which
  lands after the adopted file (config_files orders writes by when they were taken).
"""
from __future__ import annotations

from asyncio import to_thread
from typing import Iterable

from metadata.consumer_offsets import ConsumerOffsetTable
from metadata.replica_metadata import (Adopt, Adoption, Keep, KeepReason, ReplicaMetadata, SyncDirection,
                                       decide_adoption)
from services.broker.config_files import Deferred, snapshot_document

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


async def follow_master(broker, remote: ReplicaMetadata) -> dict[str, Adoption]:
    """A slave's periodic sync from its master (see the module's rules)."""
    decisions = adopt(broker, remote, SyncDirection.FROM_MASTER, ("topics", "groups", "timer_checkpoint"))
    decisions["offsets"] = await _adopt_offsets_off_loop(broker, remote.offsets)
    return decisions


async def _adopt_offsets_off_loop(broker, remote: ConsumerOffsetTable) -> Adoption:
    keeper = broker.pop.keeper
    local = keeper.versioned_table(broker.clock.now_ms())
    decision = decide_adoption(local.data_version, remote.data_version, SyncDirection.FROM_MASTER)
    if not isinstance(decision, Adopt):
        return decision
    taken = keeper.taken
    await to_thread(snapshot_document(broker.pop.offset_path, Deferred(remote.to_document)))
    if keeper.holds(local) and broker.role == "SLAVE":
        keeper.adopt(remote)
        if keeper.taken != taken:  # a snapshot of the old table, taken after this write: it wins the file
            keeper.mark_unwritten()
        return decision
    keeper.mark_unwritten()
    return Keep(KeepReason.CHANGED_MEANWHILE, decision.local_version, decision.remote_version)
