"""Whether a replication peer has been silent too long, counting only time this side was awake.

Rules (issue 24, defect 6: under CPU contention both slaves of a fresh cluster were closed as
SLAVE_SILENT twice in their first 8 s, never joined the SyncStateSet, and the controller could
elect no one after the master's loss):

* The peer is *heard* whenever bytes of it arrive (the driver reports every receive, not
  parsed frames: a frame read behind a busy write pipeline still proves the peer alive).
* This side *looks* at least every ``look_every_ms`` (the driver's deadline asks for it).  A
  look more than ``pause_ms`` (half a look interval) past its due time was our own pause
  (the event loop stalled, the process was not scheduled), not the peer's silence: the time
  beyond the due look is not counted against the peer, and that look closes nothing (the
  reader has not had the loop since the pause, so the peer's bytes may wait unread in the
  socket buffer); the next look decides.  Lateness up to ``pause_ms`` is a timer's ordinary
  jitter and counts as awake time.
* A peer is silent when the awake time since it was last heard exceeds ``limit_ms``
  (``haHousekeepingInterval``).  Upstream measures wall time from the last read; that closes a
  healthy connection whenever the reader's own process pauses for the interval.

The values are plain ints of a monotonic clock; nothing here reads a clock.
"""
from __future__ import annotations


def look_interval_ms(heartbeat_interval_ms: int, limit_ms: int) -> int:
    """How often a side looks: every heartbeat, and at least four times per silence limit."""
    return max(1, min(heartbeat_interval_ms, limit_ms // 4))


class PeerSilence:
    def __init__(self, limit_ms: int, look_every_ms: int, now_ms: int):
        assert limit_ms > 0 and look_every_ms > 0, (limit_ms, look_every_ms)
        self.limit_ms = limit_ms
        self.look_every_ms = look_every_ms
        self.pause_ms = max(1, look_every_ms // 2)   # later than this past a due look: our own pause
        self.heard_ms = now_ms
        self.looked_ms = now_ms
        self.excused_ms = 0                         # our pauses not counted since (for status and tests)

    @classmethod
    def for_intervals(cls, heartbeat_interval_ms: int, limit_ms: int, now_ms: int) -> "PeerSilence":
        return cls(limit_ms, look_interval_ms(heartbeat_interval_ms, limit_ms), now_ms)

    def heard(self, now_ms: int) -> None:
        """Bytes of the peer arrived (this side was awake to take them)."""
        self.heard_ms = max(self.heard_ms, now_ms)
        self.looked_ms = max(self.looked_ms, now_ms)

    def look(self, now_ms: int) -> bool:
        """True: the peer has been silent too long and the connection should close."""
        late = now_ms - (self.looked_ms + self.look_every_ms)
        self.looked_ms = max(self.looked_ms, now_ms)
        if late > self.pause_ms:
            self.heard_ms = min(now_ms, self.heard_ms + late)   # our pause is not the peer's silence
            self.excused_ms += late
            return False                                        # the reader has not run since: look again
        return now_ms - self.heard_ms > self.limit_ms

    def silent_ms(self, now_ms: int) -> int:
        """Awake time since the peer was last heard, as of the last look."""
        return max(0, now_ms - self.heard_ms)

    def deadline_ms(self) -> int:
        """When the next look is due: the regular one, or the silence limit if sooner."""
        return min(self.looked_ms + self.look_every_ms, self.heard_ms + self.limit_ms + 1)


class OwnPauses:
    """This side's own pauses, seen as looks later than due (the replica group's timer).

    :meth:`look` returns how much later than due a look came when that is more than
    ``pause_ms`` (0 otherwise: ordinary jitter); time-based judgements of peers (the
    SyncStateSet's ``haMaxTimeSlaveNotCatchup``) do not count it, and such a look judges
    nobody (:meth:`paused`)."""

    def __init__(self, look_every_ms: int, now_ms: int):
        assert look_every_ms > 0, look_every_ms
        self.look_every_ms = look_every_ms
        self.pause_ms = max(1, look_every_ms // 2)
        self.looked_ms = now_ms

    def look(self, now_ms: int) -> int:
        """The pause this look reveals: its lateness past due if more than ``pause_ms``, else 0."""
        late = now_ms - (self.looked_ms + self.look_every_ms)
        self.looked_ms = max(self.looked_ms, now_ms)
        return late if late > self.pause_ms else 0

    def paused(self, pause_ms: int) -> bool:
        return pause_ms > 0

    def deadline_ms(self) -> int:
        return self.looked_ms + self.look_every_ms
