"""Seeded simulation of one broker group of three replicas under the controller.

Everything runs in one process on the pure cores: ha.replication (MasterGroup, SlaveSession,
handshake and truncation, SyncStateSet with the proposed/applied union, confirm offset),
ha.controller (decide/apply, liveness, the inactive-master scan, election), ha.role
(decisions, the pause fence), over a simulated network (tests/support/group_sim/network.py)
and simulated disks with torn writes (disk.py).  One seed decides every delay, loss, crash,
pause, partition, slow disk, put and read; a failing seed reproduces the run exactly.

Each step is ``STEP_MS`` of simulated time: faults, deliveries, the controller, the brokers,
one client put and one consumer read, then every checker of invariants.py.  :meth:`finish`
heals everything, lets the group settle and checks that it serves again and that the
replicas converged (``liveness_after_heal``) and nothing acknowledged is missing.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from ha.controller.requests import Reply
from ha.replication.slave import SlaveState
from ha.role.decisions import Role
from tests.support.group_sim import invariants, records
from tests.support.group_sim.broker import CLIENT, SimBroker
from tests.support.group_sim.controller import Answer, Beat, Call, SimController, Watch
from tests.support.group_sim.invariants import InvariantViolation
from tests.support.group_sim.network import CONTROLLER, Closed, SimNetwork

STEP_MS = 10
HEARTBEAT_TIMEOUT_MS = 600
BROKER_IDS = (1, 2, 3)
NODES = (CONTROLLER, *BROKER_IDS)


@dataclass(frozen=True)
class FaultRates:
    crash: float = 0.004
    restart: float = 0.03
    pause: float = 0.004
    resume: float = 0.04
    partition: float = 0.004
    heal: float = 0.02
    controller_crash: float = 0.002
    controller_restart: float = 0.05
    slow_disk: float = 0.003
    power_loss: float = 0.5          # share of crashes that also lose unflushed bytes (torn writes)
    master_power_loss: float = 0.5   # the same for a master (see test_a_master_power_loss_...)
    put: float = 0.5
    read: float = 0.3


class Simulation:
    def __init__(self, seed: int, rates: FaultRates = FaultRates()):
        self.seed, self.rates = seed, rates
        self.rng = random.Random(seed)
        self.net = SimNetwork(random.Random(seed * 31 + 1))
        self.controller = SimController(BROKER_IDS, HEARTBEAT_TIMEOUT_MS)
        self.brokers = {i: SimBroker(i, self, self.net, random.Random(seed * 31 + 1 + i), HEARTBEAT_TIMEOUT_MS)
                        for i in BROKER_IDS}
        self.now_ms = 0
        self.steps = 0
        self.next_message = 1
        self.route: int | None = None
        self.acked: set[int] = set()
        self.acked_prefix = b""
        self.consumed = bytearray()
        self.writers: dict[int, int] = {}
        self.written_at: dict[int, tuple[int, int]] = {}
        self.controller_epochs = (0, 0)
        self.acting_epochs: dict[int, int] = {}
        self.log: list[str] = []
        for broker in self.brokers.values():
            broker.start(0)

    # --- hooks the brokers call ------------------------------------------------------------------
    def on_write(self, broker: SimBroker, message_id: int, end: int) -> None:
        invariants.check_write(self, broker)
        self.written_at[message_id] = (broker.id, end)

    def on_answer(self, broker: SimBroker, message_id: int, ok: bool) -> None:
        if not ok:
            return
        writer, end = self.written_at[message_id]
        assert writer == broker.id, (writer, broker.id)
        prefix = bytes(broker.disk.log[:end])
        record = records.encode(message_id)
        if prefix[end - len(record):] != record:
            raise InvariantViolation("acknowledged_prefixes_agree", f"message {message_id} not at {end} on {broker.id}")
        longer, shorter = (prefix, self.acked_prefix) if end >= len(self.acked_prefix) else (self.acked_prefix, prefix)
        if not longer.startswith(shorter):
            raise InvariantViolation("acknowledged_prefixes_agree",
                                     f"broker {broker.id} acknowledged {message_id} on a log that contradicts an "
                                     f"earlier acknowledgement")
        self.acked_prefix = longer
        self.acked.add(message_id)

    def on_truncate(self, broker: SimBroker, offset: int) -> None:
        self.log.append(f"{self.now_ms}: broker {broker.id} truncates {broker.disk.end} -> {offset}")

    def on_decision(self, broker: SimBroker, decision) -> None:
        if type(decision).__name__ != "Ignore":
            self.log.append(f"{self.now_ms}: broker {broker.id} {decision}")

    # --- faults ----------------------------------------------------------------------------------
    def faults(self) -> None:
        r, rng = self.rates, self.rng
        up = [b for b in self.brokers.values() if b.up]
        down = [b for b in self.brokers.values() if not b.up]
        paused = [b for b in up if b.paused]
        roll = rng.random()
        if roll < r.crash and up:
            self.crash(rng.choice(up))
        elif (roll := roll - r.crash) < r.restart and down:
            self.restart(rng.choice(down))
        elif (roll := roll - r.restart) < r.pause and len(paused) < len(up):
            self.pause(rng.choice([b for b in up if not b.paused]))
        elif (roll := roll - r.pause) < r.resume and paused:
            self.resume(rng.choice(paused))
        elif (roll := roll - r.resume) < r.partition:
            self.partition()
        elif (roll := roll - r.partition) < r.heal and self.net.blocked:
            self.note("heal")
            self.net.heal()
        elif (roll := roll - r.heal) < r.controller_crash and self.controller.up:
            self.crash_controller()
        elif (roll := roll - r.controller_crash) < r.controller_restart and not self.controller.up:
            self.note("controller restarts")
            self.controller.restart(self.now_ms)
        elif (roll := roll - r.controller_restart) < r.slow_disk and up:
            broker = rng.choice(up)
            broker.disk.slow = not broker.disk.slow
            self.note(f"broker {broker.id} disk {'slow' if broker.disk.slow else 'normal'}")

    def note(self, text: str) -> None:
        self.log.append(f"{self.now_ms}: {text}")

    def crash(self, broker: SimBroker) -> None:
        share = self.rates.master_power_loss if broker.role is Role.MASTER else self.rates.power_loss
        power_loss = self.rng.random() < share
        self.note(f"broker {broker.id} {'loses power' if power_loss else 'is killed'} (role {broker.role.value}, "
                  f"epoch {broker.local.master_epoch})")
        broker.crash(power_loss)

    def restart(self, broker: SimBroker) -> None:
        self.note(f"broker {broker.id} restarts with {broker.disk.end} bytes, epochs {broker.disk.epochs.pairs()}")
        self.acting_epochs.pop(broker.id, None)   # a new life acts from epoch 0 again
        broker.start(self.now_ms)

    def pause(self, broker: SimBroker) -> None:
        self.note(f"broker {broker.id} paused (role {broker.role.value})")
        broker.paused = True
        self.net.paused.add(broker.id)

    def resume(self, broker: SimBroker) -> None:
        self.note(f"broker {broker.id} resumes")
        broker.paused = False
        self.net.paused.discard(broker.id)

    def partition(self) -> None:
        rng = self.rng
        kind = rng.choice(("all", "controller", "peers", "controller-alone"))
        node = rng.choice(BROKER_IDS)
        if kind == "all":
            self.net.isolate(node, NODES)
        elif kind == "controller":
            self.net.blocked |= {(node, CONTROLLER), (CONTROLLER, node)}
        elif kind == "peers":
            self.net.isolate(node, BROKER_IDS)
        else:
            node = CONTROLLER
            self.net.isolate(CONTROLLER, NODES)
        self.note(f"partition {kind}: {node}")

    def crash_controller(self) -> None:
        self.note("controller crashes")
        for broker_id, connection in self.controller.watchers.items():
            self.net.close(CONTROLLER, broker_id, connection)
        self.controller.crash()
        self.net.drop_to(CONTROLLER)

    # --- the controller's side of the network ------------------------------------------------------
    def to_controller(self, src: int, connection: int, payload) -> None:
        controller = self.controller
        if not controller.up:
            return
        if isinstance(payload, Beat):
            controller.heartbeat(payload.heartbeat, self.now_ms)
            self.net.send(CONTROLLER, src, Answer("beat", Reply(view=controller.view())))
        elif isinstance(payload, Closed):
            if controller.watchers.get(src) == connection:
                controller.session_ended(src, self.now_ms)
        elif isinstance(payload, Call):
            reply, changed = controller.handle(payload.request, self.now_ms)
            if payload.tag == "watch":
                controller.watchers[src] = connection
            self.net.send(CONTROLLER, src, Answer(payload.tag, reply), connection)
            if changed:
                self.push()

    def push(self) -> None:
        view = self.controller.view()
        for broker_id, connection in self.controller.watchers.items():
            self.net.send(CONTROLLER, broker_id, Watch(view), connection)

    # --- clients ---------------------------------------------------------------------------------
    def client(self) -> None:
        rng = self.rng
        if self.steps % 30 == 0 and self.controller.up:
            self.route = self.controller.state.master_broker_id
        if rng.random() < self.rates.put:
            target = self.route if self.route is not None and rng.random() < 0.8 else rng.choice(BROKER_IDS)
            self.net.send(CLIENT, target, self.next_message)
            self.next_message += 1
        if rng.random() < self.rates.read:
            self.read(self.brokers[rng.choice(BROKER_IDS)])

    def read(self, broker: SimBroker) -> None:
        """A consumer reads on from its offset what ``broker`` shows consumers."""
        if not broker.up or broker.paused:
            return
        disk = broker.disk
        if broker.role is Role.MASTER and broker.group is not None:
            visible = min(broker.group.visible_offset(broker.master_log()), disk.durable)
        elif broker.role is Role.SLAVE:
            visible = min(disk.confirm, disk.end)
        else:
            return
        have = len(self.consumed)
        if visible <= have:
            return
        if disk.log[:have] != self.consumed:
            raise InvariantViolation("consumer_offsets_never_roll_back",
                                     f"broker {broker.id} ({broker.role.value}) shows {visible} bytes whose first {have} "
                                     f"differ from what consumers already read")
        self.consumed += disk.log[have:visible]

    # --- the run ---------------------------------------------------------------------------------
    def step(self, faults: bool = True) -> None:
        self.steps += 1
        self.now_ms += STEP_MS
        self.net.step = self.steps
        if faults:
            self.faults()
        for src, dst, connection, payload in self.net.due():
            if dst == CONTROLLER:
                self.to_controller(src, connection, payload)
            elif dst in self.brokers and self.brokers[dst].up:
                self.brokers[dst].receive(src, connection, payload)
        if self.controller.up and self.controller.scan(self.now_ms):
            self.push()
        for broker in self.brokers.values():
            if broker.up and not broker.paused:
                broker.step(self.now_ms)
        self.client()
        invariants.check_all(self)

    def heal(self) -> None:
        self.net.heal()
        if not self.controller.up:
            self.controller.restart(self.now_ms)
        for broker in self.brokers.values():
            broker.disk.slow = False
            if not broker.up:
                self.restart(broker)
            elif broker.paused:
                self.resume(broker)

    def finish(self, settle_steps: int = 600) -> None:
        """Heal, settle, and check the group serves again with every replica converged."""
        self.note("heal everything")
        self.heal()
        for _ in range(settle_steps):
            self.step(faults=False)
            if self.converged():
                break
        else:
            raise InvariantViolation("liveness_after_heal", self.describe())
        master = invariants.serving_master(self)
        kept = {message_id for _, message_id, _ in records.walk(master.disk.log)}
        missing = sorted(self.acked - kept)
        if missing:
            raise InvariantViolation("no_acknowledged_message_lost", f"missing after heal: {missing[:10]}")

    def converged(self) -> bool:
        master = invariants.serving_master(self)
        if master is None or not master.writable() or master.group is None:
            return False
        if master.group.sync_state_set != frozenset(BROKER_IDS):
            return False
        end = master.disk.end
        return all(b.disk.end == end and b.disk.log == master.disk.log and b.session is not None
                   and b.session.state is SlaveState.TRANSFER for b in self.brokers.values() if b is not master)

    def describe(self) -> str:
        state = self.controller.state
        lines = [f"controller: master {state.master_broker_id} epoch {state.master_epoch} "
                 f"SyncStateSet {sorted(state.sync_state_set)} (epoch {state.sync_state_set_epoch})"]
        for b in self.brokers.values():
            session = b.session.state.value if b.session else "-"
            group = sorted(b.group.sync_state_set) if b.group else "-"
            lines.append(f"broker {b.id}: up {b.up} role {b.role.value} epoch {b.local.master_epoch} end {b.disk.end} "
                         f"durable {b.disk.durable} confirm {b.disk.confirm} epochs {b.disk.epochs.pairs()} "
                         f"session {session} set {group} last_close {b.session.last_close if b.session else '-'}")
        return "\n".join(lines + self.log[-25:])


def run(seed: int, steps: int = 1000, rates: FaultRates = FaultRates()) -> Simulation:
    """One seeded run; raises InvariantViolation (with the seed) on the first broken invariant."""
    sim = Simulation(seed, rates)
    try:
        for _ in range(steps):
            sim.step()
        sim.finish()
    except InvariantViolation as violation:
        raise InvariantViolation(violation.name, f"seed {seed}, step {sim.steps}: {violation}\n{sim.describe()}") \
            from None
    return sim
