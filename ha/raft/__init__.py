"""Raft consensus core for the controller: a pure state machine in the shape of etcd-io/raft.

Rules: nothing in this package does I/O, reads a clock or uses global randomness.
Time is `RaftNode.tick()`, randomness is the `random.Random` passed in, and every
output (what to persist, what to send, what to apply) is returned in a `Ready`.
"""

from ha.raft.errors import NotLeader, ProposalDropped, RaftError
from ha.raft.node import RaftNode
from ha.raft.types import (
    CampaignOutcome,
    DropReason,
    Entry,
    HardState,
    Message,
    MessageKind,
    NodeId,
    RaftConfig,
    Ready,
    RecoveredState,
    Role,
    Snapshot,
    SoftState,
    VoteRejection,
)

__all__ = [
    "CampaignOutcome",
    "DropReason",
    "Entry",
    "HardState",
    "Message",
    "MessageKind",
    "NodeId",
    "NotLeader",
    "ProposalDropped",
    "RaftConfig",
    "RaftError",
    "RaftNode",
    "Ready",
    "RecoveredState",
    "Role",
    "Snapshot",
    "SoftState",
    "VoteRejection",
]
