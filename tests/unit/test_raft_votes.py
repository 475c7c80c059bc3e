"""Vote handling: each named rejection reason, grants, and the candidate's outcomes."""

from __future__ import annotations

import random

import pytest

from ha.raft.election import tally
from ha.raft.node import RaftNode
from ha.raft.types import (
    CampaignOutcome, Entry, HardState, Message, MessageKind, RaftConfig, RecoveredState, Role,
    VoteRejection,
)

PEERS = (1, 2, 3)


def _node(term: int = 2, vote: int | None = None, log_terms: tuple[int, ...] = (1, 2),
          node_id: int = 1, peers: tuple[int, ...] = PEERS, **config) -> RaftNode:
    entries = tuple(Entry(t, i + 1, b"x") for i, t in enumerate(log_terms))
    recovered = RecoveredState(HardState(term, vote, 0), None, entries)
    return RaftNode(RaftConfig(node_id=node_id, peers=peers, **config), random.Random(0), recovered)


def _drain(node: RaftNode) -> tuple[Message, ...]:
    ready = node.ready()
    node.advance(ready)
    return ready.messages


def _answer(node: RaftNode, kind: MessageKind, src: int, term: int, last_index: int,
            last_term: int) -> Message:
    node.step(Message(kind, src, node.id, term, log_term=last_term, index=last_index))
    replies = [m for m in _drain(node) if m.dst == src]
    assert len(replies) == 1
    return replies[0]


def _vote(node: RaftNode, src: int = 2, term: int = 3, last_index: int = 2, last_term: int = 2):
    return _answer(node, MessageKind.VOTE, src, term, last_index, last_term)


def test_grants_an_up_to_date_candidate_in_a_newer_term_and_persists_the_vote() -> None:
    node = _node()
    reply = _vote(node)
    assert (reply.kind, reply.reject, reply.term) == (MessageKind.VOTE_RESPONSE, False, 3)
    assert node.hard_state == HardState(3, 2, 0)


def test_the_vote_is_in_the_same_ready_as_the_grant() -> None:
    node = _node()
    node.step(Message(MessageKind.VOTE, 2, 1, 3, log_term=2, index=2))
    ready = node.ready()
    node.advance(ready)
    assert ready.hard_state == HardState(3, 2, 0) and ready.messages


@pytest.mark.parametrize("request_term,last_index,last_term,expected", [
    (1, 5, 5, VoteRejection.EXPIRED_VOTE_TERM),
    (3, 9, 1, VoteRejection.EXPIRED_LEDGER_TERM),
    (3, 1, 2, VoteRejection.SMALL_LEDGER_END_INDEX),
])
def test_each_log_and_term_rejection(request_term, last_index, last_term, expected) -> None:
    reply = _vote(_node(), term=request_term, last_index=last_index, last_term=last_term)
    assert reply.reject and reply.reject_reason is expected


def test_expired_vote_term_reply_carries_the_newer_term() -> None:
    reply = _vote(_node(term=5), term=3)
    assert reply.reject_reason is VoteRejection.EXPIRED_VOTE_TERM and reply.term == 5


def test_already_voted_for_someone_else_in_this_term() -> None:
    reply = _vote(_node(term=3, vote=3), src=2, term=3)
    assert reply.reject_reason is VoteRejection.ALREADY_VOTED


def test_repeated_request_from_the_candidate_we_voted_for_is_granted_again() -> None:
    reply = _vote(_node(term=3, vote=2), src=2, term=3)
    assert not reply.reject


def test_already_has_leader_in_the_same_term() -> None:
    node2 = _node(term=3)
    node2.step(Message(MessageKind.HEARTBEAT, 3, 1, 3))
    node2.step(Message(MessageKind.VOTE, 2, 1, 3, log_term=2, index=2))
    replies = [m for m in _drain(node2) if m.dst == 2]
    assert replies[0].reject_reason is VoteRejection.ALREADY_HAS_LEADER


def test_lease_refuses_a_newer_term_while_the_leader_is_alive() -> None:
    node = _node(term=3)
    node.step(Message(MessageKind.HEARTBEAT, 3, 1, 3))
    reply = [m for m in _drain(node) if m.dst == 3]
    assert reply
    answer = _vote(node, src=2, term=9, last_index=5, last_term=5)
    assert answer.reject_reason is VoteRejection.ALREADY_HAS_LEADER
    assert node.term == 3, "a refused disruptor must not raise our term"


def test_without_check_quorum_there_is_no_lease() -> None:
    node = _node(term=3, check_quorum=False)
    node.step(Message(MessageKind.HEARTBEAT, 3, 1, 3))
    _drain(node)
    assert not _vote(node, src=2, term=9, last_index=5, last_term=5).reject


def test_lease_expires_after_max_heartbeat_leak_intervals() -> None:
    node = _node(term=3, election_jitter_ticks=0, pre_vote=False)
    node.step(Message(MessageKind.HEARTBEAT, 3, 1, 3))
    for _ in range(node.config.election_ticks - 1):
        node.tick()
    assert node.role is Role.FOLLOWER
    _drain(node)
    node2 = _node(term=3, election_jitter_ticks=0, pre_vote=False, max_heartbeat_leak=3)
    node2.step(Message(MessageKind.HEARTBEAT, 3, 1, 3))
    for _ in range(3):
        node2.tick()
    assert node2.role is Role.CANDIDATE  # the leak fired: lease over, campaigning


def test_unknown_member() -> None:
    node = _node()
    node.step(Message(MessageKind.VOTE, 9, 1, 3, log_term=2, index=2))
    reply = _drain(node)[0]
    assert reply.dst == 9 and reply.reject_reason is VoteRejection.UNKNOWN_MEMBER


def test_pre_vote_does_not_change_term_or_vote() -> None:
    node = _node(term=2)
    reply = _answer(node, MessageKind.PRE_VOTE, 2, 3, 2, 2)
    assert (reply.kind, reply.reject, reply.term) == (MessageKind.PRE_VOTE_RESPONSE, False, 3)
    assert node.hard_state == HardState(2, None, 0)


def test_pre_vote_rejection_for_a_short_log_answers_in_the_asked_term() -> None:
    reply = _answer(_node(term=2), MessageKind.PRE_VOTE, 2, 3, 1, 2)
    assert reply.reject_reason is VoteRejection.SMALL_LEDGER_END_INDEX and reply.term == 3


def test_vote_request_with_newer_term_deposes_a_leader_without_lease() -> None:
    node = _node(term=1, log_terms=(), peers=(1, 2, 3), check_quorum=False, pre_vote=False)
    node.campaign()
    for src in (2, 3):
        node.step(Message(MessageKind.VOTE_RESPONSE, src, 1, 2))
    assert node.role is Role.LEADER
    _drain(node)
    _vote(node, src=2, term=5, last_index=9, last_term=4)
    assert node.role is Role.FOLLOWER and node.term == 5


def _candidate(pre_vote: bool = False) -> RaftNode:
    node = _node(term=2, peers=(1, 2, 3, 4, 5), pre_vote=pre_vote, election_jitter_ticks=0)
    node.campaign()
    _drain(node)
    return node


def _reject(node: RaftNode, src: int, reason: VoteRejection) -> None:
    node.step(Message(MessageKind.VOTE_RESPONSE, src, 1, node.term, reject=True,
                      reject_reason=reason))


def test_candidate_becomes_leader_on_quorum_and_appends_a_noop() -> None:
    node = _candidate()
    node.step(Message(MessageKind.VOTE_RESPONSE, 2, 1, 3))
    assert node.role is Role.CANDIDATE
    node.step(Message(MessageKind.VOTE_RESPONSE, 3, 1, 3))
    assert node.role is Role.LEADER and node.last_campaign_outcome is CampaignOutcome.PASSED
    assert node.entries(node.last_index, node.last_index) == (Entry(3, 3, b""),)


def test_duplicate_grants_are_counted_once() -> None:
    node = _candidate()
    for _ in range(3):
        node.step(Message(MessageKind.VOTE_RESPONSE, 2, 1, 3))
    assert node.role is Role.CANDIDATE


def test_candidate_waits_with_extra_delay_when_a_quorum_has_longer_logs() -> None:
    node = _candidate()
    for src in (2, 3, 4):
        _reject(node, src, VoteRejection.SMALL_LEDGER_END_INDEX)
    assert node.last_campaign_outcome is CampaignOutcome.WAIT_TO_VOTE_NEXT
    assert node.role is Role.FOLLOWER
    for _ in range(node.config.election_ticks * 2 - 1):
        node.tick()
    assert node.role is Role.FOLLOWER, "the extra delay lets a longer log win first"
    node.tick()
    assert node.role is Role.CANDIDATE


def test_candidate_waits_to_revote_when_votes_went_elsewhere() -> None:
    node = _candidate()
    _reject(node, 2, VoteRejection.ALREADY_VOTED)
    _reject(node, 3, VoteRejection.ALREADY_HAS_LEADER)
    assert node.role is Role.CANDIDATE, "undecided while a quorum is still possible"
    _reject(node, 4, VoteRejection.ALREADY_VOTED)
    assert node.last_campaign_outcome is CampaignOutcome.WAIT_TO_REVOTE
    assert node.role is Role.FOLLOWER and node.term == 3


def test_candidate_revotes_immediately_when_voters_only_lag_in_term() -> None:
    node = _candidate()
    node.step(Message(MessageKind.VOTE_RESPONSE, 2, 1, 3))
    _reject(node, 3, VoteRejection.TERM_NOT_READY)
    assert node.last_campaign_outcome is CampaignOutcome.REVOTE_IMMEDIATELY
    assert node.role is Role.CANDIDATE and node.term == 4


def test_refusal_without_a_reason_is_ignored() -> None:
    node = _candidate()
    for src in (2, 3, 4):
        node.step(Message(MessageKind.VOTE_RESPONSE, src, 1, 3, reject=True))
    assert node.role is Role.CANDIDATE


def test_pre_candidate_moves_to_vote_after_pre_vote_quorum() -> None:
    node = _candidate(pre_vote=True)
    assert node.role is Role.PRE_CANDIDATE and node.term == 2
    for src in (2, 3):
        node.step(Message(MessageKind.PRE_VOTE_RESPONSE, src, 1, 3))
    assert node.role is Role.CANDIDATE and node.term == 3
    votes = [m for m in _drain(node) if m.kind is MessageKind.VOTE]
    assert {m.dst for m in votes} == {2, 3, 4, 5}


def test_tally_counts_term_smaller_than_ledger_as_a_plain_refusal() -> None:
    answers = {1: None, 2: VoteRejection.TERM_SMALLER_THAN_LEDGER,
               3: VoteRejection.TERM_SMALLER_THAN_LEDGER}
    assert tally(PEERS, answers) is CampaignOutcome.WAIT_TO_REVOTE


def test_single_node_elects_itself_immediately() -> None:
    node = _node(term=0, log_terms=(), peers=(1,))
    node.campaign()
    assert node.role is Role.LEADER and node.commit_index == 1


def test_pre_candidates_with_equal_logs_let_the_lower_id_go_first() -> None:
    node = _node(term=2, node_id=2, election_jitter_ticks=0)
    node.campaign()
    _drain(node)
    assert node.role is Role.PRE_CANDIDATE
    higher = _answer(node, MessageKind.PRE_VOTE, 3, 3, 2, 2)
    lower = _answer(node, MessageKind.PRE_VOTE, 1, 3, 2, 2)
    longer = _answer(node, MessageKind.PRE_VOTE, 3, 3, 3, 2)
    assert higher.reject_reason is VoteRejection.ALREADY_VOTED
    assert not lower.reject and not longer.reject


def test_the_lower_id_tie_break_does_not_refuse_a_pre_candidate_a_term_ahead() -> None:
    """3 campaigned in term 3 (voting for itself) and asks for term 4; 2 is in term 2."""
    node = _node(term=2, node_id=2, election_jitter_ticks=0)
    node.campaign()
    _drain(node)
    assert node.role is Role.PRE_CANDIDATE
    ahead = _answer(node, MessageKind.PRE_VOTE, 3, 4, 2, 2)
    assert not ahead.reject
