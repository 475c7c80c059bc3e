"""Seeded simulation of one broker group (three replicas, allAckInSyncStateSet, SYNC_FLUSH)
on the pure replication and failover cores: tests/support/group_sim.

Each seed runs ``STEPS`` steps of crashes (kill -9, and power losses with torn writes),
pauses, partitions (a broker from everyone, from the controller, from its peers; the
controller alone), controller crashes, slow disks, lost and delayed messages, with puts and
reads throughout; the named checkers of group_sim/invariants.py run after every step, and at
the end the group must serve again with converged replicas.  A failure names the seed, the
invariant, the state and the last events; ``BROKER_SIM_SEEDS="0-9999"`` runs others (the
figure: bench/bench_group_simulation.py).
"""
from __future__ import annotations

import os
import re

import pytest

from tests.support.group_sim.invariants import InvariantViolation
from tests.support.group_sim.simulation import FaultRates, run

SEEDS = tuple(range(100))
STEPS = 1000


def _seeds() -> tuple[int, ...]:
    spec = os.environ.get("BROKER_SIM_SEEDS")
    if not spec:
        return SEEDS
    seeds: list[int] = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        seeds.extend(range(int(low), int(high or low) + 1))
    return tuple(seeds)


@pytest.mark.parametrize("seed", _seeds())
def test_group_keeps_every_invariant(seed):
    sim = run(seed, STEPS)
    assert sim.acked, "the run acknowledged nothing: the load or the faults are wrong"


def test_a_seed_reproduces_its_run_exactly():
    first, second = run(7, 400), run(7, 400)
    assert first.log == second.log and first.acked == second.acked and first.consumed == second.consumed
    assert [b.disk.log for b in first.brokers.values()] == [b.disk.log for b in second.brokers.values()]


def test_the_checkers_catch_a_master_that_acknowledges_alone():
    """The harness itself: a core that forgets the SyncStateSet must be caught."""
    from ha.replication import quorum
    original = quorum.decide_controller_mode
    try:
        quorum.decide_controller_mode = lambda config, size: quorum.AckNow()
        import ha.replication.master_group as master_group
        master_group.decide_controller_mode = quorum.decide_controller_mode
        with pytest.raises(InvariantViolation) as caught:
            for seed in range(20):
                run(seed, STEPS)
        assert caught.value.name in ("no_acknowledged_message_lost", "liveness_after_heal",
                                     "consumer_offsets_never_roll_back")
    finally:
        quorum.decide_controller_mode = original
        master_group.decide_controller_mode = original


def test_a_master_power_loss_with_a_quick_restart_renews_the_epoch():
    """Seed 19 with every master crash a power loss: the master shipped bytes before its own
    fdatasync, lost them, and restarted before the controller noticed.  Resuming the epoch, it
    wrote other records where a slave held the lost ones under the same (epoch, start), and the
    handshake could not see the difference.  It now renews the epoch (ha.role.decisions):
    the new epoch entry at its post-crash end makes the slaves cut the lost tail."""
    sim = run(19, STEPS, FaultRates(master_power_loss=1.0))
    assert any("RenewEpoch" in line for line in sim.log)


def _renewed_after_stepping_down(log: list[str]) -> bool:
    """A broker stepped down (``Elect(step_down=True)``) and, before it next became master or
    slave, renewed its epoch: an old view had named it master again."""
    stepped = set()
    for line in log:
        found = re.match(r"\d+: broker (\d+) (\w+)\((.*)", line)
        if found is None:
            continue
        broker, effect, rest = found.groups()
        if effect == "Elect" and "step_down=True" in rest:
            stepped.add(broker)
        elif effect == "RenewEpoch" and broker in stepped:
            return True
        elif effect in ("BecomeMaster", "BecomeSlave"):
            stepped.discard(broker)
    return False


@pytest.mark.parametrize("seed", (1305, 3289, 9706))
def test_a_master_never_resumes_its_epoch_from_an_old_view(seed):
    """Seeds 1305 and 3289: a master stepped down (a view without a master) and an old view
    named it master again at the same epoch, with a SyncStateSet older than the controller's;
    it acknowledged alone (1332 was such a run until replication batches waited for acks,
    haCoalesceBytes, changed it).  Seed 9706: the same after a restart (9757 was, until issue
    24's rejoin fix changed its run).  Both now renew the epoch."""
    sim = run(seed, STEPS)
    if seed == 9706:
        assert any("RenewEpoch" in line for line in sim.log)
    else:
        assert _renewed_after_stepping_down(sim.log)


@pytest.mark.parametrize("seed", (5111, 6626))
def test_a_slave_holding_only_a_superseded_epoch_catches_up(seed):
    """Seeds 5111 and 6626: a master lost its epoch's records to a power loss after shipping
    them, its empty epoch was replaced by the next at the same start, and the slaves holding
    those records shared no epoch with it: NO_CONSISTENT_POINT for ever (liveness_after_heal).
    The handshake now cuts such a slave at its first epoch start (ha.replication.handshake)."""
    sim = run(seed, STEPS)
    assert any("truncates" in line and "-> 0" in line for line in sim.log)


@pytest.mark.parametrize("mutation", ["a new master opens no epoch", "a deposed master keeps serving slaves"])
def test_the_simulation_runs_the_production_order_of_a_role_change(monkeypatch, mutation):
    """The simulated brokers carry out ha.role.replica_node's effects, as BrokerReplica does:
    break the order the production driver follows and the checkers must notice."""
    from ha.role import replica_node

    original = replica_node.ReplicaNode._effects

    def mutated(self, local, decision):
        effects = original(self, local, decision)
        if mutation == "a new master opens no epoch":
            return tuple(e for e in effects if not isinstance(e, replica_node.OpenEpoch))
        return tuple(e for e in effects if not isinstance(e, replica_node.StopMasterCore))

    monkeypatch.setattr(replica_node.ReplicaNode, "_effects", mutated)
    with pytest.raises((InvariantViolation, AssertionError)):
        for seed in range(40):
            run(seed, STEPS)
