"""Progress: the leader's view of one follower's log, and the flow control around it.

Rules:
- PROBE sends one append (or snapshot) and then pauses until that follower answers
  or a heartbeat response arrives; it finds the match point after a leader change.
- REPLICATE streams optimistically: `next_index` runs ahead of `match`, bounded by
  max_inflight_messages unacknowledged appends.
- match only grows; next_index > match always.
This is mutable leader-private bookkeeping, not a value, so it is not frozen.
"""

from __future__ import annotations

from enum import Enum


class ProgressState(Enum):
    PROBE = 1
    REPLICATE = 2


class Progress:
    def __init__(self, next_index: int, max_inflight: int) -> None:
        self.match = 0
        self.next_index = next_index
        self.state = ProgressState.PROBE
        self.paused = False  # PROBE: a message is out, wait for an answer
        self.inflight: list[int] = []  # REPLICATE: last index of each unacknowledged append
        self.max_inflight = max_inflight
        self.last_active_tick = 0  # leader's tick count when this follower last answered

    def is_paused(self) -> bool:
        if self.state is ProgressState.PROBE:
            return self.paused
        return len(self.inflight) >= self.max_inflight

    def sent(self, last_index: int, entry_count: int) -> None:
        """Record an append whose last entry is last_index."""
        if self.state is ProgressState.REPLICATE:
            if entry_count:
                self.next_index = last_index + 1
                self.inflight.append(last_index)
        else:
            self.paused = True

    def maybe_update(self, index: int) -> bool:
        """A successful append response up to index; True when match moved."""
        self.paused = False
        self.inflight = [i for i in self.inflight if i > index]
        if index <= self.match:
            return False
        self.match = index
        self.next_index = max(self.next_index, index + 1)
        return True

    def become_probe(self) -> None:
        self.state = ProgressState.PROBE
        self.next_index = self.match + 1
        self.paused = False
        self.inflight = []

    def become_replicate(self) -> None:
        self.state = ProgressState.REPLICATE
        self.next_index = self.match + 1
        self.paused = False
        self.inflight = []

    def maybe_decrease_to(self, rejected: int, next_guess: int) -> bool:
        """A rejected append of prev index `rejected`; False when the rejection is stale."""
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.become_probe()
            self.next_index = max(self.match + 1, min(next_guess, rejected))
            return True
        if self.next_index - 1 != rejected:
            return False
        self.next_index = max(self.match + 1, min(rejected, next_guess))
        self.paused = False
        return True
