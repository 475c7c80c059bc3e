"""One broker's replication, whatever its role: the role, the driver that runs for it, the switches.

Rules:

* The role, the epoch, the pause fence and which core is live are decided by one pure core,
  :class:`ha.role.replica_node.ReplicaNode` (its docstring gives the orders of the switches
  and why).  This class is its interpreter: :meth:`carry_out` does each effect of a Ready
  in order (stop copying, stop the master core, drain, make durable, open the epoch, start
  a :class:`services.ha.master.ReplicationMaster` or a
  :class:`services.ha.slave.ReplicationSlave`, allow or refuse puts) and reports it done.
  The slave's handshake cuts the log back to the consistent point physically and durably
  before anything else (upstream #10666, #7689).
* Outside controller mode the role comes from ``brokerRole`` once (``ReplicaNode.configure``);
  in controller mode the replica starts FENCED and the controller's views switch it at
  runtime, inside the running container (services.replicas.manager feeds them).
* Serving: the broker asks the node whether it may serve a call
  (``ReplicaNode.refusal``); :meth:`check_replicas` then asks the master core whether
  enough replicas are in sync for a write.  The serving facts the node decides from are set
  here (:meth:`set_serving`).
* The read limit is moved here only (:meth:`_limit_reads`), as the node decides it from the
  live core's confirm offset and the serving facts: the master and slave cores report their
  confirm offset, acting starts and stops through :meth:`set_serving`.
* ``broker_id`` is the id routes show: 0 for a master, the replica's own id otherwise.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from ha.replication.config import HaConfig
from ha.role.decisions import Role
from ha.role.fence import PauseFence
from ha.role.replica_node import (AdoptSet, AllowPuts, AskElection, DrainPuts, Effect, FollowRole, InvalidateDerived,
                                  MakeDurable, MoveCopyEpoch, OpenEpoch, Ready, RefusePuts, ReplicaNode, StartCopying,
                                  StartMasterCore, StopCopying, StopMasterCore)
from metadata.status import Code, RequestRejected
from scheduler.clock import Clock
from services.ha.master import MASTER_ID, Propose, ReplicationMaster
from services.ha.slave import ReplicationSlave

log = logging.getLogger(__name__)
MasterAddress = Callable[[], Awaitable["str | None"]]


class BrokerReplica:
    def __init__(self, name: str, own_id: int, store, config: HaConfig, clock: Clock,
                 fence: PauseFence | None = None):
        """``own_id``: the configured slave id, or in controller mode the controller's id (0
        until the identity is registered); ``fence``: controller mode's pause fence."""
        self.name, self.store, self.config, self.clock = name, store, config, clock
        self.node = ReplicaNode(own_id, store.epochs.history.last_epoch, fence)
        store.refuse_puts(f"broker {name} has no role yet")
        self._durable_to = 0
        self.master: ReplicationMaster | None = None
        self.slave: ReplicationSlave | None = None
        self.master_epoch = 0
        self._changed = asyncio.Event()
        self._change_listeners: set[Callable[[], None]] = set()
        self._metadata_listeners: list[Callable[[], None]] = []

    @property
    def own_id(self) -> int:
        return self.node.own_id

    @own_id.setter
    def own_id(self, value: int) -> None:
        self.node.own_id = value

    @property
    def fence(self) -> PauseFence | None:
        return self.node.fence

    @property
    def role(self) -> Role:
        """The role this replica serves as: a new master is MASTER once it takes writes."""
        role = self.node.role
        if role is Role.MASTER and not self.node.puts_allowed:
            return Role.FENCED
        return role

    # --- changes: who serves this group's clients ------------------------------------------------
    def _notify(self) -> None:
        """The role changed, or the copy (dis)connected: wake calls waiting on this replica."""
        self._changed.set()
        self._changed = asyncio.Event()
        for listener in list(self._change_listeners):
            try:
                listener()
            except Exception:  # a listener's bug must not stop a role change
                log.exception("replica change listener failed")

    def add_change_listener(self, fn: Callable[[], None]) -> None:
        """``fn()`` at every change, until removed: cheaper than a waiting task for a call that
        only has to act if a change comes (a relay, services.messaging.broker_port)."""
        self._change_listeners.add(fn)

    def remove_change_listener(self, fn: Callable[[], None]) -> None:
        self._change_listeners.discard(fn)

    def notify_changed(self) -> None:
        """Something else about who serves this group's clients changed (a slave started or
        stopped acting for its absent master): wake the calls held on this replica."""
        self._notify()

    async def wait_changed(self, timeout_s: float) -> None:
        """Return at the next change, or after ``timeout_s``."""
        waiter = asyncio.ensure_future(self._changed.wait())
        try:  # asyncio.wait, not asyncio.timeout: a cancellation must never turn into a timeout
            await asyncio.wait([waiter], timeout=max(0.0, timeout_s))
        finally:
            waiter.cancel()

    def add_metadata_listener(self, fn: Callable[[], None]) -> None:
        """``fn()`` when this replica's master says its topics or groups changed."""
        self._metadata_listeners.append(fn)

    def _master_metadata_changed(self) -> None:
        for listener in self._metadata_listeners:
            listener()

    def metadata_changed(self) -> None:
        """This broker's topics or groups changed: a master tells its slaves at once."""
        if self.master is not None:
            self.master.metadata_changed()

    def relay_endpoint(self) -> str | None:
        """Where this group's clients are served while this replica copies from a connected
        master: that master container's endpoint for the group; None when there is none now."""
        slave = self.slave
        if self.role is not Role.SLAVE or slave is None or not slave.connected_to:
            return None
        return slave.master_client_endpoint or None

    def relay_link_address(self) -> str | None:
        """The replication address of that master's container (host:port of its haListenPort),
        where a relay link goes (services.messaging.relay_link); None as for :meth:`relay_endpoint`."""
        slave = self.slave
        if self.role is not Role.SLAVE or slave is None or not slave.connected_to or not slave.master_client_endpoint:
            return None
        return slave.connected_to

    @property
    def copying_from_master(self) -> bool:
        """A SLAVE whose replication is connected to a master now (acting master: such a slave
        never acts, whatever the nameserver says)."""
        return self.role is Role.SLAVE and self.slave is not None and bool(self.slave.connected_to)

    @property
    def copy_caught_up(self) -> bool:
        """A SLAVE whose copy held everything its master made visible when a connection last
        showed it (acting master: a slave acts only on such a copy; issue 24 defect 2)."""
        return self.role is Role.SLAVE and self.slave is not None and self.slave.copy_caught_up

    @property
    def broker_id(self) -> int:
        return MASTER_ID if self.role is Role.MASTER else self.own_id

    @property
    def is_master(self) -> bool:
        return self.role is Role.MASTER

    # --- serving ---------------------------------------------------------------------------------
    def set_serving(self, **facts: bool) -> None:
        """A serving fact changed (``ReplicaNode.set_serving``): move the read limit, wake held calls."""
        if self.node.set_serving(**facts):
            self._limit_reads()
            self._notify()

    def _limit_reads(self, confirm_offset: int | None = None, master_alone: bool | None = None) -> None:
        """Consumers read up to what the node says; the live core's facts unless given."""
        if confirm_offset is None:
            confirm_offset, master_alone = (self.master.read_facts() if self.master is not None
                                            else (self.store.confirm_offset, False))
        self.store.set_read_limit(self.node.read_limit(confirm_offset, bool(master_alone)))

    # --- the write path --------------------------------------------------------------------------
    def check_replicas(self) -> None:
        """A write on a master the node allows: enough replicas in sync (SYNC_MASTER)."""
        master = self.master
        if master is None:
            raise RequestRejected(Code.HA_NOT_AVAILABLE, f"broker {self.name} is no longer master")
        master.check_writable()

    @property
    def puts_wait(self) -> bool:
        """Whether a put must await :meth:`wait_replicated`: a SYNC_MASTER's, or to be refused
        when this replica is no longer master (an ASYNC_MASTER's returns at once)."""
        master = self.master
        return master is None or master.puts_wait

    async def wait_replicated(self, end_offset: int) -> None:
        master = self.master
        if master is None:
            raise RequestRejected(Code.HA_NOT_AVAILABLE, f"broker {self.name} is no longer master")
        await master.wait_replicated(end_offset)

    def visible_offset(self) -> int:
        if self.master is not None:
            return self.master.visible_offset()
        return self.store.confirm_offset

    # --- switches: the interpreter of ha.role.replica_node's effects -----------------------------
    async def carry_out(self, ready: Ready, other: Callable[[Effect], Awaitable[None]] | None = None,
                        propose: Propose | None = None, master_address: MasterAddress | None = None) -> None:
        """Carry out ``ready``'s effects in order; ``other(effect)`` carries out those that are
        not replication's (AskElection, FollowRole: the controller-mode driver's)."""
        for effect in ready.effects:
            if isinstance(effect, (AskElection, FollowRole)):
                if other is not None:
                    await other(effect)
            else:
                await self._apply(effect, propose, master_address)
            self.node.done(effect)

    async def _apply(self, effect: Effect, propose: Propose | None, master_address: MasterAddress | None) -> None:
        if isinstance(effect, RefusePuts):
            self.store.refuse_puts(f"broker {self.name} is {effect.reason}")
            self._notify()
        elif isinstance(effect, StopCopying):
            if self.slave is not None:
                slave, self.slave = self.slave, None
                await slave.stop()
        elif isinstance(effect, StopMasterCore):
            if self.master is not None:
                master, self.master = self.master, None
                await master.stop()
        elif isinstance(effect, DrainPuts):
            await self.store.drain_puts()
        elif isinstance(effect, InvalidateDerived):
            self.store.invalidate_derived()  # records applied before writes that never landed
        elif isinstance(effect, MakeDurable):
            # The entry's start must be durable before the entry: a power loss that took back
            # bytes below it would drop the entry at recovery, and the broker would then take
            # the same epoch again (ha.role.decisions: never resume an epoch).
            self._durable_to = self.store.commit_log_max_offset
            await self.store.wait_flushed(self._durable_to)
        elif isinstance(effect, OpenEpoch):
            assert self.store.commit_log_max_offset == self._durable_to, "a write landed while switching to master"
            self.store.epochs.start_epoch(effect.epoch, self._durable_to)
        elif isinstance(effect, StartMasterCore):
            self._start_master(effect, propose)
        elif isinstance(effect, AllowPuts):
            self.store.refuse_puts(None)
            self._notify()
            log.info("%s: now master (epoch %d, SyncStateSet %s)", self.name, self.master_epoch,
                     sorted(self.master.group.sync_state_set))
        elif isinstance(effect, StartCopying):
            self._start_copying(effect, master_address)
        elif isinstance(effect, MoveCopyEpoch):
            self.master_epoch = max(self.master_epoch, effect.epoch)
            self.slave.change_master_epoch(effect.epoch)
        else:
            assert isinstance(effect, AdoptSet), effect
            if self.master is not None:
                self.master.adopt_sync_state_set(effect.members, effect.epoch)

    def _start_master(self, effect: StartMasterCore, propose: Propose | None) -> None:
        self_id = MASTER_ID if effect.epoch is None else self.own_id
        self.master = ReplicationMaster(self.name, self.store, self.config, self.clock, self_id=self_id,
                                        propose=propose, sync_state_set=effect.sync_state_set,
                                        sync_state_set_epoch=effect.sync_state_set_epoch, on_reads=self._limit_reads)
        self.master.start()
        self.master_epoch = effect.epoch or self.store.epochs.history.last_epoch

    def _start_copying(self, effect: StartCopying, master_address: MasterAddress | None) -> None:
        assert master_address is not None, "a slave needs its master's address"
        self.master_epoch = max(self.master_epoch, effect.epoch)
        self.slave = ReplicationSlave(self.name, self.own_id, self.store, self.config, self.clock, master_address,
                                      known_master_epoch=effect.epoch, on_change=self._notify,
                                      on_master_metadata=self._master_metadata_changed,
                                      on_reads=lambda confirm: self._limit_reads(confirm, False))
        self.slave.start()
        log.info("%s: now slave (epoch %d)", self.name, effect.epoch)

    async def become_master(self) -> None:
        """Outside controller mode: serve as the configured master."""
        await self.carry_out(self.node.configure(Role.MASTER))

    async def become_slave(self, master_address: MasterAddress) -> None:
        """Outside controller mode: copy from the master ``master_address()`` names."""
        await self.carry_out(self.node.configure(Role.SLAVE), master_address=master_address)

    async def stop(self) -> None:
        self.node.abandon()
        for driver in (self.slave, self.master):
            if driver is not None:
                await driver.stop()
        self.slave = self.master = None

    # --- status ----------------------------------------------------------------------------------
    def status(self) -> dict:
        if self.master is not None:
            return {**self.master.status(), "role": "MASTER", "replicaId": self.own_id}
        if self.slave is not None:
            return {**self.slave.status(), "role": self.role.value, "replicaId": self.own_id,
                    "masterEpoch": self.master_epoch}
        return {"brokerName": self.name, "role": self.role.value, "replicaId": self.own_id,
                "masterEpoch": self.master_epoch, "maxOffset": self.store.commit_log_max_offset,
                "confirmOffset": self.store.confirm_offset,
                "epochs": [list(pair) for pair in self.store.epochs.history.pairs()]}
