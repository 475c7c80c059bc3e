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
  inactive-master scan waits for it (upstream #5712, #10812).
- The table is bounded (``max_brokers``); a heartbeat beyond the limit is refused.
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
    def __init__(self, default_timeout_ms: int, max_brokers: int):
        assert default_timeout_ms > 0 and max_brokers > 0
        self.default_timeout_ms = default_timeout_ms
        self.max_brokers = max_brokers
        self._brokers: dict[BrokerKey, BrokerLiveInfo] = {}
        self._leader_since_ms: int | None = None

    def heartbeat(self, beat: Heartbeat, now_ms: int) -> bool:
        """Record ``beat``; False when the table is full and the broker is new."""
        key = (beat.cluster_name, beat.broker_name, beat.broker_id)
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
        return True

    def info(self, cluster_name: str, broker_name: str, broker_id: int | None) -> BrokerLiveInfo | None:
        if broker_id is None:
            return None
        return self._brokers.get((cluster_name, broker_name, broker_id))

    def is_alive(self, cluster_name: str, broker_name: str, broker_id: int | None, now_ms: int) -> bool:
        info = self.info(cluster_name, broker_name, broker_id)
        return info is not None and info.alive(now_ms)

    def expire(self, now_ms: int) -> list[BrokerLiveInfo]:
        """Forget brokers whose heartbeat timed out; return them."""
        dead = [info for info in self._brokers.values() if not info.alive(now_ms)]
        for info in dead:
            del self._brokers[(info.cluster_name, info.broker_name, info.broker_id)]
        return dead

    def forget(self, broker_name: str, broker_ids: frozenset[int] | None = None) -> None:
        for key in [k for k in self._brokers if k[1] == broker_name and (not broker_ids or k[2] in broker_ids)]:
            del self._brokers[key]

    def became_leader(self, now_ms: int) -> None:
        self._leader_since_ms = now_ms

    def stepped_down(self) -> None:
        self._leader_since_ms = None

    def settled(self, now_ms: int) -> bool:
        """Leader long enough that silence means death (one heartbeat timeout)."""
        return self._leader_since_ms is not None and now_ms >= self._leader_since_ms + self.default_timeout_ms

    def __len__(self) -> int:
        return len(self._brokers)
