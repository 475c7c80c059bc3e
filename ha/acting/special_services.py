"""Who runs a broker group's special services: the timer (delay messages), the transaction
check and the pop revive (RIP-32 ``changeSpecialServiceStatus``; reference 2.1, 2.4).

Rules, one decision per replica from what it knows:

* A MASTER in pre-online (``ha.role.pre_online``: it has not taken its group's tables back
  yet) never runs them (PRE_ONLINE), acting mode or not.
* Without ``enableSlaveActingMaster`` (and always in controller mode) the services run exactly
  while the replica is MASTER, as before this module existed.
* With it, in each group exactly the live member with the smallest id runs them:
  - a MASTER runs them once its hand-over is done (it pulled the special state the acting
    slave advanced while it was away, so nothing is delivered twice or skipped); until then
    it waits (AWAITING_HANDOVER);
  - a SLAVE runs them -- it *acts* -- only when all of these hold: it has a view of the
    group's live members (from the nameserver) that is fresh (younger than the stale limit)
    and taken after its last hand-over to a returning master; that view has no master
    (id 0) and no member with a smaller id than its own; and its replication is not
    connected to a master (a master the nameserver lost but this slave still copies from is
    alive: two runners is what the rule exists to prevent); and its copy is known to be
    caught up: its replication, in this process, last found it holding everything its
    master had made visible (COPY_NOT_CAUGHT_UP otherwise).  A slave restarted while its
    master was away has a copy that misses what the master did meanwhile -- the delay
    messages it delivered among them -- and acting on it delivered them again (issue 24
    defect 2, tests/integration/test_pre_online.py); such a group waits for its master.
  - a FENCED replica never runs them.
* Pure: the replica's facts in, one :class:`SpecialServices` out, with a named reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

MASTER_ID = 0


class Reason(str, Enum):
    MASTER = "MASTER"
    PRE_ONLINE = "PRE_ONLINE"  # a master taking its group's tables back before it goes online
    AWAITING_HANDOVER = "AWAITING_HANDOVER"
    FENCED = "FENCED"
    SLAVE = "SLAVE"  # acting mode is off: a slave never runs them
    ACTING = "ACTING"  # the smallest live member of a group without a master
    NO_MEMBER_VIEW = "NO_MEMBER_VIEW"
    STALE_MEMBER_VIEW = "STALE_MEMBER_VIEW"
    HANDED_OVER = "HANDED_OVER"  # no view since a returning master took over
    MASTER_ALIVE = "MASTER_ALIVE"
    SMALLER_MEMBER_ALIVE = "SMALLER_MEMBER_ALIVE"
    COPYING_FROM_MASTER = "COPYING_FROM_MASTER"
    COPY_NOT_CAUGHT_UP = "COPY_NOT_CAUGHT_UP"  # its copy was never shown to hold all its master's


@dataclass(frozen=True)
class MemberView:
    """A replica's last knowledge of its group's live members: the smallest live id (None: the
    group has no registered member) and when it was learned (``now_ms`` of the learner)."""

    min_broker_id: int | None
    learned_ms: int


@dataclass(frozen=True)
class ReplicaFacts:
    role: str  # "MASTER" | "SLAVE" | "FENCED" (ha.role.decisions.Role values)
    own_id: int
    acting_enabled: bool = False
    handover_done: bool = True  # a MASTER: the hand-over from acting members is finished
    view: MemberView | None = None
    master_connected: bool = False  # a SLAVE: its replication is connected to a master
    copy_caught_up: bool = False  # a SLAVE: its copy held all its master made visible, when last shown
    last_handover_ms: int | None = None  # a SLAVE: when it last handed over to a returning master
    pre_online: bool = False  # a MASTER still in pre-online


@dataclass(frozen=True)
class SpecialServices:
    run: bool
    reason: Reason

    @property
    def acting(self) -> bool:
        """Running on a slave: writes escape (services.acting.escape), nothing goes to its own log."""
        return self.run and self.reason is Reason.ACTING


def decide_special_services(facts: ReplicaFacts, now_ms: int, stale_after_ms: int) -> SpecialServices:
    if facts.role == "FENCED":
        return SpecialServices(False, Reason.FENCED)
    if facts.role == "MASTER":
        if facts.pre_online:
            return SpecialServices(False, Reason.PRE_ONLINE)
        if facts.acting_enabled and not facts.handover_done:
            return SpecialServices(False, Reason.AWAITING_HANDOVER)
        return SpecialServices(True, Reason.MASTER)
    if not facts.acting_enabled:
        return SpecialServices(False, Reason.SLAVE)
    return SpecialServices(False, reason) if (reason := _why_not_acting(facts, now_ms, stale_after_ms)) \
        else SpecialServices(True, Reason.ACTING)


def _why_not_acting(facts: ReplicaFacts, now_ms: int, stale_after_ms: int) -> Reason | None:
    view = facts.view
    if view is None:
        return Reason.NO_MEMBER_VIEW
    if now_ms - view.learned_ms > stale_after_ms:
        return Reason.STALE_MEMBER_VIEW
    if facts.last_handover_ms is not None and view.learned_ms <= facts.last_handover_ms:
        return Reason.HANDED_OVER
    if facts.master_connected:
        return Reason.COPYING_FROM_MASTER
    smallest = facts.own_id if view.min_broker_id is None else min(view.min_broker_id, facts.own_id)
    if smallest == MASTER_ID:
        return Reason.MASTER_ALIVE
    if smallest < facts.own_id:
        return Reason.SMALLER_MEMBER_ALIVE
    if not facts.copy_caught_up:
        return Reason.COPY_NOT_CAUGHT_UP
    return None
