"""Seeded simulation: three controller members (real RaftNode cores on the in-memory
network of tests/support/raft_network.py) and two broker sets of three brokers.

Each step moves simulated time one tick; at random, controllers crash and restart,
links partition and heal, brokers die and come back.  Alive brokers heartbeat to every
up controller; the ready leader decides one broker request (or its inactive-master scan)
at a time, exactly as the service does: against its applied tables, proposing the events,
deciding again only once they are applied.

Named invariants, checked after every step; a failure prints the seed:
- same_events_same_order: members' applied event sequences are prefixes of each other;
- epochs_never_go_back: on every member, a set's masterEpoch and syncStateSetEpoch never decrease;
- one_master_per_epoch: every member, at any time, agrees on who was master at each epoch;
- no_acknowledged_change_lost: at the end, every change acknowledged to a broker is
  applied on every member.
"""
from __future__ import annotations

import random

import pytest

from ha.controller.commands import decide
from ha.controller.events import decode_event, encode_event
from ha.controller.liveness import BrokerLiveness, Heartbeat
from ha.controller.replicas import ReplicasInfo
from ha.controller.requests import AlterSyncStateSet, ApplyBrokerId, ElectMaster, RegisterBroker
from ha.controller.scan import elections_needed
from ha.raft.errors import RaftError
from ha.raft.types import Entry, Role
from tests.support.raft_network import RaftNetwork

TICK_MS = 100
HEARTBEAT_TIMEOUT_MS = 1_500
GROUPS = ("broker-a", "broker-b")
BROKER_IDS = (1, 2, 3)
SEEDS = list(range(10))


class InvariantViolation(AssertionError):
    pass


class Member:
    """What one controller member holds beside its Raft core."""

    def __init__(self) -> None:
        self.replicas = ReplicasInfo()
        self.liveness = BrokerLiveness(HEARTBEAT_TIMEOUT_MS, 1000)
        self.events: list[tuple[int, bytes]] = []
        self.ready_term: int | None = None
        self.epochs: dict[str, tuple[int, int]] = {}


class Simulation:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now_ms = 0
        self.members = {i: Member() for i in (1, 2, 3)}
        self.net = RaftNetwork((1, 2, 3), seed=seed, apply=self._apply)
        self.alive = {(g, b): True for g in GROUPS for b in BROKER_IDS}
        self.offsets = {(g, b): 0 for g in GROUPS for b in BROKER_IDS}
        self.pending: dict[int, tuple[int, int, bytes]] = {}  # index -> (leader, term, data)
        self.acknowledged: list[tuple[int, bytes]] = []
        self.master_at_epoch: dict[tuple[str, int], int | None] = {}

    # -- the state machine under Raft -------------------------------------------------------

    def _apply(self, node_id: int, entry: Entry) -> None:
        member = self.members[node_id]
        node = self.net.node(node_id)
        if not entry.data:
            if node.role is Role.LEADER and entry.term == node.term:
                member.ready_term = node.term
                member.liveness.became_leader(self.now_ms)
            return
        event = decode_event(entry.data)
        member.replicas.apply(event)
        member.events.append((entry.index, entry.data))
        self._check_member(node_id, member, event.broker_name)
        proposal = self.pending.get(entry.index)
        if proposal is not None and proposal[0] == node_id:
            del self.pending[entry.index]
            if proposal[1] == entry.term and proposal[2] == entry.data:
                self.acknowledged.append((entry.index, entry.data))

    def _check_member(self, node_id: int, member: Member, name: str) -> None:
        state = member.replicas.sync_state_info_table.get(name)
        if state is None:
            return
        epochs = (state.master_epoch, state.sync_state_set_epoch)
        old = member.epochs.get(name, (0, 0))
        if epochs[0] < old[0] or epochs[1] < old[1]:
            raise InvariantViolation(f"epochs_never_go_back: member {node_id} {name} {old} -> {epochs}")
        member.epochs[name] = epochs
        key = (name, state.master_epoch)
        if key in self.master_at_epoch and self.master_at_epoch[key] != state.master_broker_id:
            raise InvariantViolation(f"one_master_per_epoch: {name} epoch {state.master_epoch} has masters "
                                     f"{self.master_at_epoch[key]} and {state.master_broker_id}")
        self.master_at_epoch[key] = state.master_broker_id

    # -- faults -----------------------------------------------------------------------------

    def crash(self, node_id: int) -> None:
        self.net.crash(node_id)
        self.members[node_id] = Member()  # memory is lost; the log replays on restart
        self.pending = {i: p for i, p in self.pending.items() if p[0] != node_id}

    def faults(self) -> None:
        roll = self.rng.random()
        up = self.net.up()
        if roll < 0.01 and len(up) == 3:
            self.crash(self.rng.choice(up))
        elif roll < 0.04 and len(up) < 3:
            self.net.restart(self.rng.choice([i for i in (1, 2, 3) if i not in up]))
        elif roll < 0.05:
            self.net.isolate(self.rng.choice((1, 2, 3)))
        elif roll < 0.09:
            self.net.heal()
        elif roll < 0.11:
            key = self.rng.choice(list(self.alive))
            self.alive[key] = not self.alive[key]

    # -- brokers and the leader ---------------------------------------------------------------

    def heartbeats(self) -> None:
        for (group, broker_id), alive in self.alive.items():
            if not alive:
                continue
            self.offsets[(group, broker_id)] += self.rng.randint(0, 3)
            for node_id in self.net.up():
                if self.rng.random() < 0.9:
                    self.members[node_id].liveness.heartbeat(Heartbeat(
                        "c", group, broker_id, f"{group}-{broker_id}", 0, self.offsets[(group, broker_id)],
                        timeout_ms=HEARTBEAT_TIMEOUT_MS), self.now_ms)

    def ready_leader(self) -> int | None:
        for node_id in self.net.leaders():
            member, node = self.members[node_id], self.net.node(node_id)
            if member.ready_term == node.term:
                return node_id
        return None

    def broker_request(self, replicas: ReplicasInfo):
        group = self.rng.choice(GROUPS)
        broker_id = self.rng.choice(BROKER_IDS)
        if not self.alive[(group, broker_id)]:
            return None
        info = replicas.replica_info_table.get(group)
        if info is None or broker_id not in info.brokers:
            return ApplyBrokerId("c", group, broker_id, f"{group}-{broker_id};0")
        state = replicas.sync_state_info_table[group]
        if state.master_broker_id is None:
            return ElectMaster("c", group, broker_id)
        if state.master_broker_id == broker_id:
            wanted = frozenset(b for b in info.brokers if self.alive[(group, b)]) | {broker_id}
            return AlterSyncStateSet(group, broker_id, state.master_epoch, wanted, state.sync_state_set_epoch)
        return RegisterBroker("c", group, broker_id, f"{group}-{broker_id}")

    def lead(self) -> None:
        for node_id in self.net.up():
            member = self.members[node_id]
            if self.net.node(node_id).role is not Role.LEADER and member.ready_term is not None:
                member.ready_term = None
                member.liveness.stepped_down()
        leader = self.ready_leader()
        if leader is None or any(p[0] == leader for p in self.pending.values()):
            return
        member = self.members[leader]
        requests = elections_needed(member.replicas, member.liveness, self.now_ms)
        request = requests[0] if requests and self.rng.random() < 0.5 else self.broker_request(member.replicas)
        if request is None:
            return
        decision = decide(request, member.replicas.copy(), member.liveness, self.now_ms)
        node = self.net.node(leader)
        for event in decision.events:
            data = encode_event(event)
            try:
                index = node.propose(data)
            except RaftError:
                return
            self.pending[index] = (leader, node.term, data)

    # -- the run -----------------------------------------------------------------------------

    def step(self) -> None:
        self.now_ms += TICK_MS
        self.faults()
        self.heartbeats()
        self.lead()
        self.net.tick_all()
        for _ in range(3):
            self.net.process_all()
            self.net.deliver()
        self.check_prefixes()

    def check_prefixes(self) -> None:
        logs = sorted((m.events for m in self.members.values()), key=len)
        for shorter, longer in zip(logs, logs[1:]):
            if longer[:len(shorter)] != shorter:
                raise InvariantViolation("same_events_same_order: members applied different event sequences")

    def finish(self) -> None:
        self.net.heal()
        for node_id in (1, 2, 3):
            if node_id not in self.net.up():
                self.net.restart(node_id)
        for _ in range(200):
            self.now_ms += TICK_MS
            self.net.tick_all()
            self.net.stabilize()
        self.check_prefixes()
        for node_id, member in self.members.items():
            applied = set(member.events)
            lost = [a for a in self.acknowledged if a not in applied]
            if lost:
                raise InvariantViolation(f"no_acknowledged_change_lost: member {node_id} lacks {len(lost)} entries")


def run(seed: int, steps: int = 1500) -> Simulation:
    sim = Simulation(seed)
    try:
        for _ in range(steps):
            sim.step()
        sim.finish()
    except InvariantViolation as exc:
        raise InvariantViolation(f"seed {seed}: {exc}") from exc
    return sim


@pytest.mark.parametrize("seed", SEEDS)
def test_controller_cluster_invariants(seed):
    sim = run(seed)
    # the run did something worth checking: masters were elected and changed
    assert sim.acknowledged, f"seed {seed}: nothing was acknowledged"
    assert max(epoch for (_, epoch) in sim.master_at_epoch) >= 1, f"seed {seed}: no master ever elected"


def test_a_broken_state_machine_is_caught():
    """The checker must be able to fail: an apply that rolls epochs back is reported."""
    sim = Simulation(0)
    member = sim.members[1]
    member.epochs["broker-a"] = (5, 5)
    member.replicas.sync_state_info_table["broker-a"] = __import__(
        "ha.controller.replicas", fromlist=["SyncStateInfo"]).SyncStateInfo("c", "broker-a", 1, 1)
    with pytest.raises(InvariantViolation, match="epochs_never_go_back"):
        sim._check_member(1, member, "broker-a")
