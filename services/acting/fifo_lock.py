"""The FIFO lock quorum's driver (``lockInStrictMode``; the rules are ``ha.acting.lock_quorum``'s).

Rules:
- Off (the default) nothing here runs: a replica delivers the FIFO queues it serves, as it
  did before (its own lease, which nobody else asks for).
- Strict: before a receive of a FIFO group plans deliveries, the replica takes (or renews,
  when less than half a lease is left) its lease on each of the request's queues locally,
  then asks every other member of the group's member set (``LockQueues`` on the internal
  address the nameserver lists) for the same leases, all at once, waiting at most
  ``lockQuorumTimeoutMillis``.  A queue is delivered only if the local lease and enough
  grants make a quorum of the configured ``totalReplicas``; otherwise the local lease is
  given back and the queue is skipped by this receive (its long poll goes on).
- A replica grants a peer's lease unless another holder's is unexpired (its own included:
  an acting slave holding a queue refuses a returning master until it lets go).  A replica
  that stops acting releases its leases at once.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable, Mapping, Sequence

from ha.acting.lock_quorum import QueueLeases, decide_lock
from proto import acting_pb2 as pb
from scheduler.pop.records import QueueKey
from services.acting.client import ActingClient, ActingError

log = logging.getLogger(__name__)


class FifoLocks:
    def __init__(self, broker_name: str, own_id: Callable[[], int], config, total_replicas: int, clock,
                 peers: Callable[[], Mapping[int, str]], client: ActingClient | None = None):
        """``own_id()``: this replica's id now; ``peers()``: the group's members (id -> internal address)."""
        self.broker_name, self.own_id, self.config, self.clock = broker_name, own_id, config, clock
        self.total_replicas, self.peers, self.client = total_replicas, peers, client
        self.leases = QueueLeases()

    @property
    def strict(self) -> bool:
        return self.config.lock_in_strict_mode

    # ---- serving peers -----------------------------------------------------------------------
    def grant(self, keys: Iterable[QueueKey], holder_id: int, lease_ms: int) -> list[QueueKey]:
        now = self.clock.now_ms()
        return [k for k in keys if self.leases.try_grant(k, holder_id, now, lease_ms)]

    def release(self, keys: Iterable[QueueKey], holder_id: int) -> None:
        self.leases.release(keys, holder_id)

    def release_own(self) -> None:
        self.leases.release_all(self.own_id())

    # ---- this replica's deliveries -------------------------------------------------------------
    async def acquire(self, keys: Sequence[QueueKey]) -> set[QueueKey]:
        """The queues of ``keys`` this replica may deliver now (all of them when not strict)."""
        if not self.strict:
            return set(keys)
        now, own, lease_ms = self.clock.now_ms(), self.own_id(), self.config.fifo_lock_lease_ms
        held = {k for k in keys if not self.leases.needs_renewal(k, own, now, lease_ms)}
        wanted = [k for k in keys if k not in held and self.leases.try_grant(k, own, now, lease_ms)]
        if not wanted:
            return held
        grants = await self._ask_peers(wanted, own, lease_ms)
        for key in wanted:
            decision = decide_lock(True, self.total_replicas, True, grants.get(key, 0))
            if decision.locked:
                held.add(key)
            else:
                self.leases.release([key], own)
                log.debug("FIFO queue %s of %s: %d of %d replicas granted the lock", key, self.broker_name,
                          decision.granted, decision.need)
        return held

    async def _ask_peers(self, keys: list[QueueKey], own: int, lease_ms: int) -> dict[QueueKey, int]:
        peers = {i: a for i, a in self.peers().items() if i != own}
        if not peers or self.client is None:
            return {}
        request = pb.ActingLockQueuesRequest(broker_name=self.broker_name, holder_id=own, lease_ms=lease_ms,
                                             queues=[pb.ActingQueueKey(group=k.group, topic=k.topic, queue_id=k.queue_id)
                                                     for k in keys])
        calls = [self._ask(address, peer_id, request) for peer_id, address in peers.items()]
        counts: dict[QueueKey, int] = {}
        for granted in await asyncio.gather(*calls):
            for key in granted:
                counts[key] = counts.get(key, 0) + 1
        return counts

    async def _ask(self, address: str, peer_id: int, request: pb.ActingLockQueuesRequest) -> list[QueueKey]:
        request = pb.ActingLockQueuesRequest(broker_name=request.broker_name, broker_id=peer_id, holder_id=request.holder_id,
                                             queues=request.queues, lease_ms=request.lease_ms)
        try:
            reply = await self.client.call(address, "LockQueues", request, self.config.lock_quorum_timeout_ms)
        except ActingError as exc:
            log.debug("FIFO lock: member %d of %s at %s did not grant: %s", peer_id, self.broker_name, address, exc)
            return []
        return [QueueKey(q.group, q.topic, q.queue_id) for q in reply.granted]
