"""DataVersion: the version stamp RocketMQ puts on every metadata table.

Rules (reference section 3):
- ``compare`` orders by ``state_version``, then ``counter``, then ``timestamp_ms``.
- ``next_version(state_version, now_ms)`` stamps ``now_ms``, sets the state version and
  increments the counter.  Time is an input: this module never reads a clock.
- Pre-online reverse sync adopts the slave's table when ``master.compare(slave) <= 0``
  (ties adopt); :func:`reverse_sync_adopts` says so in one place, and
  ``metadata.pre_online_merge`` folds it over a group's replicas.
- ``stateVersion`` is the controller's master epoch in controller mode; outside it, 0 until a
  slave acts for its absent master: each acting turn opens the next one (:meth:`opening`),
  so a returning master adopts whatever the slave advanced even when its own counter ran
  further (upstream leaves it 0 and compares counters there).
- The counter moves by the update step (:class:`UpdateStep`) and whenever a changed table is
  written or handed to a peer, so two copies with one DataVersion hold one table.

Values are frozen; a table's owner replaces its DataVersion, it never mutates one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


class DataVersionFormatError(ValueError):
    """A dataVersion object in a file or a request is not of the expected shape."""


@dataclass(frozen=True, order=False)
class DataVersion:
    state_version: int = 0
    timestamp_ms: int = 0
    counter: int = 0

    def sort_key(self) -> tuple[int, int, int]:
        return (self.state_version, self.counter, self.timestamp_ms)

    def compare(self, other: "DataVersion") -> int:
        """-1, 0 or 1, ordering by stateVersion, then counter, then timestamp."""
        mine, theirs = self.sort_key(), other.sort_key()
        return (mine > theirs) - (mine < theirs)

    def next_version(self, now_ms: int, state_version: int | None = None) -> "DataVersion":
        return DataVersion(
            state_version=self.state_version if state_version is None else state_version,
            timestamp_ms=now_ms,
            counter=self.counter + 1,
        )

    def opening(self, now_ms: int, state_version: int | None = None) -> "DataVersion":
        """This version moved to ``state_version`` (None: the one after this version's) and
        bumped; itself when its stateVersion is already that or newer.  A slave that starts
        acting opens the next state version; in controller mode a new master opens its epoch."""
        target = self.state_version + 1 if state_version is None else state_version
        return self if target <= self.state_version else self.next_version(now_ms, target)

    def to_json(self) -> dict[str, int]:
        """The fastjson field names, as RocketMQ writes them."""
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp_ms}

    @classmethod
    def from_json(cls, value: Any, where: str = "dataVersion") -> "DataVersion":
        if not isinstance(value, Mapping):
            raise DataVersionFormatError(f"{where}: expected an object, got {type(value).__name__}")
        fields = {}
        for key, name in (("stateVersion", "state_version"), ("timestamp", "timestamp_ms"), ("counter", "counter")):
            raw = value.get(key, 0)
            if raw is None:
                raw = 0
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise DataVersionFormatError(f"{where}.{key}: expected an integer, got {raw!r}")
            fields[name] = raw
        return cls(**fields)


class UpdateStep:
    """RocketMQ's version update step (``consumerOffsetUpdateVersionStep``,
    ``delayOffsetUpdateVersionStep``): commits are counted per process, from 0 at every start,
    and every ``step``-th one bumps its table's DataVersion."""

    def __init__(self, step: int):
        assert step >= 1, "update steps are validated by the config binding"
        self.step = step
        self.commits = 0

    def commit(self) -> bool:
        """Count one commit; True when this one bumps the version."""
        self.commits += 1
        return self.commits % self.step == 0


def reverse_sync_adopts(master: DataVersion, slave: DataVersion) -> bool:
    """True when RocketMQ's pre-online reverse sync makes the master adopt the slave's table."""
    return master.compare(slave) <= 0
