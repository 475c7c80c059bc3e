"""What a broker does with the controller's view of its group (RocketMQ's ``ReplicasManager``).

Rules (reference 4.6, 12; upstream #9689, #9942):

* A broker starts FENCED: no writes, not routed as a master, no special services, until a
  view from the controller gives it a role.
* A view older than the epoch the broker acts on is ignored (STALE_EPOCH): role changes and
  SyncStateSet replies of an old epoch never move it back.
* No master in the view: the broker asks the controller to elect (a master that sees a newer
  epoch without a master steps down to FENCED first: it stops writing at once).
* The view names this broker master: it becomes master at that epoch.  Its epoch file gets a
  new entry only when the epoch is newer than the file's last one; the same epoch again
  (the broker restarted faster than the controller noticed) keeps the entry, so slaves that
  copied it still find their consistent point.  A view older than the file's last epoch is
  refused (EPOCH_FILE_AHEAD: the controller lost state; an operator must look).  Already
  master at that epoch: a newer SyncStateSet epoch is adopted, nothing else changes.
* The view names another master: the broker becomes (or stays) its slave.  The same master
  at a newer epoch only moves the epoch the slave fences with (no reconnect); a new master or
  address connects afresh, after which the handshake truncates to the consistent point.
* Pure: the local state and the view in, one decision out.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Union


class Role(str, Enum):
    FENCED = "FENCED"
    MASTER = "MASTER"
    SLAVE = "SLAVE"


@dataclass(frozen=True)
class LocalRole:
    role: Role = Role.FENCED
    master_epoch: int = 0            # the epoch this broker acts on (0: none since it started)
    sync_state_set_epoch: int = 0
    master_id: int | None = None     # the master it follows, or itself
    master_address: str = ""
    file_epoch: int = 0              # last epoch of the store's epoch file


@dataclass(frozen=True)
class GroupView:
    """The controller's view of one broker group (ControllerReplicaResponse)."""
    master_id: int | None
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int
    sync_state_set: frozenset[int]


class IgnoreReason(str, Enum):
    STALE_EPOCH = "STALE_EPOCH"
    UP_TO_DATE = "UP_TO_DATE"
    EPOCH_FILE_AHEAD = "EPOCH_FILE_AHEAD"


@dataclass(frozen=True)
class Ignore:
    reason: IgnoreReason


@dataclass(frozen=True)
class Elect:
    """No master: ask the controller to elect (this broker is a candidate)."""
    step_down: bool   # this broker was master at an older epoch: stop writing first


@dataclass(frozen=True)
class BecomeMaster:
    epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int
    new_epoch_entry: bool            # append <epoch, max offset> to the epoch file


@dataclass(frozen=True)
class AdoptSyncStateSet:
    members: frozenset[int]
    epoch: int


@dataclass(frozen=True)
class BecomeSlave:
    master_id: int
    master_address: str
    epoch: int
    reconnect: bool                  # False: the same master at a newer epoch (fence with it only)


RoleDecision = Union[Ignore, Elect, BecomeMaster, AdoptSyncStateSet, BecomeSlave]


def decide(local: LocalRole, view: GroupView, self_id: int) -> RoleDecision:
    if view.master_epoch < local.master_epoch:
        return Ignore(IgnoreReason.STALE_EPOCH)
    if view.master_id is None:
        return Elect(step_down=local.role is Role.MASTER)
    if view.master_id == self_id:
        return _as_master(local, view)
    return _as_slave(local, view)


def _as_master(local: LocalRole, view: GroupView) -> RoleDecision:
    if local.role is Role.MASTER and view.master_epoch == local.master_epoch:
        if view.sync_state_set_epoch > local.sync_state_set_epoch:
            return AdoptSyncStateSet(view.sync_state_set, view.sync_state_set_epoch)
        return Ignore(IgnoreReason.UP_TO_DATE)
    if view.master_epoch < local.file_epoch:
        return Ignore(IgnoreReason.EPOCH_FILE_AHEAD)
    return BecomeMaster(view.master_epoch, view.sync_state_set, view.sync_state_set_epoch,
                        new_epoch_entry=view.master_epoch > local.file_epoch)


def _as_slave(local: LocalRole, view: GroupView) -> RoleDecision:
    same_master = (local.role is Role.SLAVE and local.master_id == view.master_id
                   and local.master_address == view.master_address)
    if same_master and view.master_epoch == local.master_epoch:
        return Ignore(IgnoreReason.UP_TO_DATE)
    return BecomeSlave(view.master_id, view.master_address, view.master_epoch, reconnect=not same_master)


def after(local: LocalRole, decision: RoleDecision) -> LocalRole:
    """The local state once ``decision`` has been carried out."""
    if isinstance(decision, BecomeMaster):
        return LocalRole(Role.MASTER, decision.epoch, decision.sync_state_set_epoch, None, "",
                         max(local.file_epoch, decision.epoch))
    if isinstance(decision, BecomeSlave):
        return LocalRole(Role.SLAVE, decision.epoch, local.sync_state_set_epoch, decision.master_id,
                         decision.master_address, local.file_epoch)
    if isinstance(decision, AdoptSyncStateSet):
        return LocalRole(local.role, local.master_epoch, decision.epoch, local.master_id, local.master_address,
                         local.file_epoch)
    if isinstance(decision, Elect) and decision.step_down:
        return LocalRole(Role.FENCED, local.master_epoch, local.sync_state_set_epoch, None, "", local.file_epoch)
    return local
