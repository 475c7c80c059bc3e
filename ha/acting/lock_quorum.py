"""The lock that keeps FIFO delivery one-at-a-time across a master switch (RIP-32 lock quorum;
reference 2.7, translated to the gRPC protocol's server-side FIFO delivery).

Upstream's orderly consumers lock a queue on the broker; in the gRPC protocol the server owns
FIFO order (one message of a message group in flight at a time), so the lock here is the
right of one *replica* to deliver a FIFO queue of a group: a lease on (group, topic, queue)
held by a replica id until a deadline.

Rules:
* Non-strict (``lockInStrictMode = false``, the default): the lease is local; a replica that
  serves a FIFO queue delivers it.  A returning master and an acting slave may then both
  deliver one queue for a moment (availability over order).
* Strict: a replica delivers a FIFO queue only while it holds the lease on a quorum of the
  group's *configured* ``totalReplicas`` (``totalReplicas / 2 + 1``, itself included), never
  of the live members; a quorum of 1 is the local lease.  With two replicas both must grant:
  an acting slave whose master is dead delivers no FIFO queue (order over availability), and
  a returning master cannot take a queue an acting slave still holds.
* A replica grants a lease when nobody else holds an unexpired one on that queue; the holder
  renews its own.  Leases expire (``fifoLockLeaseMillis``) so a dead holder blocks a queue
  for at most that long; a replica that stops serving (an acting slave handing over) releases
  its leases at once.
* Pure: ``now_ms`` is an argument; the driver (services.acting.fifo_lock) does the calls.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Iterable

QueueKey = Hashable  # (group, topic, queue id) in the driver


def lock_quorum(total_replicas: int) -> int:
    assert total_replicas >= 1
    return total_replicas // 2 + 1


@dataclass(frozen=True)
class Lease:
    holder_id: int
    until_ms: int


class QueueLeases:
    """One replica's table of leases: who may deliver each FIFO queue, until when."""

    def __init__(self) -> None:
        self._leases: dict[QueueKey, Lease] = {}

    def holder(self, key: QueueKey, now_ms: int) -> int | None:
        lease = self._leases.get(key)
        return lease.holder_id if lease is not None and lease.until_ms > now_ms else None

    def try_grant(self, key: QueueKey, holder_id: int, now_ms: int, lease_ms: int) -> bool:
        """Grant (or renew) ``holder_id``'s lease unless another holder's is unexpired."""
        current = self.holder(key, now_ms)
        if current is not None and current != holder_id:
            return False
        self._leases[key] = Lease(holder_id, now_ms + lease_ms)
        return True

    def release(self, keys: Iterable[QueueKey], holder_id: int) -> None:
        for key in list(keys):
            lease = self._leases.get(key)
            if lease is not None and lease.holder_id == holder_id:
                del self._leases[key]

    def release_all(self, holder_id: int) -> None:
        self.release([k for k, lease in self._leases.items() if lease.holder_id == holder_id], holder_id)

    def held_by(self, holder_id: int, now_ms: int) -> list[QueueKey]:
        return [k for k, lease in self._leases.items() if lease.holder_id == holder_id and lease.until_ms > now_ms]

    def needs_renewal(self, key: QueueKey, holder_id: int, now_ms: int, lease_ms: int) -> bool:
        """True unless ``holder_id`` holds ``key`` for at least half a lease more."""
        lease = self._leases.get(key)
        return lease is None or lease.holder_id != holder_id or lease.until_ms - now_ms < lease_ms // 2

    def expire(self, now_ms: int) -> None:
        for key in [k for k, lease in self._leases.items() if lease.until_ms <= now_ms]:
            del self._leases[key]


@dataclass(frozen=True)
class LockDecision:
    locked: bool
    need: int  # replicas that must grant, this one included
    granted: int  # replicas that granted, this one included


def decide_lock(strict: bool, total_replicas: int, local_granted: bool, remote_grants: int) -> LockDecision:
    """Whether this replica may deliver a FIFO queue, from its own grant and its peers'."""
    if not local_granted:
        return LockDecision(False, 1 if not strict else lock_quorum(total_replicas), 0)
    if not strict:
        return LockDecision(True, 1, 1)
    need = lock_quorum(total_replicas)
    granted = 1 + remote_grants
    return LockDecision(granted >= need, need, granted)
