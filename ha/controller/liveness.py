"""Broker liveness from heartbeats: each controller node's own, unreplicated view.

Rules (reference 4.4, 4.5):
- A broker is alive iff ``last_update_ms + timeout_ms >= now_ms``; the timeout is the one
  the broker sends, or ``default_timeout_ms``.
- epoch, max offset and confirm offset only move forward: they are replaced only when the
  new epoch is greater, or equal with a greater max offset.  Timestamp, timeout, address
  and election priority are always replaced.
- Heartbeats are not replicated (as in DLedger mode), so a node that has just become
  leader cannot tell a dead master from one it has not heard of yet: ``settled(now_ms)``
  is false until one default heartbeat timeout after ``became_leader(now_ms)``, and the
  inactive-master scan waits for it (upstream #5712, #10812) -- unless this node saw the
  master die itself: a broker whose heartbeats this node received and which then expired,
  or whose session (its watch stream) ended, is *known dead* (a tombstone) until it beats
  again.  Brokers heartbeat every controller member, so a follower that becomes leader has
  usually seen the master die and elects at once.
- ``next_expiry_ms()`` is when the next live broker expires: drivers expire on that
  deadline rather than on a scan period.
- The tables are bounded (``max_brokers``): a heartbeat beyond the limit is refused, the
  oldest tombstones are forgotten first.
- With ``pause_aware`` (the controller's driver), time is this node's awake time (issue 24,
  defect 6: liveness must not depend on the event loop being punctual): the node looks every
  quarter of the shortest broker timeout (``next_expiry_ms`` asks for it; heartbeats are looks
  too), and a look late by more than half that interval was the node's own pause (its loop
  stalled, with heartbeats waiting unread): every broker's heartbeat time moves on by the
  pause and that look expires nobody.  Simulations drive time exactly and leave it off.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

BrokerKey = tuple[str, str, int]  # (cluster, broker name, broker id)


@dataclass(frozen=True)
class BrokerLiveInfo:
    cluster_name: str
    broker_name: str
    broker_id: int
    address: str
    last_update_ms: int
    timeout_ms: int
    epoch: int = 0
    max_offset: int = 0
    confirm_offset: int = 0
    election_priority: int = 2**31 - 1

    def alive(self, now_ms: int) -> bool:
        return self.last_update_ms + self.timeout_ms >= now_ms


@dataclass(frozen=True)
class Heartbeat:
    cluster_name: str
    broker_name: str
    broker_id: int
    address: str
    epoch: int = 0
    max_offset: int = 0
    confirm_offset: int = 0
    timeout_ms: int = 0  # 0: the controller's default
    election_priority: int = 2**31 - 1


class BrokerLiveness:
    def __init__(self, default_timeout_ms: int, max_brokers: int, pause_aware: bool = False):
        assert default_timeout_ms > 0 and max_brokers > 0
        self.pause_aware = pause_aware
        self._looked_ms: int | None = None
        self.default_timeout_ms = default_timeout_ms
        self.max_brokers = max_brokers
        self._brokers: dict[BrokerKey, BrokerLiveInfo] = {}
        self._dead: dict[BrokerKey, int] = {}  # tombstones: key -> when this node saw it die
        self._leader_since_ms: int | None = None

    def heartbeat(self, beat: Heartbeat, now_ms: int) -> bool:
        """Record ``beat``; False when the table is full and the broker is new."""
        key = (beat.cluster_name, beat.broker_name, beat.broker_id)
        self._awake(now_ms)
        old = self._brokers.get(key)
        if old is None and len(self._brokers) >= self.max_brokers:
            return False
        timeout = beat.timeout_ms if beat.timeout_ms > 0 else self.default_timeout_ms
        info = BrokerLiveInfo(beat.cluster_name, beat.broker_name, beat.broker_id, beat.address, now_ms, timeout,
                              beat.epoch, beat.max_offset, beat.confirm_offset, beat.election_priority)
        if old is not None and not (beat.epoch > old.epoch or (beat.epoch == old.epoch
                                                               and beat.max_offset > old.max_offset)):
            info = dataclasses.replace(info, epoch=old.epoch, max_offset=old.max_offset,
                                       confirm_offset=old.confirm_offset)
        self._brokers[key] = info
        self._dead.pop(key, None)
        return True

    def info(self, cluster_name: str, broker_name: str, broker_id: int | None) -> BrokerLiveInfo | None:
        if broker_id is None:
            return None
        return self._brokers.get((cluster_name, broker_name, broker_id))

    def is_alive(self, cluster_name: str, broker_name: str, broker_id: int | None, now_ms: int) -> bool:
        info = self.info(cluster_name, broker_name, broker_id)
        return info is not None and info.alive(now_ms)

    def expire(self, now_ms: int) -> list[BrokerLiveInfo]:
        """Forget brokers whose heartbeat timed out (they become tombstones); return them."""
        if self._look(now_ms):
            return []
        dead = [info for info in self._brokers.values() if not info.alive(now_ms)]
        for info in dead:
            self._bury((info.cluster_name, info.broker_name, info.broker_id), now_ms)
        return dead

    def session_ended(self, cluster_name: str, broker_name: str, broker_id: int, now_ms: int) -> BrokerLiveInfo | None:
        """The broker's session ended (its process is gone): dead now, not after the timeout."""
        key = (cluster_name, broker_name, broker_id)
        info = self._brokers.get(key)
        if info is None:
            return None
        self._bury(key, now_ms)
        return info

    def _bury(self, key: BrokerKey, now_ms: int) -> None:
        self._brokers.pop(key, None)
        self._dead.pop(key, None)
        self._dead[key] = now_ms
        while len(self._dead) > self.max_brokers:
            del self._dead[next(iter(self._dead))]

    def known_dead(self, cluster_name: str, broker_name: str, broker_id: int | None) -> bool:
        """This node saw the broker die (expired after beating here, or its session ended)."""
        return broker_id is not None and (cluster_name, broker_name, broker_id) in self._dead

    def next_expiry_ms(self) -> int | None:
        if not self._brokers:
            return None
        expiry = min(info.last_update_ms + info.timeout_ms for info in self._brokers.values()) + 1
        if self.pause_aware and self._looked_ms is not None:
            return min(expiry, self._looked_ms + self._look_every_ms())
        return expiry

    # --- this node's own pauses (pause_aware) ----------------------------------------------------
    def _look_every_ms(self) -> int:
        return max(1, min([i.timeout_ms for i in self._brokers.values()] + [self.default_timeout_ms]) // 4)

    def _awake(self, now_ms: int) -> None:
        if self.pause_aware:
            self._looked_ms = now_ms if self._looked_ms is None else max(self._looked_ms, now_ms)

    def _look(self, now_ms: int) -> bool:
        """True when this look reveals a pause of this node: it is excused, nobody expires."""
        if not self.pause_aware:
            return False
        if self._looked_ms is None:
            self._looked_ms = now_ms
            return False
        every = self._look_every_ms()
        late = now_ms - (self._looked_ms + every)
        self._looked_ms = max(self._looked_ms, now_ms)
        if late <= every // 2 or not self._brokers:
            return False
        for key, info in self._brokers.items():
            self._brokers[key] = dataclasses.replace(info, last_update_ms=min(now_ms, info.last_update_ms + late))
        return True

    def forget(self, broker_name: str, broker_ids: frozenset[int] | None = None) -> None:
        for table in (self._brokers, self._dead):
            for key in [k for k in table if k[1] == broker_name and (not broker_ids or k[2] in broker_ids)]:
                del table[key]

    def became_leader(self, now_ms: int) -> None:
        self._leader_since_ms = now_ms

    def stepped_down(self) -> None:
        self._leader_since_ms = None

    def settled(self, now_ms: int) -> bool:
        """Leader long enough that silence means death (one heartbeat timeout)."""
        return self._leader_since_ms is not None and now_ms >= self._leader_since_ms + self.default_timeout_ms

    def __len__(self) -> int:
        return len(self._brokers)
