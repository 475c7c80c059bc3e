"""The slave's HANDSHAKE decision: where to cut its log and where to resume (seed RIP-44, 4.7).

Rules:

* Empty slave (no epochs, empty log): nothing to cut; resume at the master's min offset, or
  with ``syncFromLastFile`` at the start of the master's last file.
* Otherwise both histories are closed at their own max offsets and the consistent point of
  :func:`ha.epochs.find_consistent_point` is the cut.
* Histories that share no epoch number at all, where the master's starts at or below the
  slave's first entry and the slave's log starts there too: every byte the slave holds is of
  an epoch the master never kept, every byte the master holds from there on of an epoch the
  slave never had, so they agree on nothing from the slave's first entry on: that is the cut
  (:func:`disjoint_cut`).  This happens when a master loses its unsynced records to a power
  loss and its empty epoch is replaced by the next one at the same start (ha.epochs) while a
  slave holds those records: upstream refuses such a slave for ever (found by the group
  simulation, seeds 5111 and 6626).  The records so cut were never acknowledged: the master
  of a later epoch was in the SyncStateSet, so it holds every acknowledged record.
* Any other history without a match is NO_CONSISTENT_POINT (an epoch number at two start
  offsets, or a master that deleted the slave's range): the slave never syncs from such a
  master until an operator intervenes (upstream retries).
* A cut below the master's min offset cannot be served (the master deleted that data).
* A master whose last epoch is older than the epoch the controller told the slave about is
  fenced (a deposed master must not feed a slave).
* A log with records but no epoch history cannot be compared: refused, not guessed.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ha.epochs import EpochHistory, find_consistent_point
from ha.replication.messages import MasterHandshake


class HandshakeRejection(str, Enum):
    MASTER_EPOCH_FENCED = "MASTER_EPOCH_FENCED"
    NO_CONSISTENT_POINT = "NO_CONSISTENT_POINT"
    CONSISTENT_POINT_BELOW_MASTER_MIN = "CONSISTENT_POINT_BELOW_MASTER_MIN"
    LOG_WITHOUT_EPOCHS = "LOG_WITHOUT_EPOCHS"
    BAD_MASTER_HANDSHAKE = "BAD_MASTER_HANDSHAKE"


@dataclass(frozen=True)
class LocalLog:
    """What the slave knows of its own store when the master's handshake arrives."""
    epochs: EpochHistory
    min_offset: int
    max_offset: int


@dataclass(frozen=True)
class HandshakePlan:
    truncate_to: int | None      # cut the local log here first (None: no cut)
    epochs: EpochHistory         # the local history after the cut
    resume_offset: int           # the offset the slave requests from the master


def master_history(handshake: MasterHandshake) -> EpochHistory | None:
    try:
        history = EpochHistory.from_pairs(handshake.epochs)
    except (ValueError, AssertionError):
        return None
    last = history.last
    if last is not None and last.start_offset > handshake.max_offset:
        return None
    return history


def plan_handshake(handshake: MasterHandshake, local: LocalLog, *, known_master_epoch: int,
                   sync_from_last_file: bool) -> HandshakePlan | HandshakeRejection:
    master = master_history(handshake)
    if master is None or not handshake.min_offset <= handshake.max_offset:
        return HandshakeRejection.BAD_MASTER_HANDSHAKE
    if master.last_epoch < known_master_epoch:
        return HandshakeRejection.MASTER_EPOCH_FENCED
    if local.epochs.is_empty():
        if local.max_offset > local.min_offset:
            return HandshakeRejection.LOG_WITHOUT_EPOCHS
        start = handshake.last_file_start if sync_from_last_file else handshake.min_offset
        return HandshakePlan(None, local.epochs, start)
    point = find_consistent_point(master.closed_at(handshake.max_offset),
                                  local.epochs.closed_at(local.max_offset))
    if point is None:
        point = disjoint_cut(master, local)
    if point is None:
        return HandshakeRejection.NO_CONSISTENT_POINT
    if point < handshake.min_offset:
        return HandshakeRejection.CONSISTENT_POINT_BELOW_MASTER_MIN
    truncate_to = point if point < local.max_offset else None
    return HandshakePlan(truncate_to, local.epochs.truncate_suffix(point)
                         if truncate_to is not None else local.epochs, point)


def disjoint_cut(master: EpochHistory, local: LocalLog) -> int | None:
    """The slave's first epoch start when the histories share no epoch and the master's covers
    the slave's whole log (the module's rules); None otherwise."""
    if master.is_empty() or local.epochs.is_empty():
        return None
    if any(master.entry_of(entry.epoch) is not None for entry in local.epochs.entries):
        return None
    first = local.epochs.entries[0].start_offset
    if master.entries[0].start_offset > first or local.min_offset > first:
        return None
    return first
