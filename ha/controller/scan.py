"""Which broker sets the leader should re-elect for (the inactive-master scan, reference 4.5).

Rules:
- A leader elects for a set whose master it knows dead (it saw the master's heartbeats stop
  or its session end) at once; otherwise only once settled, one heartbeat timeout after
  becoming leader, because heartbeats are not replicated and a new leader may not have
  heard from every broker yet.
- A set needs an election when it has had a master (master epoch > 0) and either its
  recorded master is not alive (elect a successor, or clear the dead master), or no master
  is recorded and some replica is alive (someone may now be electable).  A set with no
  master and nobody alive is left alone, so dead sets do not churn epochs.
- The answer is a sorted list of controller-triggered ``ElectMaster`` requests; the driver
  decides and proposes each like any other request.
- It runs on the leader's event loop every few seconds over every set: one pass over the
  table, skipping never-elected sets first, sorting only the (few) answers.
"""
from __future__ import annotations

from ha.controller.liveness import BrokerLiveness
from ha.controller.replicas import ReplicasInfo
from ha.controller.requests import ElectMaster


def elections_needed(replicas: ReplicasInfo, liveness: BrokerLiveness, now_ms: int) -> list[ElectMaster]:
    settled = liveness.settled(now_ms)
    needed = []
    for name, state in replicas.sync_state_info_table.items():
        if state.is_first_time_for_elect or name not in replicas.replica_info_table:
            continue
        cluster = state.cluster_name
        if liveness.is_alive(cluster, name, state.master_broker_id, now_ms):
            continue
        if not settled and not liveness.known_dead(cluster, name, state.master_broker_id):
            continue
        members = replicas.replica_info_table[name].brokers
        if state.master_broker_id is not None or any(liveness.is_alive(cluster, name, i, now_ms) for i in members):
            needed.append(ElectMaster(cluster, name))
    return sorted(needed, key=lambda request: request.broker_name)
