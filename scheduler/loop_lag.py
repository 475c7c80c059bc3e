"""How late the event loop runs what is due: one number a slow handler, a stalled snapshot or
a thread holding the GIL all show up in.

Rules:
- :class:`LoopLag` is looked at by a periodic task every ``interval_ms``; a look later than
  its interval after the previous one was held up by whatever ran on the loop (or held the GIL)
  meanwhile, and the excess is observed (``observe(seconds)``, a histogram in the container:
  ``relaymq_event_loop_lag_seconds``).  A look on time observes 0.
- The first look only starts the count.  Time is the caller's monotonic clock.
"""
from __future__ import annotations

from typing import Callable


class LoopLag:
    def __init__(self, interval_ms: int, monotonic_ms: Callable[[], float], observe: Callable[[float], None]):
        assert interval_ms > 0
        self.interval_ms, self._monotonic_ms, self._observe = interval_ms, monotonic_ms, observe
        self._last: float | None = None
        self.worst_ms = 0.0

    def look(self) -> None:
        now = self._monotonic_ms()
        if self._last is not None:
            late = max(0.0, now - self._last - self.interval_ms)
            self.worst_ms = max(self.worst_ms, late)
            self._observe(late / 1000)
        self._last = now
