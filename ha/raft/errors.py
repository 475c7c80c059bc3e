"""Misuse of the Raft core by its driver: the small exception hierarchy of ha.raft.

Rules: a peer's bad input never raises (it is dropped or answered with a named
reason); a bug is an assertion; only a caller asking for something the node
cannot do right now gets one of these exceptions.
"""

from __future__ import annotations

from ha.raft.types import DropReason, NodeId


class RaftError(Exception):
    """Base class of the exceptions the Raft core raises to its caller."""


class NotLeader(RaftError):
    """A proposal reached a node that is not the leader; `leader_id` is its best guess."""

    def __init__(self, leader_id: NodeId | None) -> None:
        super().__init__(f"not leader; leader is {leader_id}")
        self.leader_id = leader_id


class ProposalDropped(RaftError):
    """The leader refused a proposal for a named reason (a limit, or a bad payload)."""

    def __init__(self, reason: DropReason) -> None:
        super().__init__(f"proposal dropped: {reason.name}")
        self.reason = reason


class InvalidCompaction(RaftError):
    """compact() was asked for an index that is not applied (or beyond the log)."""

    def __init__(self, index: int, applied: int) -> None:
        super().__init__(f"cannot compact at {index}: applied index is {applied}")
        self.index = index
        self.applied = applied
