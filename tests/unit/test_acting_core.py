"""Slave acting master's pure decisions, each by a table of cases: the special-service switch,
the escape target choice, the FIFO lock quorum, the nameserver's min-id notices, and RIP-34's
degrade rule with the acting-master deployment's numbers."""
from __future__ import annotations

import pytest

from ha.acting.escape_target import (EscapeKind, Exclusions, MasterCandidate, NoTarget, NoTargetReason, Target,
                                     choose_target, exclusion_ms)
from ha.acting.lock_quorum import QueueLeases, decide_lock, lock_quorum
from ha.acting.special_services import MemberView, Reason, ReplicaFacts, decide_special_services
from ha.replication.config import HaConfig
from ha.replication.quorum import AckNow, QuorumRejection, WaitForAcks, decide_quorum_mode
from metadata.config import bind
from metadata.member_group import BrokerMemberGroup, decide_min_id_notice

NOW = 100_000
STALE = 10_000
FRESH = MemberView(min_broker_id=1, learned_ms=NOW - 500)

# --- the special-service switch -------------------------------------------------------------------
SWITCH = [
    # (facts, run, reason)
    (ReplicaFacts("MASTER", 0), True, Reason.MASTER),  # acting mode off: exactly while master
    (ReplicaFacts("SLAVE", 1), False, Reason.SLAVE),
    (ReplicaFacts("FENCED", 0), False, Reason.FENCED),
    (ReplicaFacts("FENCED", 1, acting_enabled=True, view=FRESH), False, Reason.FENCED),
    (ReplicaFacts("MASTER", 0, acting_enabled=True, handover_done=False), False, Reason.AWAITING_HANDOVER),
    (ReplicaFacts("MASTER", 0, acting_enabled=True, handover_done=True), True, Reason.MASTER),
    (ReplicaFacts("SLAVE", 1, acting_enabled=True), False, Reason.NO_MEMBER_VIEW),
    (ReplicaFacts("SLAVE", 1, acting_enabled=True, view=MemberView(1, NOW - STALE - 1)), False, Reason.STALE_MEMBER_VIEW),
    (ReplicaFacts("SLAVE", 1, acting_enabled=True, copy_caught_up=True, view=MemberView(1, NOW - STALE)), True, Reason.ACTING),
    (ReplicaFacts("SLAVE", 1, acting_enabled=True, copy_caught_up=True, view=FRESH), True, Reason.ACTING),
    (ReplicaFacts("SLAVE", 1, acting_enabled=True, copy_caught_up=True, view=MemberView(None, NOW)), True, Reason.ACTING),  # not registered yet
    (ReplicaFacts("SLAVE", 1, acting_enabled=True, view=MemberView(0, NOW)), False, Reason.MASTER_ALIVE),
    (ReplicaFacts("SLAVE", 2, acting_enabled=True, view=MemberView(1, NOW)), False, Reason.SMALLER_MEMBER_ALIVE),
    (ReplicaFacts("SLAVE", 2, acting_enabled=True, copy_caught_up=True, view=MemberView(2, NOW)), True, Reason.ACTING),
    (ReplicaFacts("SLAVE", 1, acting_enabled=True, view=FRESH, master_connected=True), False, Reason.COPYING_FROM_MASTER),
    (ReplicaFacts("SLAVE", 1, acting_enabled=True, view=FRESH, last_handover_ms=NOW - 500), False, Reason.HANDED_OVER),
    (ReplicaFacts("SLAVE", 1, acting_enabled=True, copy_caught_up=True, view=FRESH, last_handover_ms=NOW - 501), True, Reason.ACTING),
    # issue 24 defect 2: a copy never shown to hold all its master's (a slave restarted while its
    # master was away, or one still catching up when its master died) is not acted on
    (ReplicaFacts("SLAVE", 1, acting_enabled=True, view=FRESH), False, Reason.COPY_NOT_CAUGHT_UP),
    (ReplicaFacts("SLAVE", 1, acting_enabled=True, view=MemberView(None, NOW)), False, Reason.COPY_NOT_CAUGHT_UP),
    (ReplicaFacts("SLAVE", 2, acting_enabled=True, view=MemberView(2, NOW)), False, Reason.COPY_NOT_CAUGHT_UP),
    (ReplicaFacts("SLAVE", 1, acting_enabled=True, view=MemberView(0, NOW), copy_caught_up=True), False, Reason.MASTER_ALIVE),
]


@pytest.mark.parametrize("facts,run,reason", SWITCH)
def test_special_service_switch(facts, run, reason):
    decision = decide_special_services(facts, NOW, STALE)
    assert (decision.run, decision.reason) == (run, reason)
    assert decision.acting == (run and facts.role == "SLAVE")


def test_exactly_one_member_of_a_group_runs_the_special_services_in_every_membership():
    """For every set of live members (master 0, slaves 1 and 2), exactly the smallest runs them."""
    for alive in ({0, 1, 2}, {1, 2}, {0, 2}, {2}, {0}, {1}, {0, 1}):
        view = MemberView(min(alive), NOW)
        runners = [i for i in alive if decide_special_services(
            ReplicaFacts("MASTER" if i == 0 else "SLAVE", i, acting_enabled=True, view=view, copy_caught_up=True),
            NOW, STALE).run]
        assert runners == [min(alive)], alive


# --- the escape target ----------------------------------------------------------------------------
LOCAL_B = MasterCandidate("broker-b", local=True, address="", hosts_topic=True)
REMOTE_C = MasterCandidate("broker-c", local=False, address="127.0.0.1:10931", hosts_topic=True)
REMOTE_D = MasterCandidate("broker-d", local=False, address="127.0.0.1:10941", hosts_topic=True)
LOCAL_NO_TOPIC = MasterCandidate("broker-e", local=True, address="", hosts_topic=False)
OWN = MasterCandidate("broker-a", local=True, address="", hosts_topic=True)
LOCAL_PRE_ONLINE = MasterCandidate("broker-p", local=True, address="", hosts_topic=True, pre_online=True)

ESCAPE = [
    # (kind, candidates, excluded, remote enabled, turn, expected)
    (EscapeKind.DELAY, [LOCAL_B, REMOTE_C], set(), False, 0, Target("broker-b", True, "")),  # local first
    (EscapeKind.DELAY, [LOCAL_B, REMOTE_C], set(), True, 1, Target("broker-b", True, "")),  # local even when remote is on
    (EscapeKind.DELAY, [REMOTE_C], set(), True, 0, Target("broker-c", False, "127.0.0.1:10931")),  # remote
    (EscapeKind.DELAY, [REMOTE_C], set(), False, 0, NoTarget(NoTargetReason.REMOTE_ESCAPE_DISABLED)),
    (EscapeKind.DELAY, [], set(), True, 0, NoTarget(NoTargetReason.NO_LIVE_MASTER)),  # none
    (EscapeKind.DELAY, [OWN], set(), True, 0, NoTarget(NoTargetReason.NO_LIVE_MASTER)),  # never its own group
    (EscapeKind.DELAY, [LOCAL_NO_TOPIC], set(), True, 0, NoTarget(NoTargetReason.NO_LIVE_MASTER)),
    (EscapeKind.RETRY, [LOCAL_NO_TOPIC, REMOTE_C], set(), True, 0, Target("broker-c", False, "127.0.0.1:10931")),
    (EscapeKind.DEAD_LETTER, [LOCAL_NO_TOPIC], set(), False, 0, Target("broker-e", True, "")),  # any master
    (EscapeKind.DELAY, [LOCAL_B, REMOTE_C], {"broker-b"}, True, 0, Target("broker-c", False, "127.0.0.1:10931")),
    (EscapeKind.DELAY, [REMOTE_C], {"broker-c"}, True, 0, NoTarget(NoTargetReason.ALL_EXCLUDED)),  # dead excluded
    (EscapeKind.TRANSACTION, [REMOTE_C, REMOTE_D], set(), True, 0, Target("broker-c", False, "127.0.0.1:10931")),
    (EscapeKind.TRANSACTION, [REMOTE_C, REMOTE_D], set(), True, 1, Target("broker-d", False, "127.0.0.1:10941")),
    (EscapeKind.TRANSACTION, [REMOTE_C, REMOTE_D], {"broker-c"}, True, 0, Target("broker-d", False, "127.0.0.1:10941")),
    # issue 24 defect 2: a master still in pre-online takes nothing, local or not
    (EscapeKind.DELAY, [LOCAL_PRE_ONLINE], set(), True, 0, NoTarget(NoTargetReason.MASTER_PRE_ONLINE)),
    (EscapeKind.DEAD_LETTER, [LOCAL_PRE_ONLINE], set(), True, 0, NoTarget(NoTargetReason.MASTER_PRE_ONLINE)),
    (EscapeKind.DELAY, [LOCAL_PRE_ONLINE, REMOTE_C], set(), True, 0, Target("broker-c", False, "127.0.0.1:10931")),
    (EscapeKind.DELAY, [LOCAL_PRE_ONLINE, REMOTE_C], set(), False, 0, NoTarget(NoTargetReason.REMOTE_ESCAPE_DISABLED)),
    (EscapeKind.DELAY, [LOCAL_PRE_ONLINE, LOCAL_B], set(), False, 0, Target("broker-b", True, "")),
]


@pytest.mark.parametrize("kind,candidates,excluded,remote,turn,expected", ESCAPE)
def test_escape_target_choice(kind, candidates, excluded, remote, turn, expected):
    assert choose_target("broker-a", kind, candidates, frozenset(excluded), remote, turn) == expected


EXCLUSION = [
    # (target, escapeExcludeMillis, escapeRetryIntervalMillis, excluded for): issue 24 defect 3
    (Target("broker-b", True, ""), 10_000, 1_000, 1_000),  # local: alive; retried at the next retry
    (Target("broker-c", False, "127.0.0.1:10931"), 10_000, 1_000, 10_000),  # remote: may be dead (#7923)
    (Target("broker-b", True, ""), 500, 1_000, 500),  # never longer than the exclusion itself
]


@pytest.mark.parametrize("target,exclude_ms,retry_ms,expected", EXCLUSION)
def test_how_long_a_failed_target_is_excluded(target, exclude_ms, retry_ms, expected):
    assert exclusion_ms(target, exclude_ms, retry_ms) == expected


def test_an_excluded_master_comes_back_after_its_exclusion():
    exclusions = Exclusions(exclude_ms=10_000)
    exclusions.exclude("broker-c", NOW)
    assert exclusions.active(NOW + 9_999) == {"broker-c"}
    assert exclusions.active(NOW + 10_000) == frozenset()
    exclusions.exclude("broker-c", NOW)
    exclusions.forgive("broker-c")
    assert exclusions.active(NOW) == frozenset()


# --- the lock quorum ------------------------------------------------------------------------------
LOCKS = [
    # (strict, total replicas, local granted, remote grants, locked, need)
    (False, 2, True, 0, True, 1),  # not strict: local
    (False, 3, True, 0, True, 1),
    (False, 2, False, 1, False, 1),  # held by another replica here
    (True, 1, True, 0, True, 1),  # a quorum of one is local
    (True, 2, True, 0, False, 2),  # two replicas: both must grant (an acting slave alone cannot)
    (True, 2, True, 1, True, 2),
    (True, 3, True, 1, True, 2),  # three replicas: two
    (True, 3, True, 0, False, 2),
    (True, 5, True, 2, True, 3),
    (True, 3, False, 2, False, 2),  # configured, not live, replicas: never more than the local refusal
]


@pytest.mark.parametrize("strict,total,local,remote,locked,need", LOCKS)
def test_lock_quorum(strict, total, local, remote, locked, need):
    decision = decide_lock(strict, total, local, remote)
    assert (decision.locked, decision.need) == (locked, need)


def test_quorum_uses_the_configured_replica_count():
    assert [lock_quorum(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]


def test_a_lease_is_granted_renewed_refused_and_released():
    leases, key = QueueLeases(), ("g", "fifo", 0)
    assert leases.try_grant(key, holder_id=0, now_ms=NOW, lease_ms=60_000)
    assert not leases.try_grant(key, holder_id=1, now_ms=NOW + 1, lease_ms=60_000)  # a master and a slave never both
    assert leases.try_grant(key, holder_id=0, now_ms=NOW + 1, lease_ms=60_000)  # renewed
    assert not leases.needs_renewal(key, 0, NOW + 20_000, 60_000) and leases.needs_renewal(key, 0, NOW + 40_000, 60_000)
    assert leases.try_grant(key, holder_id=1, now_ms=NOW + 60_001, lease_ms=60_000)  # a dead holder's lease expires
    leases.release_all(1)
    assert leases.holder(key, NOW + 60_002) is None
    assert leases.try_grant(key, holder_id=0, now_ms=NOW + 60_002, lease_ms=60_000)


# --- the nameserver's min-id notices --------------------------------------------------------------
def group(**members: str) -> BrokerMemberGroup:
    return BrokerMemberGroup("DefaultCluster", "broker-a", {int(k[1:]): v for k, v in members.items()})


NOTICES = [
    # (before, after, acting, expected (min, offline, targets) or None)
    (group(m0="a:1", m1="b:1"), group(m1="b:1"), True, (1, "a:1", {1: "b:1"})),  # master left: the slave is told
    (group(m0="a:1", m1="b:1"), group(m1="b:1"), False, None),  # not an acting group
    (group(m0="a:1", m1="b:1", m2="c:1"), group(m1="b:1", m2="c:1"), True, (1, "a:1", {1: "b:1", 2: "c:1"})),
    (group(m1="b:1"), group(m0="a:1", m1="b:1"), False, (0, "", {1: "b:1"})),  # master back: all but it
    (group(m1="b:1", m2="c:1"), group(m1="b:1"), True, None),  # the minimum did not change
    (group(m0="a:1"), group(), True, None),  # nobody left to tell
    (group(), group(m0="a:1"), True, None),  # the first member: nobody else to tell
]


@pytest.mark.parametrize("before,after,acting,expected", NOTICES)
def test_min_broker_id_notices(before, after, acting, expected):
    notice = decide_min_id_notice(before, after, acting)
    if expected is None:
        assert notice is None
    else:
        assert (notice.min_broker_id, notice.offline_broker_address, dict(notice.targets)) == expected
        assert notice.min_broker_address == after.members[notice.min_broker_id]


def test_member_set_name():
    assert group(m0="a:1").name == "rmq_sys_SYNC_BROKER_MEMBER_broker-a"


# --- RIP-34's degrade rule with conf/acting-master's numbers --------------------------------------
ACTING_MASTER = {"brokerRole": "SYNC_MASTER", "totalReplicas": 2, "inSyncReplicas": 2, "minInSyncReplicas": 1,
                 "enableAutoInSyncReplicas": True}
DEGRADE = [
    # (config changes, alive replicas, in-sync slaves, expected)
    ({}, 2, 1, WaitForAcks(2)),  # both up: the slave must hold it
    ({}, 1, 0, AckNow()),  # the slave's container died: degrade to minInSyncReplicas 1
    ({}, 2, 0, AckNow()),  # connected but lagging past haMaxGapNotInSync: one in sync
    ({"enableAutoInSyncReplicas": False}, 1, 0, QuorumRejection.IN_SYNC_REPLICAS_NOT_ENOUGH),  # the old conf/2container
    ({"minInSyncReplicas": 2}, 1, 0, QuorumRejection.IN_SYNC_REPLICAS_NOT_ENOUGH),  # never below the minimum
    ({"brokerRole": "ASYNC_MASTER"}, 1, 0, AckNow()),
    ({"totalReplicas": 3, "inSyncReplicas": 3}, 3, 1, WaitForAcks(2)),  # lowered to what is in sync
]


@pytest.mark.parametrize("changes,alive,in_sync,expected", DEGRADE)
def test_auto_in_sync_replicas_degrade(changes, alive, in_sync, expected):
    config = bind(HaConfig, {**ACTING_MASTER, **changes}, "test")
    assert decide_quorum_mode(config, alive, in_sync) == expected
