"""When a SYNC_MASTER may acknowledge a put (RIP-34 quorum write, RIP-44 allAckInSyncStateSet).

Rules (reference 2.8 and 4.7):

* Only SYNC_MASTER waits; ASYNC_MASTER acknowledges after the local write.
* Controller mode: fewer SyncStateSet members than ``minInSyncReplicas`` is an immediate
  IN_SYNC_REPLICAS_NOT_ENOUGH.  With ``allAckInSyncStateSet`` every member (self included)
  must ack; otherwise ``inSyncReplicas`` acks from any connection (learners included).
* Without a controller: ``inSync = min(alive, 1 + slaves within haMaxGapNotInSync)``;
  ``need = inSyncReplicas``, with ``enableAutoInSyncReplicas`` ``max(min(need, inSync),
  minInSyncReplicas)``; ``need > inSync`` is IN_SYNC_REPLICAS_NOT_ENOUGH.
* ``need <= 1`` acknowledges at once.  A wait lasts at most ``slaveTimeout``
  (:class:`AckWaits` expires it as FLUSH_SLAVE_TIMEOUT).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from ha.replication.config import BrokerRole, HaConfig

ALL_IN_SYNC_STATE_SET = -1


class QuorumRejection(str, Enum):
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True)
class AckNow:
    pass


@dataclass(frozen=True)
class WaitForAcks:
    need: int   # replicas including self, or ALL_IN_SYNC_STATE_SET


def decide_controller_mode(config: HaConfig, sync_state_set_size: int) -> AckNow | WaitForAcks | QuorumRejection:
    if config.broker_role is not BrokerRole.SYNC_MASTER:
        return AckNow()
    if sync_state_set_size < config.min_in_sync_replicas:
        return QuorumRejection.IN_SYNC_REPLICAS_NOT_ENOUGH
    if config.all_ack_in_sync_state_set:
        return AckNow() if sync_state_set_size <= 1 else WaitForAcks(ALL_IN_SYNC_STATE_SET)
    return AckNow() if config.in_sync_replicas <= 1 else WaitForAcks(config.in_sync_replicas)


def decide_quorum_mode(config: HaConfig, alive_replicas: int, in_sync_slaves: int) -> AckNow | WaitForAcks | QuorumRejection:
    if config.broker_role is not BrokerRole.SYNC_MASTER:
        return AckNow()
    in_sync = min(alive_replicas, 1 + in_sync_slaves)
    need = config.in_sync_replicas
    if config.enable_auto_in_sync_replicas:
        need = max(min(need, in_sync), config.min_in_sync_replicas)
    if need > in_sync:
        return QuorumRejection.IN_SYNC_REPLICAS_NOT_ENOUGH
    return AckNow() if need <= 1 else WaitForAcks(need)


@dataclass(frozen=True)
class PendingAck:
    request_id: int
    offset: int          # the put's end offset: replicas must ack at least this
    need: int
    deadline_ms: int


class AckWaits:
    """Puts waiting for replica acks, bounded in number and time."""

    def __init__(self, limit: int):
        self.limit = limit
        self.pending: dict[int, PendingAck] = {}
        self._in_order = True          # deadlines never decrease in insertion order
        self._last_deadline_ms = 0

    def add(self, wait: PendingAck) -> QuorumRejection | None:
        if len(self.pending) >= self.limit:
            return QuorumRejection.SLAVE_NOT_AVAILABLE
        if not self.pending:
            self._in_order = True
        elif wait.deadline_ms < self._last_deadline_ms:
            self._in_order = False
        self._last_deadline_ms = wait.deadline_ms
        self.pending[wait.request_id] = wait
        return None

    def lower_to(self, need: int) -> None:
        """RIP-34's degrade for the puts already waiting: none needs more than ``need`` replicas
        now (a slave left; ``enableAutoInSyncReplicas`` asks a new put for no more either).  A
        put made just before its slave died otherwise waited the whole ``slaveTimeout`` and
        failed -- a receive's pop record among them, whose messages then stayed invisible for
        the invisible duration (issue 24 defect 3: an escaped delay message 60 s late)."""
        for request_id, wait in list(self.pending.items()):
            if wait.need != ALL_IN_SYNC_STATE_SET and wait.need > need:
                self.pending[request_id] = replace(wait, need=need)

    def satisfied(self, acked_replicas, sync_state_set_acked) -> list[int]:
        """Request ids now acknowledged.  ``acked_replicas(offset)`` counts any connection,
        ``sync_state_set_acked(offset)`` says whether every set member holds ``offset``."""
        done = []
        for request_id, wait in list(self.pending.items()):
            if wait.need == ALL_IN_SYNC_STATE_SET:
                ok = sync_state_set_acked(wait.offset)
            else:
                ok = acked_replicas(wait.offset) >= wait.need
            if ok:
                done.append(request_id)
                del self.pending[request_id]
        return done

    def earliest_deadline_ms(self) -> int | None:
        """The earliest deadline of the waits.  Every wait gets the same ``slaveTimeout`` from a
        clock that never goes back, and :meth:`lower_to` keeps a wait's place, so the first
        added is the first due: no scan of every wait, twice per put.  Waits added out of
        deadline order (a caller's clock went back) are scanned."""
        if self._in_order:
            for wait in self.pending.values():
                return wait.deadline_ms
            return None
        return min((w.deadline_ms for w in self.pending.values()), default=None)

    def expire(self, now_ms: int) -> list[int]:
        """Request ids whose ``slaveTimeout`` passed: FLUSH_SLAVE_TIMEOUT."""
        late = [rid for rid, wait in self.pending.items() if now_ms >= wait.deadline_ms]
        for request_id in late:
            del self.pending[request_id]
        return late
