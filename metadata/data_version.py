"""DataVersion: the version stamp RocketMQ puts on every metadata table.

Rules (reference section 3):
- ``compare`` orders by ``state_version``, then ``counter``, then ``timestamp_ms``.
- ``next_version(state_version, now_ms)`` stamps ``now_ms``, sets the state version and
  increments the counter.  Time is an input: this module never reads a clock.
- Pre-online reverse sync adopts the slave's table when ``master.compare(slave) <= 0``
  (ties adopt); :func:`reverse_sync_adopts` says so in one place.

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


def reverse_sync_adopts(master: DataVersion, slave: DataVersion) -> bool:
    """True when RocketMQ's pre-online reverse sync makes the master adopt the slave's table."""
    return master.compare(slave) <= 0
