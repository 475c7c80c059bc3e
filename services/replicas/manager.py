"""One broker under the controller (``enableControllerMode``): RocketMQ's ``ReplicasManager``.

Rules (reference 4.6; ha.role says what is decided, this driver only carries it out):

* Start FENCED.  Register the identity with the controller (ha.role.identity: the
  ``brokerIdentity`` files, GetNextBrokerId, ApplyBrokerId, RegisterBroker), retrying every
  ``syncBrokerMetadataPeriod`` while no controller answers; a refused identity file keeps
  the broker fenced and unrouted, with one error line naming the file.
* Views of the group reach the broker four ways, and every one goes through the same
  replica node (ha.role.replica_node) under one lock, so role changes never interleave: the
  reply to RegisterBroker or ElectMaster, the ``WatchReplicaInfo`` stream (pushed at once by
  the leader; the stream names the broker, so the leader takes its end as the broker's
  death), the leader's heartbeat replies, and a ``GetReplicaInfo`` poll every
  ``syncBrokerMetadataPeriod`` as the fallback.
* A group's very first election (master epoch 0) waits up to ``firstElectionWaitMillis`` for
  ``totalReplicas`` replicas to register, so that ``brokerElectionPriority`` picks the first
  master when a deployment's containers start together.
* Heartbeats go every ``brokerHeartbeatInterval`` to every controller member, the leader
  always among them (upstream #10812), with the epoch, offsets, timeout and priority.
* A broker named master at the epoch its epoch file already has (a restart faster than the
  controller noticed, or an old view after stepping down) never resumes it: it asks the
  controller to elect it again at a new epoch (ElectMaster ``renew_master_epoch``).
* The pause fence (ha.role.fence) ticks with the heartbeats; after a pause the master
  writes again only once the leader's view confirms it is still master at its epoch.
* SyncStateSet changes the master's core proposes go out as AlterSyncStateSet with the
  master's epoch and the set's epoch (the controller fences stale ones).
* After each role change the broker's special services follow the role, the topic table's
  stateVersion becomes the master epoch (the nameserver prefers the newer epoch when two
  brokers claim id 0, upstream #6316), and ``on_role_changed`` re-registers the broker.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

import grpc

from ha.role.decisions import BecomeMaster, BecomeSlave, GroupView, Role
from ha.role.fence import PauseFence
from ha.role.replica_node import AskElection, FollowRole, Ready, ReplicaNode
from ha.role.identity import (ApplyId, AskNextId, DeleteTempAndRestart, IdentityRegistration, Refuse, Register, Step,
                              WriteIdentity, WriteTemp)
from ha.replication.master_group import Proposal
from proto import controller_pb2 as cpb
from scheduler.clock import Clock
from scheduler.periodic import PeriodicTasks
from services.controller.client import ControllerClient, ControllerClientError
from services.replicas.identity_files import IdentityFiles

log = logging.getLogger(__name__)
SUCCESS = cpb.ControllerStatus.SUCCESS
BROKER_ID_INVALID = cpb.ControllerStatus.CONTROLLER_BROKER_ID_INVALID


def view_from_proto(view: cpb.ReplicaGroupView) -> GroupView:
    master = view.master_broker_id if view.master_broker_id > 0 else None
    return GroupView(master, view.master_address, view.master_epoch, view.sync_state_set_epoch,
                     frozenset(view.sync_state_set))


class ReplicasManager:
    def __init__(self, hosted, address: str, heartbeat_interval_ms: int, clock: Clock,
                 on_role_changed: Callable[[], Awaitable[None]]):
        """``hosted``: the container's HostedBroker (broker, replica, store, spec); ``address``:
        the container's internal address, which the controller records for this replica."""
        self.hosted, self.address, self.clock = hosted, address, clock
        self.config = hosted.spec.broker
        self.name, self.cluster = self.config.broker_name, self.config.broker_cluster_name
        self.replica = hosted.replica
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.on_role_changed = on_role_changed
        self.client = ControllerClient(self.config.controller_addresses, call_timeout_s=3.0, attempts=4,
                                       deadline_s=5.0, retry_pause_s=0.1)
        self.identity = IdentityRegistration(self.cluster, self.name, address)
        self.files = IdentityFiles(hosted.store.config.store_path_root_dir)
        self.master_address = ""
        self.refused = ""
        self._lock = asyncio.Lock()
        self._tasks = PeriodicTasks(f"controller-mode {self.name}")
        self._runner: asyncio.Task | None = None
        self._watch: asyncio.Task | None = None
        self._watching: tuple[str, object] | None = None  # (address, call) of the watch stream
        self._members = 0  # replicas the controller knows in the group (the last view's)
        self._group_epoch = 0  # the group's master epoch in the last view (0: never had a master)
        self._started_ms = clock.monotonic_ms()
        self._waiting_logged = False

    @property
    def fence(self) -> PauseFence:
        return self.replica.fence

    @property
    def node(self) -> ReplicaNode:
        return self.replica.node

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._runner = asyncio.get_running_loop().create_task(self._run(), name=f"replicas-{self.name}")

    async def stop(self) -> None:
        for task in (self._runner, self._watch):
            if task is not None:
                task.cancel()
        await asyncio.gather(*[t for t in (self._runner, self._watch) if t is not None], return_exceptions=True)
        await self._tasks.stop()
        await self.client.close()

    async def _run(self) -> None:
        try:
            await self._start_session()
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: say so loudly; the broker stays fenced
            log.exception("%s: the controller-mode driver failed; the broker stays fenced", self.name)

    async def _start_session(self) -> None:
        view = await self._register()
        if view is None:
            return
        self._tasks.declare("heartbeat", self.heartbeat_interval_ms, self._heartbeat)
        self._tasks.declare("sync-broker-metadata", self.config.sync_broker_metadata_period_ms, self.poll,
                            self.config.sync_broker_metadata_period_ms)
        self._tasks.start()
        await self._heartbeat()
        await self.on_view(view)
        self._watch = asyncio.get_running_loop().create_task(self._watch_loop(), name=f"watch-{self.name}")

    # --- identity --------------------------------------------------------------------------------
    async def _register(self) -> cpb.ControllerReplicaResponse | None:
        """Walk the identity steps until RegisterBroker answers; None when refused for good."""
        step: Step = self.identity.start(self.files.read_identity(), self.files.read_temp())
        while True:
            if isinstance(step, Refuse):
                self.refused = step.reason
                log.error("%s: not joining the controller: %s", self.name, step.reason)
                return None
            try:
                result = await self._identity_step(step)
            except ControllerClientError as failure:
                log.warning("%s: controller unreachable while registering (%s); retrying", self.name, failure)
                await asyncio.sleep(self.config.sync_broker_metadata_period_ms / 1000)
                continue
            if isinstance(result, cpb.ReplicaGroupView):
                return result
            step = result

    async def _identity_step(self, step: Step):
        if isinstance(step, AskNextId):
            reply = await self.client.call("GetNextBrokerId", cpb.GetNextBrokerIdRequest(
                cluster_name=self.cluster, broker_name=self.name))
            self._check(reply.status, "GetNextBrokerId")
            return self.identity.next_id(reply.next_broker_id, self.clock.now_ms())
        if isinstance(step, WriteTemp):
            self.files.write_temp(step.temp.render())
            return self.identity.temp_written(step.temp)
        if isinstance(step, ApplyId):
            reply = await self.client.call("ApplyBrokerId", cpb.ApplyBrokerIdRequest(
                cluster_name=self.cluster, broker_name=self.name, applied_broker_id=step.temp.broker_id,
                register_check_code=step.temp.check_code))
            if reply.status.code not in (SUCCESS, BROKER_ID_INVALID):
                self._check(reply.status, "ApplyBrokerId")
            return self.identity.applied(reply.status.code == SUCCESS)
        if isinstance(step, WriteIdentity):
            self.files.write_identity(step.identity.render())
            self.files.delete_temp()
            return self.identity.identity_written()
        if isinstance(step, DeleteTempAndRestart):
            self.files.delete_temp()
            return self.identity.restarted()
        assert isinstance(step, Register), step
        reply = await self.client.call("RegisterBroker", cpb.RegisterBrokerRequest(
            cluster_name=self.cluster, broker_name=self.name, broker_id=step.broker_id, broker_address=self.address))
        self._check(reply.status, "RegisterBroker")
        self.identity.registered()
        self.replica.own_id = step.broker_id
        log.info("%s: registered with the controller as replica %d", self.name, step.broker_id)
        return reply.view

    @staticmethod
    def _check(status: cpb.ControllerStatus, what: str) -> None:
        if status.code != SUCCESS:
            raise ControllerClientError(f"{what}: {cpb.ControllerStatus.Code.Name(status.code)} {status.remark}")

    # --- views and decisions ---------------------------------------------------------------------
    async def on_view(self, proto_view: cpb.ReplicaGroupView) -> None:
        """Decide on a view of the group (and on what an election answers), then carry it out."""
        if not proto_view.broker_name or proto_view.broker_name != self.name:
            return
        async with self._lock:
            self._members = len(proto_view.members)
            self._group_epoch = proto_view.master_epoch
            view: GroupView | None = view_from_proto(proto_view)
            for _ in range(4):  # Elect answers with a view: decide again (bounded)
                ready = self.node.on_view(view, self.replica.store.epochs.history.last_epoch)
                if ready.log_epoch_file_ahead:
                    log.error("%s: the controller names this broker master at epoch %d, but its epoch file is at %d; "
                              "staying fenced", self.name, view.master_epoch, self.replica.store.epochs.history.last_epoch)
                view = await self._carry_out(ready)
                if view is None:
                    return

    async def _carry_out(self, ready: Ready) -> GroupView | None:
        """The node's effects in order; the view an election answered with, if one was asked."""
        answered: list[GroupView | None] = []

        async def controller_side(effect) -> None:
            if isinstance(effect, FollowRole):
                await self._role_changed(effect)
            else:
                answered.append(await self._elect(effect))

        decision = ready.decision
        if isinstance(decision, BecomeMaster):
            log.warning("%s: becoming master at epoch %d (SyncStateSet %s)", self.name, decision.epoch,
                        sorted(decision.sync_state_set))
        elif isinstance(decision, BecomeSlave):
            log.warning("%s: following master %d at %s (epoch %d)", self.name, decision.master_id,
                        decision.master_address, decision.epoch)
            self.master_address = decision.master_address
        await self.replica.carry_out(ready, controller_side, propose=self._propose,
                                     master_address=self.current_master_address)
        if isinstance(decision, BecomeMaster):
            self.master_address = ""
        return answered[0] if answered else None

    async def _first_election_waits(self) -> bool:
        """The group's first election waits (bounded) until totalReplicas replicas are alive."""
        if self._group_epoch != 0 or self.clock.monotonic_ms() - self._started_ms >= self.config.first_election_wait_ms:
            return False
        reply = await self.client.call("GetSyncStateData", cpb.GetSyncStateDataRequest(broker_names=[self.name]))
        alive = sum(1 for g in reply.groups for r in g.replicas if r.alive)
        waiting = alive < self.hosted.spec.ha.total_replicas
        if waiting and not self._waiting_logged:
            self._waiting_logged = True
            log.info("%s: the first election waits up to %d ms for %d replicas (%d alive)", self.name,
                     self.config.first_election_wait_ms, self.hosted.spec.ha.total_replicas, alive)
        return waiting

    async def _elect(self, effect: AskElection) -> GroupView | None:
        """ElectMaster (``renew_master_epoch``: named master at the epoch its epoch file already
        has, it never resumes it and asks for a new one); the view the controller answers."""
        if effect.renew_epoch:
            log.warning("%s: named master at epoch %d, which its epoch file already has; asking the controller for "
                        "a new epoch instead of resuming it", self.name, effect.renew_epoch)
        else:
            try:
                if await self._first_election_waits():
                    return None
            except ControllerClientError:
                return None
        return await self._ask_election(cpb.ElectMasterRequest(
            cluster_name=self.cluster, broker_name=self.name, broker_id=self.replica.own_id,
            renew_master_epoch=effect.renew_epoch))

    async def _ask_election(self, request: cpb.ElectMasterRequest) -> GroupView | None:
        """ElectMaster; the view it answers with (elected, or refused with the current view)."""
        try:
            reply = await self.client.call("ElectMaster", request)
        except ControllerClientError as failure:
            log.warning("%s: the controller did not answer the election (%s)", self.name, failure)
            return None
        if not reply.HasField("view") or not reply.view.broker_name:
            return None
        elected = view_from_proto(reply.view)
        return elected if elected.master_id is not None else None

    async def current_master_address(self) -> str | None:
        """The internal address of the master this broker follows (None while it follows none)."""
        return self.master_address or None

    async def _role_changed(self, effect: FollowRole) -> None:
        broker = self.hosted.broker
        broker.topics.stamp_state_version(effect.epoch, self.clock.now_ms())
        if effect.open_state_version:
            broker.open_state_version(effect.epoch)
        await broker.apply_role()
        try:
            await self.on_role_changed()
        except Exception:  # registration retries on its own schedule
            log.exception("%s: re-registering after the role change failed", self.name)

    async def _propose(self, proposal: Proposal) -> tuple[frozenset[int], int] | None:
        reply = await self.client.call("AlterSyncStateSet", cpb.AlterSyncStateSetRequest(
            broker_name=self.name, master_broker_id=self.replica.own_id, master_epoch=self.node.local.master_epoch,
            new_sync_state_set=sorted(proposal.members), sync_state_set_epoch=proposal.based_on_epoch))
        if reply.status.code != SUCCESS:
            log.warning("%s: AlterSyncStateSet %s refused: %s %s", self.name, sorted(proposal.members),
                        cpb.ControllerStatus.Code.Name(reply.status.code), reply.status.remark)
            return None
        return frozenset(reply.view.sync_state_set), reply.view.sync_state_set_epoch

    # --- periodic: heartbeats, the fence, the poll -----------------------------------------------
    async def _heartbeat(self) -> None:
        paused = self.node.tick(self.clock.monotonic_ms())
        if paused and self.node.role is Role.MASTER:
            log.warning("%s: this process paused for more than %d ms; no writes until the controller confirms it "
                        "is still master", self.name, self.config.controller_heartbeat_timeout_ms)
        store = self.replica.store
        request = cpb.BrokerHeartbeatRequest(
            cluster_name=self.cluster, broker_name=self.name, broker_id=self.replica.own_id,
            broker_address=self.address, epoch=store.epochs.history.last_epoch,
            max_offset=store.commit_log_max_offset, confirm_offset=store.confirm_offset,
            heartbeat_timeout_ms=self.config.controller_heartbeat_timeout_ms,
            election_priority=self.config.broker_election_priority)
        timeout = max(0.2, self.heartbeat_interval_ms / 1000)
        replies = await asyncio.gather(*[self.client.stub(a).BrokerHeartbeat(request, timeout=timeout)
                                         for a in self.client.addresses], return_exceptions=True)
        for address, reply in zip(self.client.addresses, replies):
            if isinstance(reply, BaseException) or not reply.is_leader:
                continue
            self.client.leader = address
            if self._watching is not None and self._watching[0] != address:
                self._watching[1].cancel()  # the session belongs with the leader: move it there
            if reply.HasField("view"):
                await self.on_view(reply.view)
        if paused:
            await self.poll()

    async def poll(self) -> None:
        try:
            reply = await self.client.call("GetReplicaInfo", cpb.GetReplicaInfoRequest(broker_name=self.name))
        except ControllerClientError as failure:
            log.debug("%s: GetReplicaInfo failed: %s", self.name, failure)
            return
        if reply.status.code == SUCCESS:
            await self.on_view(reply.view)

    # --- the watch stream (the broker's session with the leader) ---------------------------------
    async def _watch_loop(self) -> None:
        request = cpb.WatchReplicaInfoRequest(broker_name=self.name, cluster_name=self.cluster,
                                              broker_id=self.replica.own_id)
        while True:
            address = await self._leader_address()
            if address is None:
                await asyncio.sleep(self.heartbeat_interval_ms / 1000)
                continue
            call = self.client.stub(address).WatchReplicaInfo(request)
            self._watching = (address, call)
            log.info("%s: watching the group at the controller leader %s", self.name, address)
            try:
                async for reply in call:
                    if reply.status.code == SUCCESS:
                        await self.on_view(reply.view)
                    elif reply.status.code != cpb.ControllerStatus.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                        break
            except grpc.aio.AioRpcError as failure:
                log.debug("%s: watch on %s ended: %s", self.name, address, failure.code().name)
                self.client.leader = None
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():
                    raise  # stopping
                continue  # moved to the new leader at once
            finally:
                self._watching = None
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)

    async def _leader_address(self) -> str | None:
        if self.client.leader:
            return self.client.leader
        try:
            meta = await self.client.metadata()
        except ControllerClientError:
            return None
        return meta.leader_address or None

    def status(self) -> dict:
        return {"controllerMode": True, "replicaId": self.replica.own_id, "registerState": self.identity.state.value,
                "refused": self.refused, "masterAddress": self.master_address,
                "masterEpoch": self.node.local.master_epoch, "syncStateSetEpoch": self.node.local.sync_state_set_epoch}
