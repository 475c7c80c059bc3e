"""Named invariant checkers, run after every step of the simulation.

* ``no_acknowledged_message_lost``: every member of the controller's SyncStateSet holds,
  durably, the log prefix ending at the last acknowledged record (acknowledged bytes agree:
  ``acknowledged_prefixes_agree``), so whoever the controller elects has them all.
* ``consumer_offsets_never_roll_back``: the serving master's durable log begins with every
  byte a consumer has read (what was visible is never replaced nor taken back).
* ``one_writer_per_epoch``: records of one epoch are written by one broker, the one the
  controller elected at that epoch; ``one_writable_master_per_epoch`` at any moment.
* ``epochs_only_grow``: the controller's master and SyncStateSet epochs, each broker's
  acting epoch (within one life), and no epoch file names an epoch the controller never had.
* ``slave_prefix_of_master``: a slave copying from the current master holds the master's
  bytes up to its confirm offset.
A violation raises :class:`InvariantViolation` naming the checker; the simulation adds the seed.
"""
from __future__ import annotations

from ha.replication.slave import SlaveState
from ha.role.decisions import Role


class InvariantViolation(AssertionError):
    def __init__(self, name: str, detail: str):
        super().__init__(f"{name}: {detail}")
        self.name = name


def check_acknowledged(sim) -> None:
    prefix = sim.acked_prefix
    if not prefix:
        return
    for member in sorted(sim.controller.state.sync_state_set):
        disk = sim.brokers[member].disk
        if disk.durable < len(prefix) or disk.log[:len(prefix)] != prefix:
            raise InvariantViolation("no_acknowledged_message_lost",
                                     f"SyncStateSet member {member} holds {disk.durable} durable bytes that do not "
                                     f"begin with the {len(prefix)} acknowledged ones")


def serving_master(sim):
    state = sim.controller.state
    broker = sim.brokers.get(state.master_broker_id)
    if broker is None or not broker.up or broker.role is not Role.MASTER:
        return None
    return broker if broker.local.master_epoch == state.master_epoch else None


def check_consumed(sim) -> None:
    master = serving_master(sim)
    consumed = sim.consumed
    if master is None or not consumed:
        return
    disk = master.disk
    if disk.durable < len(consumed) or disk.log[:len(consumed)] != consumed:
        raise InvariantViolation("consumer_offsets_never_roll_back",
                                 f"master {master.id} (epoch {master.local.master_epoch}) no longer begins with the "
                                 f"{len(consumed)} bytes consumers read")


def check_writable(sim) -> None:
    by_epoch: dict[int, int] = {}
    for broker in sim.brokers.values():
        if broker.writable():
            other = by_epoch.setdefault(broker.local.master_epoch, broker.id)
            if other != broker.id:
                raise InvariantViolation("one_writable_master_per_epoch",
                                         f"brokers {other} and {broker.id} both writable at epoch "
                                         f"{broker.local.master_epoch}")


def check_write(sim, broker) -> None:
    epoch = broker.local.master_epoch
    writer = sim.writers.setdefault(epoch, broker.id)
    if writer != broker.id or (epoch, broker.id) not in sim.controller.elections:
        raise InvariantViolation("one_writer_per_epoch",
                                 f"broker {broker.id} wrote at epoch {epoch}: writer {writer}, elected "
                                 f"{[e for e in sim.controller.elections if e[0] == epoch]}")


def check_epochs(sim) -> None:
    state = sim.controller.state
    now = (state.master_epoch, state.sync_state_set_epoch)
    if now[0] < sim.controller_epochs[0] or now[1] < sim.controller_epochs[1]:
        raise InvariantViolation("epochs_only_grow", f"controller epochs {sim.controller_epochs} -> {now}")
    sim.controller_epochs = now
    for broker in sim.brokers.values():
        if broker.up:
            seen = sim.acting_epochs.get(broker.id, 0)
            if broker.local.master_epoch < seen:
                raise InvariantViolation("epochs_only_grow",
                                         f"broker {broker.id} acts at epoch {broker.local.master_epoch} after {seen}")
            sim.acting_epochs[broker.id] = broker.local.master_epoch
        if broker.disk.epochs.last_epoch > state.master_epoch:
            raise InvariantViolation("epochs_only_grow", f"broker {broker.id}'s epoch file names epoch "
                                     f"{broker.disk.epochs.last_epoch}, the controller is at {state.master_epoch}")


def check_slaves(sim) -> None:
    master = serving_master(sim)
    if master is None:
        return
    for broker in sim.brokers.values():
        session = broker.session
        if (not broker.up or broker.role is not Role.SLAVE or broker.local.master_id != master.id
                or session is None or session.state is not SlaveState.TRANSFER):
            continue
        n = min(broker.disk.confirm, broker.disk.end)
        if master.disk.end < n or broker.disk.log[:n] != master.disk.log[:n]:
            raise InvariantViolation("slave_prefix_of_master",
                                     f"slave {broker.id}'s first {n} bytes (its confirm offset) differ from master "
                                     f"{master.id}'s ({master.disk.end} bytes)")


CHECKS = (check_acknowledged, check_consumed, check_writable, check_epochs, check_slaves)


def check_all(sim) -> None:
    for check in CHECKS:
        check(sim)
