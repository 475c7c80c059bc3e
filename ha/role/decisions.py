"""What a broker does with the controller's view of its group (RocketMQ's ``ReplicasManager``).

Rules (reference 4.6, 12; upstream #9689, #9942):

* A broker starts FENCED: no writes, not routed as a master, no special services, until a
  view from the controller gives it a role.
* A view older than the epoch the broker acts on is ignored (STALE_EPOCH): role changes and
  SyncStateSet replies of an old epoch never move it back.
* No master in the view: the broker asks the controller to elect (a master that sees a newer
  epoch without a master steps down to FENCED first: it stops writing at once).
* The view names this broker master: it becomes master at that epoch, and only at an epoch
  newer than its epoch file's last one, with a new entry <epoch, max offset>: a broker never
  resumes an epoch.  A view naming it master at the file's last epoch while it is not master
  at that epoch in this process (it restarted faster than the controller noticed, or it
  stepped down and an old view named it again) is RENEWED: it stays fenced and asks the
  controller to elect it again with a new epoch (ElectMaster ``renew_master_epoch``; the
  controller resets the SyncStateSet to the master alone).  Why (found by the failure
  simulation): resuming an epoch after a power loss wrote different records where a slave
  held the lost ones under the same <epoch, start> (seed 19 with master power losses), and
  resuming from an old view adopted that view's SyncStateSet, older than the controller's,
  and acknowledged without a member the controller could elect (seeds 1332, 3289, 9757).
  Why this is safe: at a new epoch, the first view naming this broker master is the
  election's, whose set is {this broker}, and only this broker's own proposals change the
  set within the epoch (AlterSyncStateSet is fenced by master id and epoch), so the set it
  starts with is exact; the new epoch entry at its max offset makes every slave's handshake
  cut what it copied beyond that offset.  The epoch file's entry must therefore outlive a
  power loss: the driver makes the log durable up to the entry's start before writing it.
  A view older than the file's last epoch is refused (EPOCH_FILE_AHEAD: the controller lost
  state; an operator must look).  Already master at that epoch: a newer SyncStateSet epoch
  is adopted, nothing else changes.
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
class RenewEpoch:
    """Named master at the epoch file's last epoch: ask the controller for a new epoch."""
    epoch: int        # the epoch not to resume (the controller renews only from this one)
    step_down: bool   # this broker is master at an older epoch: stop writing first


@dataclass(frozen=True)
class BecomeMaster:
    """Master at ``epoch``, newer than the epoch file's: append <epoch, max offset> to it."""
    epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int


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


RoleDecision = Union[Ignore, Elect, RenewEpoch, BecomeMaster, AdoptSyncStateSet, BecomeSlave]


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
    if view.master_epoch == local.file_epoch:
        return RenewEpoch(view.master_epoch, step_down=local.role is Role.MASTER)
    return BecomeMaster(view.master_epoch, view.sync_state_set, view.sync_state_set_epoch)


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
    if isinstance(decision, (Elect, RenewEpoch)) and decision.step_down:
        return LocalRole(Role.FENCED, local.master_epoch, local.sync_state_set_epoch, None, "", local.file_epoch)
    return local
