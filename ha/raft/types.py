"""Values of the Raft core: roles, log entries, persistent state, messages, Ready, config.

Rules: every value here is a frozen dataclass or an enum holding only plain ints,
bytes, tuples and enums, so that a converter can map each field to protobuf one to
one. Vote rejections carry DLedger's names (seed 002) so that operators who know
DLedger can read our logs; each names exactly one reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

NodeId = int


class Role(Enum):
    FOLLOWER = 1
    PRE_CANDIDATE = 2  # asking "would you vote for me?" without raising the term
    CANDIDATE = 3
    LEADER = 4


class MessageKind(Enum):
    APPEND = 1  # index/log_term: the entry before `entries`; commit: leader's commit
    APPEND_RESPONSE = 2  # index: last matching index (or the rejected index); hint/hint_term on reject
    HEARTBEAT = 3  # commit: min(leader commit, follower match)
    HEARTBEAT_RESPONSE = 4
    SNAPSHOT = 5  # snapshot: the leader's snapshot; answered by APPEND_RESPONSE
    PRE_VOTE = 6  # term: the term the sender would campaign in; index/log_term: its ledger end
    PRE_VOTE_RESPONSE = 7
    VOTE = 8  # index/log_term: the candidate's ledger end index and term
    VOTE_RESPONSE = 9


class VoteRejection(Enum):
    """Why a (pre-)vote was refused; DLedger's VoteResponse.RESULT names (seed 002)."""

    EXPIRED_VOTE_TERM = 1  # the voter's term is newer than the request's
    EXPIRED_LEDGER_TERM = 2  # the candidate's last entry has an older term than the voter's
    SMALL_LEDGER_END_INDEX = 3  # same last term, but the candidate's log is shorter
    ALREADY_VOTED = 4  # the voter gave its vote in this term to someone else
    ALREADY_HAS_LEADER = 5  # the voter follows a live leader (in this term, or within its lease)
    TERM_NOT_READY = 6  # DLedger: the voter lagged in term; this core never sends it but obeys it
    TERM_SMALLER_THAN_LEDGER = 7  # DLedger: request term below the voter's ledger end term
    UNKNOWN_MEMBER = 8  # the candidate is not one of the voter's peers


class CampaignOutcome(Enum):
    """What a (pre-)candidate does after counting answers (DLedger's ParseResult)."""

    WAIT_TO_REVOTE = 1  # lost or undecided: wait a randomised election timeout
    REVOTE_IMMEDIATELY = 2  # enough voters only lagged in term: campaign again now
    WAIT_TO_VOTE_NEXT = 3  # a quorum has longer logs: wait with extra delay so they win first
    PASSED = 4  # a quorum granted: pre-vote moves to the vote, vote becomes leader


class DropReason(Enum):
    UNCOMMITTED_LIMIT = 1  # max_uncommitted_entries reached
    EMPTY_DATA = 2  # b"" is reserved for the leader's no-op entry
    LEADER_STEPPING_DOWN = 3  # reserved: leadership transfer in progress


@dataclass(frozen=True)
class Entry:
    term: int
    index: int
    data: bytes  # b"" is the leader's no-op, appended on election


@dataclass(frozen=True)
class HardState:
    term: int
    vote: NodeId | None
    commit: int


@dataclass(frozen=True)
class Snapshot:
    index: int
    term: int
    data: bytes
    peers: tuple[NodeId, ...]


@dataclass(frozen=True)
class Message:
    kind: MessageKind
    src: NodeId
    dst: NodeId
    term: int
    log_term: int = 0
    index: int = 0
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    reject: bool = False
    reject_reason: VoteRejection | None = None
    hint: int = 0  # APPEND_RESPONSE reject: the follower's guess of the last matching index
    hint_term: int = 0  # ... and the term of its entry there
    snapshot: Snapshot | None = None


@dataclass(frozen=True)
class SoftState:
    leader_id: NodeId | None
    role: Role


@dataclass(frozen=True)
class Ready:
    """One batch of work for the driver, to be done in this order.

    1. persist hard_state, entries (entries[0].index may overwrite a conflicting
       suffix: truncate from there), snapshot and compaction, durably;
    2. send messages;
    3. restore the state machine from `snapshot` if any, then apply
       committed_entries in order (they may include entries of this same Ready);
    4. call advance(ready).
    """

    soft_state: SoftState | None
    hard_state: HardState | None
    entries: tuple[Entry, ...]
    snapshot: Snapshot | None
    messages: tuple[Message, ...]
    committed_entries: tuple[Entry, ...]
    compaction: Snapshot | None = None  # local snapshot from compact(): persist, drop the log it covers, do NOT restore


@dataclass(frozen=True)
class RecoveredState:
    hard_state: HardState
    snapshot: Snapshot | None
    entries: tuple[Entry, ...]  # contiguous, starting right after the snapshot (or at 1)


@dataclass(frozen=True)
class RaftConfig:
    """Limits and timing of one Raft node. Time is in ticks (the driver picks the tick length)."""

    node_id: NodeId
    peers: tuple[NodeId, ...]  # every voter, including node_id
    heartbeat_ticks: int = 1  # leader sends heartbeats every N ticks
    max_heartbeat_leak: int = 3  # missed heartbeat intervals before a follower campaigns (DLedger maxHeartBeatLeak)
    election_jitter_ticks: int = 3  # randomised extra ticks, from the injected rng
    pre_vote: bool = True
    check_quorum: bool = True  # leader steps down without a quorum of acks within an election timeout
    max_entries_per_message: int = 64
    max_inflight_messages: int = 256
    max_uncommitted_entries: int = 10_000
    max_committed_entries_per_ready: int = 1_024

    def __post_init__(self) -> None:
        if self.node_id not in self.peers:
            raise ValueError(f"node_id {self.node_id} must be one of peers {self.peers}")
        if len(set(self.peers)) != len(self.peers):
            raise ValueError(f"duplicate peers {self.peers}")
        for name in ("heartbeat_ticks", "max_heartbeat_leak", "max_entries_per_message",
                     "max_inflight_messages", "max_uncommitted_entries",
                     "max_committed_entries_per_ready"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.election_jitter_ticks < 0:
            raise ValueError("election_jitter_ticks must be >= 0")

    @property
    def election_ticks(self) -> int:
        """Base election timeout: max_heartbeat_leak heartbeat intervals."""
        return self.heartbeat_ticks * self.max_heartbeat_leak

    @property
    def quorum(self) -> int:
        return len(self.peers) // 2 + 1

