"""One broker's replication, whatever its role: the role, the driver that runs for it, the switches.

Rules:

* A replica is FENCED, MASTER (a :class:`services.ha.master.ReplicationMaster` serves its
  slaves) or SLAVE (a :class:`services.ha.slave.ReplicationSlave` copies from its master).
  Outside controller mode the role comes from ``brokerRole`` and never changes; in
  controller mode the replica starts FENCED and the controller's decisions
  (ha.role.decisions) switch it at runtime, inside the running container.
* Writes: only a MASTER takes them, and only while its pause fence allows (ha.role.fence);
  a FENCED or SLAVE replica refuses with a status the client retries elsewhere.
* To master (RocketMQ's ``changeToMaster``): stop copying (every write in flight is committed
  first), open the new epoch in the epoch file (fsynced) when it is newer than the file's,
  then start serving slaves; only then is the role MASTER and do writes go through.
* To slave (``changeToSlave``): the role changes first, so writes stop at once; then the
  master driver stops (puts waiting for replicas fail: nothing unreplicated is acknowledged
  by a deposed master), then the copy starts; its handshake cuts the log back to the
  consistent point physically and durably before anything else (upstream #10666, #7689).
* ``broker_id`` is the id routes show: 0 for a master, the replica's own id otherwise.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from ha.replication.config import HaConfig
from ha.role.decisions import Role
from ha.role.fence import PauseFence
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
        self.name, self.own_id, self.store, self.config, self.clock = name, own_id, store, config, clock
        self.fence = fence
        self.role = Role.FENCED
        store.refuse_puts(f"broker {name} has no role yet")
        self.master: ReplicationMaster | None = None
        self.slave: ReplicationSlave | None = None
        self.master_epoch = 0
        self._changed = asyncio.Event()
        self._metadata_listeners: list[Callable[[], None]] = []

    # --- changes: who serves this group's clients ------------------------------------------------
    def _notify(self) -> None:
        """The role changed, or the copy (dis)connected: wake calls waiting on this replica."""
        self._changed.set()
        self._changed = asyncio.Event()

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

    @property
    def copying_from_master(self) -> bool:
        """A SLAVE whose replication is connected to a master now (acting master: such a slave
        never acts, whatever the nameserver says)."""
        return self.role is Role.SLAVE and self.slave is not None and bool(self.slave.connected_to)

    @property
    def broker_id(self) -> int:
        return MASTER_ID if self.role is Role.MASTER else self.own_id

    @property
    def is_master(self) -> bool:
        return self.role is Role.MASTER

    # --- the write path --------------------------------------------------------------------------
    def check_writable(self) -> None:
        if self.role is not Role.MASTER:
            raise RequestRejected(Code.FORBIDDEN if self.role is Role.SLAVE else Code.HA_NOT_AVAILABLE,
                                  f"broker {self.name}-{self.own_id} is {self.role.value.lower()}, not master")
        if self.fence is not None and not self.fence.writable(self.clock.monotonic_ms()):
            raise RequestRejected(Code.HA_NOT_AVAILABLE,
                                  f"broker {self.name}: confirming with the controller that it is still master "
                                  "after a pause")
        self.master.check_writable()

    async def wait_replicated(self, end_offset: int) -> None:
        master = self.master
        if master is None:
            raise RequestRejected(Code.HA_NOT_AVAILABLE, f"broker {self.name} is no longer master")
        await master.wait_replicated(end_offset)

    def visible_offset(self) -> int:
        if self.master is not None:
            return self.master.visible_offset()
        return self.store.confirm_offset

    # --- switches --------------------------------------------------------------------------------
    async def become_master(self, *, epoch: int | None = None, propose: Propose | None = None,
                            sync_state_set: frozenset[int] = frozenset(), sync_state_set_epoch: int = 0) -> None:
        """Serve as master; ``epoch`` is the controller's (None outside controller mode), newer
        than the epoch file's last one (ha.role.decisions): it opens a new entry."""
        if self.slave is not None:
            slave, self.slave = self.slave, None
            await slave.stop()
        if self.master is not None:
            master, self.master = self.master, None
            await master.stop()
        if epoch is not None:
            # The entry's start must be durable before the entry: a power loss that took back
            # bytes below it would drop the entry at recovery, and the broker would then take
            # the same epoch again (ha.role.decisions: never resume an epoch).
            start = self.store.commit_log_max_offset
            await self.store.wait_flushed(start)
            self.store.epochs.start_epoch(epoch, start)
        self_id = MASTER_ID if epoch is None else self.own_id
        self.master = ReplicationMaster(self.name, self.store, self.config, self.clock, self_id=self_id,
                                        propose=propose, sync_state_set=sync_state_set,
                                        sync_state_set_epoch=sync_state_set_epoch)
        self.master.start()
        self.master_epoch = epoch or self.store.epochs.history.last_epoch
        self.store.refuse_puts(None)
        self.role = Role.MASTER
        self._notify()
        log.info("%s: now master (epoch %d, SyncStateSet %s)", self.name, self.master_epoch,
                 sorted(self.master.group.sync_state_set))

    async def become_slave(self, master_address: MasterAddress, epoch: int = 0, reconnect: bool = True) -> None:
        """Copy from the master ``master_address()`` names; fence masters older than ``epoch``."""
        was = self.role
        self.role = Role.SLAVE
        self.store.refuse_puts(f"broker {self.name} is a slave")
        self.master_epoch = max(self.master_epoch, epoch)
        self._notify()
        if self.master is not None:
            master, self.master = self.master, None
            await master.stop()
        await self.store.drain_puts()
        if was is Role.MASTER:
            self.store.invalidate_derived()  # records applied before writes that never landed
        if self.slave is not None and not reconnect:
            self.slave.change_master_epoch(epoch)
            return
        if self.slave is not None:
            slave, self.slave = self.slave, None
            await slave.stop()
        self.slave = ReplicationSlave(self.name, self.own_id, self.store, self.config, self.clock, master_address,
                                      known_master_epoch=epoch, on_change=self._notify,
                                      on_master_metadata=self._master_metadata_changed)
        self.slave.start()
        if was is not Role.SLAVE:
            log.info("%s: now slave (epoch %d)", self.name, epoch)

    async def fence_off(self) -> None:
        """Stop writing and stop serving slaves; copy nothing (a master that saw a newer epoch
        with no master, before the election settles who is next)."""
        was, self.role = self.role, Role.FENCED
        self.store.refuse_puts(f"broker {self.name} is fenced")
        if was is Role.MASTER:
            self.store.invalidate_derived()
        self._notify()
        if self.master is not None:
            master, self.master = self.master, None
            await master.stop()
        log.warning("%s: fenced: no writes until the controller names a master", self.name)

    def adopt_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        if self.master is not None:
            self.master.adopt_sync_state_set(members, epoch)

    async def stop(self) -> None:
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
