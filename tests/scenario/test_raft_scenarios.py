"""Scenarios on the in-memory network: timing bounds, limits, garbage input, restart."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from ha.raft.errors import InvalidCompaction, NotLeader, ProposalDropped
from ha.raft.node import RaftNode
from ha.raft.types import (
    DropReason, Entry, HardState, Message, MessageKind, RaftConfig, RecoveredState, Role, Snapshot,
    VoteRejection,
)
from tests.support.raft_network import NetworkOptions, RaftNetwork

TICK_MS = 100  # the controller's tick


@pytest.mark.parametrize("seed", range(20))
def test_leader_failover_with_default_settings_is_well_under_two_seconds(seed: int) -> None:
    net = RaftNetwork((1, 2, 3), seed=seed)
    net.elect(1)
    net.run(5)
    net.crash(1)
    for ticks in range(1, 100):
        net.run(1)
        leaders = [i for i in net.leaders() if i != 1]
        if leaders:
            break
    assert leaders, "no new leader"
    assert ticks * TICK_MS < 1_000, f"failover took {ticks} ticks"


@pytest.mark.parametrize("seed", range(10))
def test_no_election_under_a_healthy_leader_even_with_lost_heartbeats(seed: int) -> None:
    net = RaftNetwork((1, 2, 3, 4, 5), seed=seed)
    net.elect(1)
    rng = random.Random(seed)
    for _ in range(300):
        net.tick_all()
        net.process_all()
        net.in_flight = [m for m in net.in_flight if rng.random() > 0.3]  # lose 30%
        net.stabilize()
    assert net.node(1).role is Role.LEADER and net.node(1).term == 1
    assert all(net.node(i).term == 1 for i in net.ids)


def test_partitioned_leader_steps_down_and_majority_elects() -> None:
    net = RaftNetwork((1, 2, 3, 4, 5))
    net.elect(1)
    net.partition((1, 2), (3, 4, 5))
    net.run(15)
    assert net.node(1).role is not Role.LEADER
    assert len([i for i in net.leaders() if i in (3, 4, 5)]) == 1
    with pytest.raises(NotLeader):
        net.node(1).propose(b"x")


def test_proposal_limits_and_empty_payload() -> None:
    net = RaftNetwork((1, 2, 3), options=NetworkOptions(max_uncommitted_entries=3))
    net.elect(1)
    net.isolate(1)
    leader = net.node(1)
    with pytest.raises(ProposalDropped) as empty:
        leader.propose(b"")
    assert empty.value.reason is DropReason.EMPTY_DATA
    for n in range(3):
        leader.propose(b"%d" % n)
    with pytest.raises(ProposalDropped) as full:
        leader.propose(b"over")
    assert full.value.reason is DropReason.UNCOMMITTED_LIMIT


def test_not_leader_names_the_leader() -> None:
    net = RaftNetwork((1, 2, 3))
    net.elect(2)
    with pytest.raises(NotLeader) as error:
        net.node(1).propose(b"x")
    assert error.value.leader_id == 2


def test_compaction_beyond_applied_is_refused() -> None:
    net = RaftNetwork((1, 2, 3))
    net.elect(1)
    with pytest.raises(InvalidCompaction):
        net.node(1).compact(net.node(1).applied_index + 1, b"")


def test_restart_recovers_and_reapplies_only_after_the_snapshot() -> None:
    applied: list[tuple[int, int]] = []
    net = RaftNetwork((1, 2, 3), apply=lambda node, entry: applied.append((node, entry.index)))
    net.elect(1)
    for n in range(5):
        net.node(1).propose(b"%d" % n)
    net.stabilize()
    net.compact(2)
    net.process(2)  # the compaction is durable only once its Ready is saved
    net.crash(2)
    applied.clear()
    net.restart(2)
    assert net.node(2).term == 1 and net.node(2).commit_index == 6
    net.run(2)
    assert [index for node, index in applied if node == 2] == []  # all covered by the snapshot
    assert net.applied[2] == net.applied[1]


def test_whole_cluster_restart_keeps_committed_entries() -> None:
    net = RaftNetwork((1, 2, 3))
    net.elect(1)
    for n in range(4):
        net.node(1).propose(b"%d" % n)
    net.stabilize()
    before = list(net.applied[1])
    for node_id in net.ids:
        net.crash(node_id)
    for node_id in net.ids:
        net.restart(node_id)
    net.run(15)
    assert len(net.leaders()) == 1
    assert all(net.applied[i][: len(before)] == before for i in net.ids)


def test_follower_far_behind_is_repaired_in_batches() -> None:
    net = RaftNetwork((1, 2, 3), options=NetworkOptions(max_entries_per_message=4))
    net.elect(1)
    net.isolate(3)
    for n in range(30):
        net.node(1).propose(b"%d" % n)
    net.stabilize()
    net.heal()
    sent = []
    for _ in range(5):
        net.tick_all()
        sent += net.stabilize()
    appends = [m for m in sent if m.kind is MessageKind.APPEND and m.dst == 3]
    assert max(len(m.entries) for m in appends) <= 4
    assert net.applied[3] == net.applied[1]


messages = st.builds(
    Message,
    kind=st.sampled_from(MessageKind),
    src=st.integers(0, 4), dst=st.just(1), term=st.integers(-1, 6),
    log_term=st.integers(-1, 6), index=st.integers(-2, 8),
    entries=st.lists(st.builds(Entry, term=st.integers(-1, 6), index=st.integers(-1, 10),
                               data=st.binary(max_size=3)), max_size=3).map(tuple),
    commit=st.integers(-1, 10), reject=st.booleans(),
    reject_reason=st.none() | st.sampled_from(VoteRejection),
    hint=st.integers(-2, 10), hint_term=st.integers(-1, 6),
    snapshot=st.none() | st.builds(Snapshot, index=st.integers(-1, 10), term=st.integers(-1, 6),
                                   data=st.just(b""), peers=st.just((1, 2, 3))),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(messages, max_size=25), st.sampled_from(Role))
def test_garbage_from_peers_never_raises_or_breaks_invariants(garbage, role) -> None:
    node = RaftNode(RaftConfig(node_id=1, peers=(1, 2, 3)), random.Random(0))
    if role in (Role.LEADER, Role.CANDIDATE, Role.PRE_CANDIDATE):
        node.campaign()
        if role is Role.LEADER:
            node.step(Message(MessageKind.PRE_VOTE_RESPONSE, 2, 1, 1))
            node.step(Message(MessageKind.VOTE_RESPONSE, 2, 1, 1))
    for message in garbage:
        term_before = node.term
        node.step(message)
        node.tick()
        assert node.term >= term_before
        assert node.applied_index <= node.commit_index <= node.last_index
        ready = node.ready()
        node.advance(ready)


@pytest.mark.parametrize("seed", range(10))
def test_pre_candidates_a_term_apart_with_equal_logs_elect_a_leader(seed: int) -> None:
    """The leader (1) crashed; 3 lost its vote in term 2 (its VOTE was dropped), 2 is in term 1.

    The lower-id tie-break refused 3's pre-vote for term 3, and 3 (having voted for itself
    in term 2) refused 2's pre-vote for term 2: both stayed pre-candidates forever.
    """
    net = RaftNetwork((1, 2, 3), seed=seed)
    log = (Entry(1, 1, b""),)
    for node_id, term, vote in ((2, 1, 1), (3, 2, 3)):
        recovered = RecoveredState(HardState(term, vote, 1), None, log)
        net.storages[node_id].hard_state, net.storages[node_id].entries = recovered.hard_state, list(log)
        net.nodes[node_id] = RaftNode(net.config(node_id), random.Random(seed * 10 + node_id), recovered)
    net.crash(1)
    net.run(100)
    assert net.leaders(), [(i, net.node(i).role, net.node(i).term) for i in net.up()]
