"""A broker's acting-master transitions: a slave starting and stopping to act, handing its
special state over to a returning master, and that master adopting it (RIP-32).

Rules:
- Starting to act: the timer, transaction and pop services switch to their acting paths
  (escape, journal), each opening a new state version.  (The broker then tells its replica
  node it acts: reads go to the end of the copy, ``ha.role.serving``.)
- Stopping: every acting path is switched back and its state written (the pop journal is
  cleared only after the snapshot that holds its records), and the FIFO leases it held are
  released.
- Hand-over (a member asked by its returning master): the member notes the time, so no
  member view learned before it lets it act again (the master's registration may not have
  reached the nameserver yet), stops acting (runs in progress finish first), and answers with
  its timer checkpoint, transaction checkpoint, pop state and consumer offsets, versioned.
- Adoption (the returning master, before its special services start): each item is adopted
  by the pre-online rule (``REVERSE``: the slave's copy unless the master's is newer), and
  the master then applies its own log past the adopted cursors.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from metadata.consumer_offsets import ConsumerOffsetTable
from metadata.replica_metadata import Adoption, SyncDirection, VersionedDocument

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HandOverState:
    acted: bool
    timer: VersionedDocument
    transactions: VersionedDocument
    pop: VersionedDocument
    offsets: ConsumerOffsetTable


def start_acting(broker) -> None:
    bridge = broker.acting.bridge
    assert bridge is not None, "an acting-enabled broker is given an escape bridge"
    broker.timer.start_acting(bridge)
    broker.transactions.start_acting(bridge)
    broker.pop.start_acting(bridge)
    broker.acting.acted = True


def stop_acting(broker) -> None:
    broker.timer.stop_acting()
    broker.transactions.stop_acting()
    broker.pop.stop_acting()
    broker.fifo_locks.release_own()


async def hand_over(broker) -> HandOverState:
    broker.acting.last_handover_ms = broker.clock.now_ms()
    await broker.apply_role()
    now = broker.clock.now_ms()
    return HandOverState(broker.acting.acted, broker.timer.versioned_checkpoint(),
                         broker.transactions.versioned_checkpoint(), broker.pop.versioned_state(),
                         broker.pop.keeper.versioned_table(now))


def adopt_handover(broker, state: HandOverState) -> dict[str, Adoption]:
    reverse = SyncDirection.REVERSE
    decisions = {"timer": broker.timer.adopt_checkpoint(state.timer, reverse),
                 "transactions": broker.transactions.adopt_checkpoint(state.transactions, reverse),
                 "pop": broker.pop.adopt_state(state.pop, reverse),
                 "offsets": broker.pop.adopt_offsets(state.offsets, reverse)}
    broker.timer.catch_up()
    return decisions
