"""The pause fence: a master that may have been deposed while it was not running stops writing.

Rules:

* A master keeps writing while every controller is down (the data plane does not depend on
  the controller, scenario 53): nothing here expires with silence from the controller.
* What does fence it is its own pause: the broker ticks every ``brokerHeartbeatInterval``;
  when more than ``controllerHeartBeatTimeoutMills`` passed since the previous tick (SIGSTOP,
  a frozen VM, a stalled loop), the controller may have declared it dead and elected another
  master meanwhile.  From then on it accepts no write until the controller confirms it is
  still master at its epoch (:meth:`PauseFence.confirmed`).
* A write checked before the late tick has run is refused too: :meth:`writable` treats a
  tick older than the timeout as a pause already.
* Pure: times come in as arguments (monotonic milliseconds).
"""
from __future__ import annotations


class PauseFence:
    def __init__(self, timeout_ms: int):
        assert timeout_ms > 0
        self.timeout_ms = timeout_ms
        self.last_tick_ms: int | None = None
        self.paused = False

    def tick(self, now_ms: int) -> bool:
        """The broker's periodic tick; True when it reveals a pause (confirm with the controller)."""
        revealed = self.last_tick_ms is not None and now_ms - self.last_tick_ms > self.timeout_ms
        self.last_tick_ms = now_ms
        if revealed:
            self.paused = True
        return revealed

    def confirmed(self) -> None:
        """The controller's leader confirmed this broker is still master at its epoch."""
        self.paused = False

    def writable(self, now_ms: int) -> bool:
        if self.paused:
            return False
        return self.last_tick_ms is None or now_ms - self.last_tick_ms <= self.timeout_ms
