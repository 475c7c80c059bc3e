"""Seeded simulation of 3- and 5-node Raft clusters with named invariant checkers.

One seed decides everything: message delays, drops and duplicates, partitions,
crashes (a node loses all but its MemoryStorage) and restarts, proposals and
compactions. After every step the invariants are checked:

- ELECTION_SAFETY: at most one leader per term, ever.
- LOG_MATCHING: an entry (index, term) has one payload and one predecessor term
  wherever it appears, so logs that share an entry share the prefix before it.
- LEADER_COMPLETENESS: a new leader holds every entry committed so far (nothing
  committed is lost).
- STATE_MACHINE_SAFETY: every node applies the same entries in the same order,
  without gaps (a snapshot counts as applying its prefix).
- TERM_MONOTONIC: a node's term never goes back, across restarts too.
- LIVENESS_AFTER_HEAL: once the faults stop, a leader emerges and commits.

CI runs SEEDS; RAFT_SIM_SEEDS="0-499" (or "3,17,42") runs others. A failure names
its seed and invariant.
"""

from __future__ import annotations

import heapq
import os
import random
from dataclasses import dataclass

import pytest

from ha.raft.types import Entry, Message, NodeId, Ready, Role
from tests.support.raft_network import NetworkOptions, RaftNetwork, decode_state

SEEDS = tuple(range(8))
STEPS_PER_TICK = 4


class InvariantViolation(AssertionError):
    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name = name


def _seeds() -> tuple[int, ...]:
    spec = os.environ.get("RAFT_SIM_SEEDS")
    if not spec:
        return SEEDS
    seeds: list[int] = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        seeds.extend(range(int(low), int(high or low) + 1))
    return tuple(seeds)


@dataclass(frozen=True)
class Faults:
    drop: float = 0.08
    duplicate: float = 0.02
    max_delay_steps: int = 3
    crash: float = 0.01
    restart: float = 0.03
    partition: float = 0.01
    heal: float = 0.02
    propose: float = 0.15
    compact: float = 0.01


class Simulation:
    def __init__(self, seed: int, size: int, faults: Faults = Faults()) -> None:
        self.seed, self.faults = seed, faults
        self.rng = random.Random(seed)
        self.net = RaftNetwork(tuple(range(1, size + 1)), seed=seed, options=NetworkOptions(),
                               apply=self._on_apply, on_ready=self._on_ready)
        self.now = 0
        self.queue: list[tuple[int, int, Message]] = []
        self.sequence = 0
        self.leader_of_term: dict[int, NodeId] = {}
        self.entry_facts: dict[tuple[int, int], tuple[bytes, int | None]] = {}
        self.committed: dict[int, Entry] = {}
        self.applied_to: dict[NodeId, int] = {i: 0 for i in self.net.ids}
        self.max_term: dict[NodeId, int] = {i: 0 for i in self.net.ids}
        self.proposals = 0

    # ------------------------------------------------------------ checkers
    def _on_ready(self, node_id: NodeId, ready: Ready) -> None:
        node = self.net.node(node_id)
        for entry in ready.entries:
            self._check_log_matching(entry, node.term_at(entry.index - 1))
        if ready.soft_state is not None and ready.soft_state.role is Role.LEADER:
            self._check_leader_completeness(node_id)
        if ready.snapshot is not None:
            restored = decode_state(ready.snapshot.data) if ready.snapshot.data else []
            for index, data in restored:
                self._check_committed(node_id, Entry(ready.snapshot.term, index, data), False)
            self.applied_to[node_id] = ready.snapshot.index

    def _check_log_matching(self, entry: Entry, previous_term: int | None) -> None:
        key = (entry.index, entry.term)
        known = self.entry_facts.get(key)
        if known is None:
            self.entry_facts[key] = (entry.data, previous_term)
            return
        data, known_previous = known
        if data != entry.data or None not in (previous_term, known_previous) \
                and previous_term != known_previous:
            raise InvariantViolation("LOG_MATCHING", f"entry {key} differs: {known} vs "
                                     f"{(entry.data, previous_term)}")

    def _check_leader_completeness(self, node_id: NodeId) -> None:
        node = self.net.node(node_id)
        for index, entry in self.committed.items():
            if index > node.snapshot_index and node.term_at(index) != self._term_of(entry):
                raise InvariantViolation("LEADER_COMPLETENESS", f"leader {node_id} term "
                                         f"{node.term} lacks committed entry {index}")

    def _term_of(self, entry: Entry) -> int:
        return entry.term

    def _on_apply(self, node_id: NodeId, entry: Entry) -> None:
        expected = self.applied_to[node_id] + 1
        if entry.index != expected:
            raise InvariantViolation("STATE_MACHINE_SAFETY",
                                     f"node {node_id} applied {entry.index}, expected {expected}")
        self.applied_to[node_id] = entry.index
        self._check_committed(node_id, entry, True)

    def _check_committed(self, node_id: NodeId, entry: Entry, exact_term: bool) -> None:
        known = self.committed.get(entry.index)
        if known is None:
            if exact_term:
                self.committed[entry.index] = entry
            return
        if known.data != entry.data or exact_term and known.term != entry.term:
            raise InvariantViolation("STATE_MACHINE_SAFETY", f"node {node_id} applied "
                                     f"{entry} where {known} was committed")

    def check_step(self) -> None:
        for node_id in self.net.up():
            node = self.net.node(node_id)
            if node.term < self.max_term[node_id]:
                raise InvariantViolation("TERM_MONOTONIC", f"node {node_id} went back to "
                                         f"term {node.term} from {self.max_term[node_id]}")
            self.max_term[node_id] = node.term
            if node.role is Role.LEADER:
                holder = self.leader_of_term.setdefault(node.term, node_id)
                if holder != node_id:
                    raise InvariantViolation("ELECTION_SAFETY", f"term {node.term} has leaders "
                                             f"{holder} and {node_id}")

    # ------------------------------------------------------------ driving
    def _send_all(self) -> None:
        self.net.process_all()
        outgoing, self.net.in_flight = self.net.in_flight, []
        for message in outgoing:
            if self.rng.random() < self.faults.drop:
                continue
            copies = 2 if self.rng.random() < self.faults.duplicate else 1
            for _ in range(copies):
                delay = self.rng.randint(1, self.faults.max_delay_steps)
                self.sequence += 1
                heapq.heappush(self.queue, (self.now + delay, self.sequence, message))

    def _deliver_due(self) -> None:
        while self.queue and self.queue[0][0] <= self.now:
            _, _, message = heapq.heappop(self.queue)
            self.net.deliver_one(message)
            self._send_all()

    def _inject_faults(self) -> None:
        f, rng, net = self.faults, self.rng, self.net
        down = [i for i in net.ids if net.nodes[i] is None]
        if rng.random() < f.crash:
            victim = rng.choice(net.ids)
            if net.nodes[victim] is not None:
                net.crash(victim)
                self.applied_to[victim] = 0
        if down and rng.random() < f.restart:
            net.restart(rng.choice(down))
        if rng.random() < f.partition:
            ids = list(net.ids)
            rng.shuffle(ids)
            cut = rng.randint(1, len(ids) - 1)
            net.partition(tuple(ids[:cut]), tuple(ids[cut:]))
        elif net.blocked and rng.random() < f.heal:
            net.heal()

    def _workload(self) -> None:
        rng = self.rng
        leaders = self.net.leaders()
        if leaders and rng.random() < self.faults.propose:
            self.proposals += 1
            try:
                self.net.node(rng.choice(leaders)).propose(b"p%d" % self.proposals)
            except Exception as error:  # noqa: BLE001 - limits may refuse; that is allowed
                assert type(error).__name__ == "ProposalDropped", error
        if rng.random() < self.faults.compact:
            node_id = rng.choice(self.net.up() or [self.net.ids[0]])
            if self.net.nodes[node_id] is not None:
                self.net.compact(node_id)

    def step(self, faults: bool = True) -> None:
        self.now += 1
        if faults:
            self._inject_faults()
        if self.now % STEPS_PER_TICK == 0:
            self.net.tick_all()
        self._workload()
        self._send_all()
        self._deliver_due()
        self.check_step()

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()
        self.settle()

    def settle(self) -> None:
        """Stop the faults and check that the cluster recovers and agrees."""
        self.net.heal()
        for node_id in self.net.ids:
            if self.net.nodes[node_id] is None:
                self.net.restart(node_id)
                self.applied_to[node_id] = 0
        self.faults = Faults(drop=0.0, duplicate=0.0, crash=0.0, restart=0.0, partition=0.0,
                             heal=0.0, propose=0.0, compact=0.0)
        for _ in range(STEPS_PER_TICK * 40):
            self.step(faults=False)
        leaders = self.net.leaders()
        if len(leaders) != 1:
            raise InvariantViolation("LIVENESS_AFTER_HEAL", f"leaders after healing: {leaders}")
        index = self.net.node(leaders[0]).propose(b"final")
        for _ in range(STEPS_PER_TICK * 10):
            self.step(faults=False)
        for node_id in self.net.ids:
            if self.net.node(node_id).applied_index < index:
                raise InvariantViolation("LIVENESS_AFTER_HEAL",
                                         f"node {node_id} did not apply the final entry")
        states = {tuple(self.net.applied[i]) for i in self.net.ids}
        if len(states) != 1:
            raise InvariantViolation("STATE_MACHINE_SAFETY", "state machines differ at the end")


def _run(seed: int, size: int, steps: int) -> Simulation:
    simulation = Simulation(seed, size)
    try:
        simulation.run(steps)
    except AssertionError as error:
        raise AssertionError(f"seed={seed} size={size}: {error} "
                             f"(rerun: RAFT_SIM_SEEDS={seed})") from error
    return simulation


@pytest.mark.parametrize("seed", _seeds())
@pytest.mark.parametrize("size", [3, 5])
def test_simulation_keeps_invariants(seed: int, size: int) -> None:
    simulation = _run(seed, size, steps=1500)
    assert simulation.committed, "the workload committed nothing: the simulation is not testing"


def test_a_broken_core_is_caught() -> None:
    """The checkers can fail: a forged second leader in one term trips ELECTION_SAFETY."""
    simulation = Simulation(seed=1, size=3)
    for _ in range(200):
        simulation.step(faults=False)
    leader = simulation.net.leaders()[0]
    other = next(i for i in simulation.net.ids if i != leader)
    node = simulation.net.node(other)
    node._term = simulation.net.node(leader).term  # noqa: SLF001 - deliberate sabotage
    node._role = Role.LEADER  # noqa: SLF001
    with pytest.raises(InvariantViolation, match="ELECTION_SAFETY"):
        simulation.check_step()


def test_log_matching_checker_catches_a_forged_entry() -> None:
    simulation = Simulation(seed=2, size=3)
    simulation._check_log_matching(Entry(1, 1, b"a"), 0)  # noqa: SLF001
    with pytest.raises(InvariantViolation, match="LOG_MATCHING"):
        simulation._check_log_matching(Entry(1, 1, b"b"), 0)  # noqa: SLF001
