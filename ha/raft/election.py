"""Election decisions as pure functions: judging a (pre-)vote and counting answers.

Rules:
- judge_vote decides one request from the voter's facts only; it returns None to
  grant or exactly one VoteRejection (DLedger's names, seed 002), checked in a fixed
  order so that the reason is the most important one.
- Two pre-candidates with equal logs campaigning for the same term break the tie by
  node id (liveness only: pre-votes change no durable state, so this cannot affect safety).
- tally maps the answers so far to a CampaignOutcome, or None while undecided.
  Votes are never counted twice: answers are keyed by voter.
"""

from __future__ import annotations

from dataclasses import dataclass

from ha.raft.types import CampaignOutcome, NodeId, VoteRejection

_LEDGER_REASONS = (VoteRejection.EXPIRED_LEDGER_TERM, VoteRejection.SMALL_LEDGER_END_INDEX)


@dataclass(frozen=True)
class VoterFacts:
    """What a voter knows when a (pre-)vote request arrives (after any term update)."""

    peers: tuple[NodeId, ...]
    term: int
    vote: NodeId | None
    leader_id: NodeId | None
    in_lease: bool  # heard from a live leader within the base election timeout
    last_index: int
    last_term: int
    node_id: NodeId = 0
    pre_campaigning: bool = False  # the voter is itself a pre-candidate


@dataclass(frozen=True)
class VoteRequest:
    candidate: NodeId
    term: int
    last_index: int
    last_term: int
    pre_vote: bool


def judge_vote(voter: VoterFacts, request: VoteRequest) -> VoteRejection | None:
    """None grants the vote; otherwise the one reason for refusing it."""
    if request.candidate not in voter.peers:
        return VoteRejection.UNKNOWN_MEMBER
    if request.term < voter.term:
        return VoteRejection.EXPIRED_VOTE_TERM
    if request.term > voter.term and voter.in_lease and voter.leader_id != request.candidate:
        return VoteRejection.ALREADY_HAS_LEADER
    if request.term == voter.term and voter.vote not in (None, request.candidate):
        if voter.leader_id is not None:
            return VoteRejection.ALREADY_HAS_LEADER
        return VoteRejection.ALREADY_VOTED
    if request.term == voter.term and voter.vote is None and voter.leader_id is not None \
            and voter.leader_id != request.candidate:
        return VoteRejection.ALREADY_HAS_LEADER
    if request.last_term < voter.last_term:
        return VoteRejection.EXPIRED_LEDGER_TERM
    if request.last_term == voter.last_term and request.last_index < voter.last_index:
        return VoteRejection.SMALL_LEDGER_END_INDEX
    if request.pre_vote and voter.pre_campaigning and request.candidate > voter.node_id \
            and request.term == voter.term + 1 \
            and (request.last_term, request.last_index) == (voter.last_term, voter.last_index):
        # two pre-candidates with equal logs for the same term: the lower id goes first, or
        # they would both pass and split the real vote (ticks are coarse, timeouts collide
        # often). Not across terms: a candidate a term ahead has voted for itself in ours and
        # refuses our pre-vote, so refusing its pre-vote would leave neither able to win.
        return VoteRejection.ALREADY_VOTED
    return None


def tally(peers: tuple[NodeId, ...], answers: dict[NodeId, VoteRejection | None]) -> CampaignOutcome | None:
    """The campaign's outcome from the answers so far (None grants), or None if undecided."""
    quorum = len(peers) // 2 + 1
    granted = sum(1 for reason in answers.values() if reason is None)
    if granted >= quorum:
        return CampaignOutcome.PASSED
    not_ready = sum(1 for r in answers.values() if r is VoteRejection.TERM_NOT_READY)
    if not_ready and granted + not_ready >= quorum:
        return CampaignOutcome.REVOTE_IMMEDIATELY
    rejected = len(answers) - granted
    if len(peers) - rejected >= quorum:
        return None  # the missing answers could still make a quorum
    longer_logs = sum(1 for r in answers.values() if r in _LEDGER_REASONS)
    if len(peers) - longer_logs < quorum:
        return CampaignOutcome.WAIT_TO_VOTE_NEXT
    return CampaignOutcome.WAIT_TO_REVOTE
