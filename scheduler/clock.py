"""The one place drivers read time from.

Cores never read clocks: drivers pass ``now_ms`` in.  Tests substitute :class:`ManualClock`.
``now_ms`` is wall-clock (store timestamps, user-facing times); ``monotonic_ms`` is for
deadlines and intervals.
"""
from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def monotonic_ms(self) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


def utc_offset_ms(now_ms: int) -> int:
    """The host's local time minus UTC at ``now_ms`` (the official clients sign their local
    time suffixed Z, so signature checks accept either)."""
    return time.localtime(now_ms // 1000).tm_gmtoff * 1000


class ManualClock:
    """A clock that moves only when told to; for tests and simulations."""

    def __init__(self, now_ms: int = 1_700_000_000_000, monotonic_ms: int = 0):
        self._now = now_ms
        self._mono = monotonic_ms

    def now_ms(self) -> int:
        return self._now

    def monotonic_ms(self) -> int:
        return self._mono

    def advance(self, ms: int) -> None:
        assert ms >= 0, "time never goes back"
        self._now += ms
        self._mono += ms
