"""One replica's role as a pure state machine: etcd raft's ``RawNode`` shape for a broker.

Rules:

* The node owns, per replica, what decides whether it may write: its role and the epoch it
  acts on (ha.role.decisions), the pause fence (ha.role.fence), and which replication core
  is live (a master's, a slave's copy, or none).  Every input is a call carrying ``now_ms``
  (monotonic): :meth:`on_view` (the controller's view: register, election reply, watch,
  heartbeat, poll), :meth:`on_paused_tick` (the heartbeat tick), :meth:`configure` (outside
  controller mode, the configured role).  Each returns one :class:`Ready`: the decision
  and the effects that carry it out, in the order a driver must carry them out.
* A driver carries out a Ready's effects in order, awaiting each, and reports each with
  :meth:`done`.  Writes (:meth:`write_refusal`) follow the effects: a new master writes only
  once its epoch is open, its master core runs and ``AllowPuts`` is done; a deposed master
  stops at the decision, before any effect ran.  One Ready at a time: a new input while
  effects are outstanding is a bug.
* The node also holds the replica's serving facts (:class:`ha.role.serving.ServingFacts`:
  acting for an absent master, in pre-online, hand-over done), set by the drivers that learn
  them (:meth:`set_serving`), and answers every serving question from them and its role:
  :meth:`refusal` (may this replica serve this kind of call now; the broker asks nothing
  else), :attr:`serves_clients` (pop calls, transaction resolutions) and :meth:`read_limit`
  (how far consumers read; the one place it is decided).
* Every role change is checked against :data:`TRANSITIONS`; an illegal one is an
  assertion (h11 and etcd refuse an illegal transition loudly).
* The orders, and why:
  - to master (``changeToMaster``): stop copying (what is in flight is committed), stop a
    previous master core, make the log durable to its end, open the epoch (an entry whose
    start a power loss could take back would be dropped at recovery, and the broker would
    take that epoch again), start the master core, allow puts;
  - to slave (``changeToSlave``): refuse puts first (writes stop at once), stop the master
    core (waiting puts fail: nothing unreplicated is acknowledged by a deposed master),
    drain the puts in flight, invalidate what a master derived from writes that never
    landed, then copy (a new connection: the handshake truncates; the same master at a
    newer epoch: only the fencing epoch moves);
  - fenced (a master that sees a newer epoch with no master): refuse puts, invalidate,
    stop the master core, then ask for an election;
  - after a role change: stamp the state version with the epoch (a new master opens it),
    let the special services follow the role, re-register with the nameserver.
* Pure: no clocks, no I/O; the effects are values.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Union

from ha.role.decisions import (AdoptSyncStateSet, BecomeMaster, BecomeSlave, Elect, GroupView, Ignore, IgnoreReason,
                               LocalRole, RenewEpoch, Role, RoleDecision, after, decide)
from ha.role.fence import PauseFence
from ha.role.serving import Call, Refusal, ServingFacts, read_limit, refusal


# --- effects, in the order a Ready lists them ---------------------------------------------------
@dataclass(frozen=True)
class RefusePuts:
    reason: str


@dataclass(frozen=True)
class StopCopying:
    """Stop the slave's copy (its writes in flight are committed first)."""


@dataclass(frozen=True)
class StopMasterCore:
    """Stop serving slaves; puts waiting for replicas fail (HA_NOT_AVAILABLE)."""


@dataclass(frozen=True)
class DrainPuts:
    """Wait until the puts in flight have landed or failed."""


@dataclass(frozen=True)
class InvalidateDerived:
    """A master stepped down: drop what it derived from writes that may never land."""


@dataclass(frozen=True)
class MakeDurable:
    """fdatasync the log up to its end (the new epoch entry's start)."""


@dataclass(frozen=True)
class OpenEpoch:
    epoch: int


@dataclass(frozen=True)
class StartMasterCore:
    epoch: int | None                 # None outside controller mode (the file's last epoch)
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int


@dataclass(frozen=True)
class AllowPuts:
    pass


@dataclass(frozen=True)
class StartCopying:
    master_id: int | None
    master_address: str
    epoch: int


@dataclass(frozen=True)
class MoveCopyEpoch:
    """The same master at a newer epoch: fence older masters' batches, keep the connection."""
    epoch: int


@dataclass(frozen=True)
class AdoptSet:
    members: frozenset[int]
    epoch: int


@dataclass(frozen=True)
class AskElection:
    renew_epoch: int                  # 0: elect; otherwise the epoch not to resume


@dataclass(frozen=True)
class FollowRole:
    """The role changed: stamp the state version with ``epoch`` (``open_state_version``: a new
    master moves its versioned tables to it), special services follow, re-register."""
    epoch: int
    open_state_version: bool


Effect = Union[RefusePuts, StopCopying, StopMasterCore, DrainPuts, InvalidateDerived, MakeDurable, OpenEpoch,
               StartMasterCore, AllowPuts, StartCopying, MoveCopyEpoch, AdoptSet, AskElection, FollowRole]


class Live(str, Enum):
    """Which replication core runs for this replica."""
    NONE = "NONE"
    MASTER = "MASTER"
    SLAVE = "SLAVE"


@dataclass(frozen=True)
class Ready:
    decision: RoleDecision | None
    effects: tuple[Effect, ...] = ()
    log_epoch_file_ahead: bool = False   # the view names this broker master below its epoch file

    @property
    def empty(self) -> bool:
        return not self.effects


# (from, to): the legal role changes.  Staying SLAVE is a change of master (or of its epoch);
# MASTER to MASTER never happens: a master at a newer epoch steps down first (RenewEpoch).
TRANSITIONS: frozenset[tuple[Role, Role]] = frozenset({
    (Role.FENCED, Role.MASTER), (Role.FENCED, Role.SLAVE),
    (Role.SLAVE, Role.MASTER), (Role.SLAVE, Role.SLAVE), (Role.SLAVE, Role.FENCED),
    (Role.MASTER, Role.SLAVE), (Role.MASTER, Role.FENCED),
})


class ReplicaNode:
    def __init__(self, own_id: int, file_epoch: int, fence: PauseFence | None = None):
        """``own_id``: the replica's id (0 until the controller gave one); ``file_epoch``: the
        epoch file's last epoch; ``fence``: controller mode's pause fence (None: no fence)."""
        self.own_id = own_id
        self.local = LocalRole(file_epoch=file_epoch)
        self.fence = fence
        self.live = Live.NONE
        self.puts_allowed = False
        self.serving = ServingFacts()
        self._pending: list[Effect] = []

    @property
    def role(self) -> Role:
        return self.local.role

    @property
    def in_transition(self) -> bool:
        return bool(self._pending)

    # --- inputs ----------------------------------------------------------------------------------
    def on_view(self, view: GroupView, file_epoch: int) -> Ready:
        """A view of the group from the controller; ``file_epoch``: the epoch file's last epoch now."""
        assert not self._pending, f"effects outstanding: {self._pending}"
        local = LocalRole(self.local.role, self.local.master_epoch, self.local.sync_state_set_epoch,
                          self.local.master_id, self.local.master_address, file_epoch)
        decision = decide(local, view, self.own_id)
        if isinstance(decision, Ignore):
            if (self.fence is not None and local.role is Role.MASTER and view.master_id == self.own_id
                    and view.master_epoch == local.master_epoch):
                self.fence.confirmed()
            return Ready(decision, (), decision.reason is IgnoreReason.EPOCH_FILE_AHEAD)
        new = after(local, decision)
        self._check_transition(local.role, new.role, decision)
        return self._begin(new, Ready(decision, self._effects(local, decision)))

    def configure(self, role: Role) -> Ready:
        """Outside controller mode: the configured role, once, at start (no epoch changes)."""
        assert not self._pending and self.local.role is Role.FENCED and role is not Role.FENCED
        self._check_transition(self.local.role, role)
        if role is Role.MASTER:
            effects: tuple[Effect, ...] = (StartMasterCore(None, frozenset(), 0), AllowPuts())
        else:
            effects = (RefusePuts("a slave"), StartCopying(None, "", 0))
        return self._begin(LocalRole(role, 0, 0, None, "", self.local.file_epoch), Ready(None, effects))

    def tick(self, now_ms: int) -> bool:
        """The heartbeat tick: True when it reveals a pause (ask the controller for a view)."""
        return self.fence is not None and self.fence.tick(now_ms)

    def done(self, effect: Effect) -> None:
        """The driver carried out ``effect``, the next one of the outstanding Ready."""
        assert self._pending and self._pending[0] == effect, f"{effect} is not next: {self._pending}"
        self._pending.pop(0)
        if isinstance(effect, StartMasterCore):
            self.live = Live.MASTER
            if self.fence is not None:
                self.fence.confirmed()
        elif isinstance(effect, (StartCopying, MoveCopyEpoch)):
            self.live = Live.SLAVE
        elif isinstance(effect, StopMasterCore) and self.live is Live.MASTER:
            self.live = Live.NONE
        elif isinstance(effect, StopCopying) and self.live is Live.SLAVE:
            self.live = Live.NONE
        elif isinstance(effect, AllowPuts):
            self.puts_allowed = True

    def abandon(self) -> None:
        """The driver stops without carrying out the rest: nothing more is written here."""
        self._pending.clear()
        self.puts_allowed = False

    def set_serving(self, *, acting: bool | None = None, pre_online: bool | None = None,
                    handed_over: bool | None = None) -> bool:
        """A serving fact changed (the special-service decision, the pre-online driver); True
        when any did (the driver then moves the read limit and wakes held calls)."""
        facts = self.serving
        new = ServingFacts(facts.acting if acting is None else acting,
                           facts.pre_online if pre_online is None else pre_online,
                           facts.handed_over if handed_over is None else handed_over)
        assert not (new.acting and self.local.role is Role.MASTER), "a master never acts"
        self.serving = new
        return new != facts

    # --- questions -------------------------------------------------------------------------------
    def write_refusal(self, now_ms: int) -> Refusal | None:
        """None when this replica may take a write now (NOT_MASTER, IN_TRANSITION or PAUSED otherwise)."""
        if self.local.role is not Role.MASTER:
            return Refusal.NOT_MASTER
        if not self.puts_allowed or self.live is not Live.MASTER:
            return Refusal.IN_TRANSITION
        if self.fence is not None and not self.fence.writable(now_ms):
            return Refusal.PAUSED
        return None

    def refusal(self, call: Call, now_ms: int) -> Refusal | None:
        """None when this replica may serve ``call`` now (ha.role.serving's table)."""
        return refusal(call, self.write_refusal(now_ms), self.serving)

    @property
    def serves_clients(self) -> bool:
        """A master that takes writes, or a slave acting for its absent master: it serves pop calls."""
        return self.serving.acting or (self.local.role is Role.MASTER and self.puts_allowed)

    def read_limit(self, confirm_offset: int, master_alone: bool) -> int | None:
        """How far consumers read: ``master_alone``: the live master core's SyncStateSet is itself."""
        return read_limit(confirm_offset, acting=self.serving.acting,
                          master_alone=master_alone and self.live is Live.MASTER)

    # --- the orders ------------------------------------------------------------------------------
    def _begin(self, new: LocalRole, ready: Ready) -> Ready:
        if (new.role, new.master_epoch) != (self.local.role, self.local.master_epoch):
            self.puts_allowed = False  # a new role or epoch writes only once its AllowPuts is done
        self.local = new
        self._pending = list(ready.effects)
        return ready

    @staticmethod
    def _check_transition(was: Role, now: Role, decision: RoleDecision | None = None) -> None:
        if was is now and was is not Role.SLAVE:
            return  # not a role change (a SyncStateSet, an election asked while fenced)
        assert (was, now) in TRANSITIONS, f"illegal role change {was.value} -> {now.value} ({decision})"

    def _effects(self, local: LocalRole, decision: RoleDecision) -> tuple[Effect, ...]:
        if isinstance(decision, AdoptSyncStateSet):
            return (AdoptSet(decision.members, decision.epoch),)
        if isinstance(decision, (Elect, RenewEpoch)):
            renew = decision.epoch if isinstance(decision, RenewEpoch) else 0
            if not decision.step_down:
                return (AskElection(renew),)
            return (RefusePuts("fenced"), InvalidateDerived(), StopMasterCore(),
                    FollowRole(local.master_epoch, False), AskElection(renew))
        if isinstance(decision, BecomeMaster):
            return (StopCopying(), StopMasterCore(), MakeDurable(), OpenEpoch(decision.epoch),
                    StartMasterCore(decision.epoch, decision.sync_state_set, decision.sync_state_set_epoch),
                    AllowPuts(), FollowRole(decision.epoch, True))
        assert isinstance(decision, BecomeSlave), decision
        effects: list[Effect] = [RefusePuts("a slave"), StopMasterCore(), DrainPuts()]
        if local.role is Role.MASTER:
            effects.append(InvalidateDerived())
        if decision.reconnect or self.live is not Live.SLAVE:
            effects += [StopCopying(), StartCopying(decision.master_id, decision.master_address, decision.epoch)]
        else:
            effects.append(MoveCopyEpoch(decision.epoch))
        effects.append(FollowRole(decision.epoch, False))
        return tuple(effects)
