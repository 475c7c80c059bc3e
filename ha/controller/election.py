"""The election policy (RocketMQ's ``DefaultElectPolicy``, reference 4.4).

Rules, applied to the SyncStateSet first and, only when ``allow_unclean``, then to all
replicas:
1. keep only alive brokers;
2. the old master, if alive and either nothing is preferred or it is the preferred one;
3. else the preferred broker if it is alive in this set, else nobody;
4. else the best by epoch (higher first), max offset (higher first), election priority
   (lower first), then broker id (lower first, so ties are deterministic).
The function is pure: liveness and heartbeat figures come in as a mapping.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from ha.controller.liveness import BrokerLiveInfo


def _try_elect(candidates: Iterable[int], alive: Mapping[int, BrokerLiveInfo], old_master: int | None,
               prefer: int | None) -> int | None:
    live = sorted(i for i in candidates if i in alive)
    if not live:
        return None
    if old_master is not None and old_master in live and (prefer is None or prefer == old_master):
        return old_master
    if prefer is not None:
        return prefer if prefer in live else None
    return min(live, key=lambda i: (-alive[i].epoch, -alive[i].max_offset, alive[i].election_priority, i))


def choose_master(sync_state_set: Iterable[int], all_replicas: Iterable[int], alive: Mapping[int, BrokerLiveInfo],
                  old_master: int | None, prefer: int | None, allow_unclean: bool) -> int | None:
    """The new master's id, the old master's id when it stays, or None when nobody fits."""
    chosen = _try_elect(sync_state_set, alive, old_master, prefer)
    if chosen is None and allow_unclean:
        chosen = _try_elect(all_replicas, alive, old_master, prefer)
    return chosen
