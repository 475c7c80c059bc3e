"""One simulated broker of the group: lifecycle, the role manager, the put path.

Rules:

* Start FENCED, register (RegisterBroker), watch the group, heartbeat every
  ``HEARTBEAT_MS`` (the pause fence ticks with it; a revealed pause polls the controller).
* Every view (register, election, heartbeat, watch, poll) goes to the replica's
  :class:`ha.role.replica_node.ReplicaNode`, the core production runs too; :meth:`apply` is
  the second interpreter of its effects (services/ha/replica.py is the first), so the
  simulation checks the production decisions and their order, not a copy of them.
* A put: only a MASTER whose fence allows it; the core decides (at once, wait, refuse);
  the record is written, acknowledged once durable and, when waiting, once the core says
  the replicas hold it.
"""
from __future__ import annotations

import random

from ha.controller.liveness import Heartbeat
from ha.controller.requests import ElectMaster, GetReplicaInfo, GroupView as ControllerView, RegisterBroker
from ha.replication.config import BrokerRole, HaConfig
from ha.replication.master_group import GroupSettings, MasterGroup
from ha.replication.quorum import QuorumRejection, WaitForAcks
from ha.replication.slave import SlaveSettings
from ha.role.decisions import GroupView, LocalRole, Role
from ha.role.fence import PauseFence
from ha.role.replica_node import (AdoptSet, AskElection, DrainPuts, MakeDurable, MoveCopyEpoch, OpenEpoch, ReplicaNode,
                                  StartCopying, StartMasterCore, StopCopying, StopMasterCore)
from tests.support.group_sim import records
from tests.support.group_sim.controller import CLUSTER, GROUP, Answer, Beat, Call, Watch
from tests.support.group_sim.disk import SimDisk
from tests.support.group_sim.network import CONTROLLER, Closed, SimNetwork
from tests.support.group_sim.replication import MasterSide, SlaveSide

HEARTBEAT_MS = 100
POLL_MS = 500
PROPOSAL_TIMEOUT_MS = 600
CLIENT = 99


def sim_config() -> HaConfig:
    return HaConfig(broker_role=BrokerRole.SYNC_MASTER, ha_transfer_batch_size=256, ha_max_time_slave_not_catchup_ms=800,
                    ha_send_heartbeat_interval_ms=200, ha_housekeeping_interval_ms=1000, total_replicas=3,
                    all_ack_in_sync_state_set=True, slave_timeout_ms=500, ha_connect_retry_interval_ms=100,
                    ha_max_pending_acks=64)


class SimBroker(MasterSide, SlaveSide):
    def __init__(self, broker_id: int, sim, net: SimNetwork, rng: random.Random, heartbeat_timeout_ms: int):
        self.id, self.sim, self.net, self.rng = broker_id, sim, net, rng
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.config = sim_config()
        self.slave_settings = SlaveSettings(broker_id, heartbeat_interval_ms=self.config.ha_send_heartbeat_interval_ms,
                                            housekeeping_interval_ms=self.config.ha_housekeeping_interval_ms)
        self.disk = SimDisk()
        self.up = False
        self.paused = False
        self.now_ms = 0

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self, now_ms: int) -> None:
        self.up, self.paused, self.now_ms = True, False, now_ms
        self.node = ReplicaNode(self.id, self.disk.epochs.last_epoch, PauseFence(self.heartbeat_timeout_ms))
        self.group: MasterGroup | None = None
        self.tokens: dict[int, int] = {}
        self.waits: dict[int, int] = {}
        self.flush_waits: list[tuple[int, int]] = []   # (end offset, message id) awaiting fdatasync
        self.session = None
        self.slave_connection = 0
        self.ack_target, self.ack_pending = 0, False
        self.reconnect_at_ms = 0
        self.proposal_serial, self.proposal_sent_ms = 0, None
        self.registered = False
        self.watch_connection = 0
        self.next_heartbeat_ms = now_ms
        self.next_poll_ms = now_ms

    def crash(self, power_loss: bool) -> None:
        """kill -9 (connections close, memory goes), maybe with a power loss (unflushed bytes go)."""
        for connection, token in list(self.tokens.items()):
            self.net.close(self.id, self.group.slave_id_of(token), connection)
        if self.slave_connection and self.local.master_id is not None:
            self.net.close(self.id, self.local.master_id, self.slave_connection)
        if self.watch_connection:
            self.net.close(self.id, CONTROLLER, self.watch_connection)
        self.net.paused.discard(self.id)
        self.net.drop_to(self.id)
        self.disk.crash(self.rng, power_loss)
        self.up, self.paused = False, False

    @property
    def role(self) -> Role:
        return self.node.role

    @property
    def local(self) -> LocalRole:
        return self.node.local

    def writable(self) -> bool:
        return self.up and not self.paused and self.node.write_refusal(self.now_ms) is None

    # --- the step --------------------------------------------------------------------------------
    def receive(self, src: int, connection: int, payload) -> None:
        if isinstance(payload, (Answer, Watch)):
            self.on_controller(payload)
        elif src == CONTROLLER and isinstance(payload, Closed):
            if connection == self.watch_connection:
                self.watch_connection = 0
        elif src == CLIENT:
            self.on_put(payload)
        elif connection and connection == self.slave_connection:
            self.on_master_frame(connection, payload)
        else:
            self.on_slave_frame(src, connection, payload)

    def step(self, now_ms: int) -> None:
        self.now_ms = now_ms
        if now_ms >= self.next_heartbeat_ms:
            self.heartbeat()
        if now_ms >= self.next_poll_ms:
            self.next_poll_ms = now_ms + POLL_MS
            request = GetReplicaInfo(GROUP) if self.registered else RegisterBroker(CLUSTER, GROUP, self.id, f"b{self.id}")
            self.net.send(self.id, CONTROLLER, Call(request, "view"))
        if self.disk.flush(self.rng):
            self.flushed()
        if self.group is not None:
            deadline = self.group.next_deadline_ms()
            if deadline is not None and now_ms >= deadline:
                self.carry_out(self.group.tick(self.master_log(), now_ms))
            if self.proposal_sent_ms is not None and now_ms - self.proposal_sent_ms > PROPOSAL_TIMEOUT_MS:
                self.proposal_sent_ms = None
                self.carry_out(self.group.refused(now_ms))
            if self.group is not None:
                self.pump()
        self.slave_step()

    def heartbeat(self) -> None:
        self.next_heartbeat_ms = self.now_ms + HEARTBEAT_MS
        revealed = self.node.tick(self.now_ms)
        disk = self.disk
        beat = Heartbeat(CLUSTER, GROUP, self.id, f"b{self.id}", disk.epochs.last_epoch, disk.end, disk.confirm,
                         self.heartbeat_timeout_ms, self.id)
        self.net.send(self.id, CONTROLLER, Beat(beat))
        if self.registered and not self.watch_connection:
            self.watch_connection = self.net.connect()
            self.net.send(self.id, CONTROLLER, Call(GetReplicaInfo(GROUP), "watch"), self.watch_connection)
        if revealed:
            self.net.send(self.id, CONTROLLER, Call(GetReplicaInfo(GROUP), "view"))

    def flushed(self) -> None:
        """Puts whose bytes are durable now wait for the replicas, decided afresh as
        ReplicationMaster.wait_replicated does (the set may have changed since the put)."""
        durable = self.disk.durable
        ready = [w for w in self.flush_waits if w[0] <= durable]
        self.flush_waits = [w for w in self.flush_waits if w[0] > durable]
        for end, message_id in ready:
            decision = self.group.decide_put(self.master_log()) if self.group is not None else None
            if decision is None or isinstance(decision, QuorumRejection):
                self.answer_put(message_id, False)
            elif not isinstance(decision, WaitForAcks):
                self.answer_put(message_id, True)
            else:
                result = self.group.wait(end, decision.need, self.master_log(), self.now_ms)
                if isinstance(result, QuorumRejection):
                    self.answer_put(message_id, False)
                    continue
                request_id, out = result
                self.waits[request_id] = message_id
                self.carry_out(out)

    # --- puts ------------------------------------------------------------------------------------
    def on_put(self, message_id: int) -> None:
        if not self.writable():
            self.answer_put(message_id, False)
            return
        decision = self.group.decide_put(self.master_log())
        if isinstance(decision, QuorumRejection):
            self.answer_put(message_id, False)
            return
        end = self.disk.append(records.encode(message_id))
        self.sim.on_write(self, message_id, end)
        self.flush_waits.append((end, message_id))

    def answer_put(self, message_id: int | None, ok: bool) -> None:
        if message_id is not None:
            self.sim.on_answer(self, message_id, ok)

    # --- the controller's views ------------------------------------------------------------------
    def on_controller(self, payload) -> None:
        if isinstance(payload, Watch):
            self.on_view(payload.view)
            return
        tag, reply = payload.tag, payload.reply
        if tag.startswith("alter:"):
            if self.group is not None and tag == f"alter:{self.proposal_serial}":
                self.proposal_sent_ms = None
                if reply.ok:
                    view = reply.view
                    self.carry_out(self.group.applied(view.sync_state_set, view.sync_state_set_epoch,
                                                      self.master_log(), self.now_ms))
                else:
                    self.carry_out(self.group.refused(self.now_ms))
            return
        if tag == "view" and reply.view is not None and not self.registered and reply.ok:
            self.registered = True
        if reply.view is not None and (reply.ok or tag == "elect"):
            self.on_view(reply.view)

    def on_view(self, controller_view: ControllerView) -> None:
        view = GroupView(controller_view.master_broker_id, controller_view.master_address,
                         controller_view.master_epoch, controller_view.sync_state_set_epoch,
                         controller_view.sync_state_set)
        ready = self.node.on_view(view, self.disk.epochs.last_epoch)
        self.sim.on_decision(self, ready.decision)
        for effect in ready.effects:   # the second interpreter of ha.role.replica_node's effects
            self.apply(effect)
            self.node.done(effect)

    def apply(self, effect) -> None:
        if isinstance(effect, StopCopying):
            self.stop_slave()
        elif isinstance(effect, StopMasterCore):
            self.stop_master()
        elif isinstance(effect, DrainPuts):
            for _, message_id in self.flush_waits:   # written, flushed, never acknowledged
                self.answer_put(message_id, False)
            self.flush_waits = []
            self.disk.durable = self.disk.end
        elif isinstance(effect, MakeDurable):
            self.disk.durable = self.disk.end
        elif isinstance(effect, OpenEpoch):
            assert self.disk.epochs.last_epoch < effect.epoch, (self.disk.epochs, effect)
            self.disk.epochs = self.disk.epochs.append(effect.epoch, self.disk.end)
        elif isinstance(effect, StartMasterCore):
            settings = GroupSettings(self.id, True, self.config, retry_ms=200)
            self.group = MasterGroup(settings, effect.sync_state_set, effect.sync_state_set_epoch, self.disk.confirm,
                                     self.now_ms)
        elif isinstance(effect, StartCopying):
            self.connect_to_master()
        elif isinstance(effect, MoveCopyEpoch):
            self.session.change_master_epoch(effect.epoch)
        elif isinstance(effect, AdoptSet):
            if self.group is not None:
                self.carry_out(self.group.applied(effect.members, effect.epoch, self.master_log(), self.now_ms))
        elif isinstance(effect, AskElection):
            self.net.send(self.id, CONTROLLER, Call(ElectMaster(CLUSTER, GROUP, self.id,
                                                                renew_master_epoch=effect.renew_epoch), "elect"))
        # RefusePuts, AllowPuts: writable() asks the node; InvalidateDerived, FollowRole: nothing
        # derived, no special services and no nameserver here

    def stop_master(self) -> None:
        group, self.group = self.group, None
        if group is None:
            return
        for connection, token in list(self.tokens.items()):
            self.net.close(self.id, group.slave_id_of(token), connection)
        self.tokens.clear()
        for message_id in self.waits.values():
            self.answer_put(message_id, False)
        self.waits.clear()
        self.proposal_sent_ms = None

    def stop_slave(self) -> None:
        if self.session is not None:
            self.close_slave_connection()
        self.session = None
