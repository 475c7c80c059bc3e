"""ha.role.serving and the node's serving questions: which replica serves which call, and how far
its consumers read -- the one table the broker asks instead of four layers of checks."""
from __future__ import annotations

import itertools

import pytest

from ha.role.decisions import GroupView, Role
from ha.role.fence import PauseFence
from ha.role.replica_node import ReplicaNode
from ha.role.serving import Call, Refusal, ServingFacts, read_limit, refusal

W, R, E, P, Q, O, T = Call.WRITE, Call.RESOLVE, Call.ESCAPE_PUT, Call.POP, Call.READ, Call.OFFSET_WRITE, Call.TABLES
NM, IT, PA = Refusal.NOT_MASTER, Refusal.IN_TRANSITION, Refusal.PAUSED
ONLINE = ServingFacts(handed_over=True)

# (role as writes see it, facts) -> what each call gets
TABLE = [
    # a master, online, handed over: everything
    (None, ONLINE, {W: None, R: None, E: None, P: None, Q: None, O: None, T: None}),
    # a master whose acting members have not handed the special state back: pop calls wait
    (None, ServingFacts(), {W: None, P: Refusal.AWAITING_HANDOVER, Q: None, O: None, T: None}),
    # a master in pre-online: no escaped message, no offset write, no tables for slaves; pop waits
    (None, ServingFacts(pre_online=True), {W: None, E: Refusal.PRE_ONLINE, O: Refusal.PRE_ONLINE,
                                           T: Refusal.PRE_ONLINE, P: Refusal.AWAITING_HANDOVER}),
    # a paused master: writes wait for the controller's word; pop calls and reads do not
    (PA, ONLINE, {W: PA, R: PA, E: PA, P: None, Q: None, O: PA, T: None}),
    # a new master whose switch is not done: nothing but its tables
    (IT, ONLINE, {W: IT, R: IT, E: IT, P: IT, Q: IT, O: IT, T: None}),
    # a plain slave: tables only
    (NM, ServingFacts(), {W: NM, R: NM, E: NM, P: NM, Q: NM, O: NM, T: None}),
    # an acting slave: pop calls, reads and its own transaction halves; no writes
    (NM, ServingFacts(acting=True), {W: Refusal.ACTING_READS_ONLY, R: None, E: Refusal.ACTING_READS_ONLY,
                                     P: None, Q: None, O: Refusal.ACTING_READS_ONLY, T: None}),
]


@pytest.mark.parametrize("write, facts, expected", TABLE)
def test_the_serving_table(write, facts, expected):
    for call, want in expected.items():
        assert refusal(call, write, facts) is want, (call, write, facts)


def test_a_writable_answer_needs_a_writable_role():
    """Whatever the facts, a call that writes the group's log is served only where writes are."""
    for write, acting, pre, handed, call in itertools.product((None, NM, IT, PA), *[(False, True)] * 3, (W, E, O)):
        answer = refusal(call, write, ServingFacts(acting, pre, handed))
        if write is not None:
            assert answer is not None
        if pre and call in (E, O):
            assert answer is not None


@pytest.mark.parametrize("acting, alone, limit", [(False, False, 70), (True, False, None), (False, True, None)])
def test_the_read_limit(acting, alone, limit):
    assert read_limit(70, acting=acting, master_alone=alone) == limit


def _master() -> ReplicaNode:
    node = ReplicaNode(1, 0, PauseFence(1000))
    ready = node.on_view(GroupView(1, "b1", 1, 1, frozenset({1, 2})), 0)
    for effect in ready.effects:
        if not node.puts_allowed:
            assert node.refusal(W, 0) is IT  # no write before the switch is done
        node.done(effect)
    return node


def test_the_node_answers_from_its_role_fence_and_facts():
    node = _master()
    assert node.refusal(P, 0) is Refusal.AWAITING_HANDOVER and node.refusal(W, 0) is None
    assert node.set_serving(handed_over=True) and not node.set_serving(handed_over=True)  # a change, then none
    assert node.refusal(P, 0) is None and node.serves_clients
    node.tick(0)
    node.tick(5000)  # a pause revealed: writes wait for the controller, receives do not
    assert node.refusal(W, 5000) is PA and node.refusal(P, 5000) is None
    assert node.read_limit(40, master_alone=False) == 40 and node.read_limit(40, master_alone=True) is None


def test_an_acting_slave_serves_pop_calls_and_reads_its_whole_copy():
    slave = ReplicaNode(2, 0)
    for effect in slave.on_view(GroupView(1, "b1", 1, 1, frozenset({1, 2})), 0).effects:
        slave.done(effect)
    assert slave.role is Role.SLAVE and not slave.serves_clients and slave.read_limit(40, False) == 40
    slave.set_serving(acting=True)
    assert slave.serves_clients and slave.read_limit(40, False) is None
    assert slave.refusal(P, 0) is None and slave.refusal(W, 0) is Refusal.ACTING_READS_ONLY


def test_a_master_never_acts():
    node = _master()
    with pytest.raises(AssertionError):
        node.set_serving(acting=True)
