"""RaftNode: the public face of the Raft core (skeleton; the logic lands next)."""

from __future__ import annotations

import random

from ha.raft.types import RaftConfig, Ready, RecoveredState, Role, Message, NodeId


class RaftNode:
    def __init__(self, config: RaftConfig, rng: random.Random,
                 recovered: RecoveredState | None = None) -> None:
        self.config = config

    def tick(self) -> None:
        raise NotImplementedError

    def step(self, message: Message) -> None:
        raise NotImplementedError

    def campaign(self) -> None:
        raise NotImplementedError

    def propose(self, data: bytes) -> int:
        raise NotImplementedError

    def has_ready(self) -> bool:
        raise NotImplementedError

    def ready(self) -> Ready:
        raise NotImplementedError

    def advance(self, ready: Ready) -> None:
        raise NotImplementedError

    def compact(self, index: int, data: bytes) -> None:
        raise NotImplementedError

    @property
    def leader_id(self) -> NodeId | None:
        raise NotImplementedError

    @property
    def role(self) -> Role:
        raise NotImplementedError

    @property
    def term(self) -> int:
        raise NotImplementedError

    @property
    def commit_index(self) -> int:
        raise NotImplementedError

    @property
    def applied_index(self) -> int:
        raise NotImplementedError

    @property
    def last_index(self) -> int:
        raise NotImplementedError
