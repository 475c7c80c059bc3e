"""``ControllerService`` over gRPC: validate, convert, submit, convert back.

Rules:
- Requests are validated here (names non-empty, ids in range) and bad ones answered with
  ``CONTROLLER_INVALID_REQUEST``; the core only sees valid values.
- ``ControllerUnavailable`` (not leader, queue full, commit timeout) becomes a status in
  exactly one place, ``_call``; NOT_LEADER replies carry the leader's id and address.
- Heartbeats and metadata are answered by any member; everything else by the leader only.
  The leader's heartbeat reply carries the broker's group view (a master confirms its role
  with it after a pause).
- SyncAcl (a container's copy of the users and ACLs) is answered by the leader only: its
  origin, version and container names are checked here; the seed document is checked by
  ``metadata.acl_replication`` and a refusal is named in ``seed_refused``.
- Broker moves (issue 26): ReportContainer, MoveBroker, CancelMove and ListMoves are the
  leader's (:mod:`services.controller.reassign`); endpoints must be host:port and broker names
  names, checked here.
- A watch that names a broker (cluster_name, broker_id >= 1) is that broker's session: its
  end is the broker's death (``Controller.session_ended``).
"""
from __future__ import annotations

import json

from ha.controller.codes import ResponseCode
from ha.controller.commands import group_view
from ha.controller.liveness import Heartbeat
from ha.reassign.move import MoveRefused
from ha.controller.requests import (AlterSyncStateSet, ApplyBrokerId, CleanBrokerData, ElectMaster,
                                    GetNextBrokerId, GetReplicaInfo, GetSyncStateData, GroupView, RegisterBroker,
                                    Reply)
from proto import controller_pb2 as pb
from proto import controller_pb2_grpc as pb_grpc
from metadata.acl_replication import MAX_DOCUMENT_BYTES, AclStamp, check_origin
from services.controller.acl import AclNotCommitted, ControllerAcl
from services.controller.controller import Controller, ControllerUnavailable
from services.controller.reassign import ControllerMoves, NotCommitted, move_json, shared_of
from services.controller.watchers import TooManyWatchers

MAX_NAME = 255
MAX_ID = 2**31 - 1
MAX_BROKERS_NAMED = 1_000


class BadRequest(ValueError):
    pass


def _name(value: str, field: str) -> str:
    if not value or len(value) > MAX_NAME:
        raise BadRequest(f"{field} must be 1-{MAX_NAME} characters")
    return value


def _broker_id(value: int, field: str, allow_none: bool = False) -> int | None:
    if allow_none and value in (-1, 0):
        return None
    if not 1 <= value <= MAX_ID:
        raise BadRequest(f"{field} must be a broker id >= 1, got {value}")
    return value


def view_to_proto(view: GroupView | None) -> pb.ReplicaGroupView | None:
    if view is None:
        return None
    return pb.ReplicaGroupView(broker_name=view.broker_name, master_address=view.master_address,
                               master_broker_id=-1 if view.master_broker_id is None else view.master_broker_id,
                               master_epoch=view.master_epoch, sync_state_set_epoch=view.sync_state_set_epoch,
                               sync_state_set=sorted(view.sync_state_set), members=dict(view.members))


def _status(code: ResponseCode, remark: str = "", leader: str = "", address: str = "") -> pb.ControllerStatus:
    return pb.ControllerStatus(code=int(code), remark=remark, leader_id=leader, leader_address=address)


def _sync_stamp(request) -> AclStamp:
    if request.origin and (problem := check_origin(request.origin)) is not None:
        raise BadRequest(f"origin: {problem.detail}")
    if request.version < 0 or (request.version and not request.origin):
        raise BadRequest(f"version {request.version} without an origin" if request.version >= 0
                         else f"version must be >= 0, got {request.version}")
    _name(request.container, "container")
    if len(request.brokers) > MAX_BROKERS_NAMED:
        raise BadRequest(f"at most {MAX_BROKERS_NAMED} brokers")
    for broker in request.brokers:
        _name(broker, "brokers")
    if len(request.seed_document) > MAX_DOCUMENT_BYTES:
        raise BadRequest(f"seed_document is longer than {MAX_DOCUMENT_BYTES} characters")
    return AclStamp(request.origin, request.version)


class ControllerServicer(pb_grpc.ControllerServiceServicer):
    def __init__(self, controller: Controller, acl: ControllerAcl | None = None,
                 moves: ControllerMoves | None = None) -> None:
        self.controller = controller
        self.acl = acl or ControllerAcl(controller)
        self.moves = moves

    async def _call(self, build, respond):
        """Convert with ``build``, submit, and answer with ``respond(status, reply)``."""
        try:
            request = build()
        except BadRequest as exc:
            return respond(_status(ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc)), Reply())
        try:
            reply = await self.controller.submit(request)
        except ControllerUnavailable as exc:
            return respond(_status(exc.code, exc.remark, exc.leader_name, exc.leader_address), Reply())
        return respond(_status(reply.code, reply.remark), reply)

    @staticmethod
    def _replica_response(status, reply: Reply) -> pb.ControllerReplicaResponse:
        return pb.ControllerReplicaResponse(status=status, view=view_to_proto(reply.view))

    async def GetNextBrokerId(self, request, context):
        return await self._call(
            lambda: GetNextBrokerId(_name(request.cluster_name, "cluster_name"), _name(request.broker_name, "broker_name")),
            lambda s, r: pb.GetNextBrokerIdResponse(status=s, next_broker_id=r.next_broker_id))

    async def ApplyBrokerId(self, request, context):
        def build():
            if not request.register_check_code:
                raise BadRequest("register_check_code must be 'ip:port;timestampMs'")
            return ApplyBrokerId(_name(request.cluster_name, "cluster_name"), _name(request.broker_name, "broker_name"),
                                 _broker_id(request.applied_broker_id, "applied_broker_id"), request.register_check_code)
        return await self._call(build, lambda s, r: pb.ApplyBrokerIdResponse(status=s, broker_id=r.next_broker_id))

    async def RegisterBroker(self, request, context):
        return await self._call(
            lambda: RegisterBroker(_name(request.cluster_name, "cluster_name"), _name(request.broker_name, "broker_name"),
                                   _broker_id(request.broker_id, "broker_id"),
                                   _name(request.broker_address, "broker_address")),
            self._replica_response)

    async def ElectMaster(self, request, context):
        def build():
            renew = request.renew_master_epoch
            if renew < 0:
                raise BadRequest(f"renew_master_epoch must be >= 0, got {renew}")
            broker_id = _broker_id(request.broker_id, "broker_id",
                                   allow_none=not request.designate_elect and not renew)
            return ElectMaster(request.cluster_name, _name(request.broker_name, "broker_name"), broker_id,
                               request.designate_elect, renew)
        return await self._call(build, self._replica_response)

    async def AlterSyncStateSet(self, request, context):
        def build():
            members = frozenset(_broker_id(i, "new_sync_state_set") for i in request.new_sync_state_set)
            return AlterSyncStateSet(_name(request.broker_name, "broker_name"),
                                     _broker_id(request.master_broker_id, "master_broker_id"),
                                     request.master_epoch, members, request.sync_state_set_epoch)
        return await self._call(build, self._replica_response)

    async def GetReplicaInfo(self, request, context):
        return await self._call(lambda: GetReplicaInfo(_name(request.broker_name, "broker_name")),
                                self._replica_response)

    async def GetSyncStateData(self, request, context):
        def respond(status, reply: Reply):
            groups = [pb.ReplicaGroupDetail(view=view_to_proto(g.view), replicas=[
                pb.ReplicaStatusView(broker_id=r.broker_id, address=r.address, alive=r.alive, in_sync=r.in_sync)
                for r in g.replicas]) for g in reply.groups]
            return pb.GetSyncStateDataResponse(status=status, groups=groups)
        return await self._call(
            lambda: GetSyncStateData(tuple(_name(n, "broker_names") for n in request.broker_names)), respond)

    async def CleanBrokerData(self, request, context):
        return await self._call(
            lambda: CleanBrokerData(request.cluster_name, _name(request.broker_name, "broker_name"),
                                    request.broker_ids_to_clean, request.clean_living_broker),
            lambda s, r: pb.CleanBrokerDataResponse(status=s))

    async def BrokerHeartbeat(self, request, context):
        leader, address = self.controller.leader()
        is_leader = self.controller.machine.serving
        try:
            beat = Heartbeat(request.cluster_name, _name(request.broker_name, "broker_name"),
                             _broker_id(request.broker_id, "broker_id"), request.broker_address, request.epoch,
                             request.max_offset, request.confirm_offset, max(0, request.heartbeat_timeout_ms),
                             request.election_priority or 2**31 - 1)
        except BadRequest as exc:
            return pb.BrokerHeartbeatResponse(status=_status(ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc)))
        if not self.controller.heartbeat(beat):
            return pb.BrokerHeartbeatResponse(status=_status(ResponseCode.SYSTEM_ERROR, "too many brokers"))
        replicas = self.controller.machine.replicas
        view = view_to_proto(group_view(replicas, beat.broker_name)) \
            if is_leader and replicas.exists(beat.broker_name) else None
        return pb.BrokerHeartbeatResponse(status=_status(ResponseCode.SUCCESS), is_leader=is_leader,
                                          leader_address=address, view=view)

    async def GetControllerMetadata(self, request, context):
        config = self.controller.config
        leader, address = self.controller.leader()
        node = self.controller.driver.node
        return pb.GetControllerMetadataResponse(
            status=_status(ResponseCode.SUCCESS), group=config.group, self_id=config.self_id, leader_id=leader,
            leader_address=address, is_leader=self.controller.machine.serving, term=node.term,
            commit_index=node.commit_index,
            peers=[pb.ControllerPeer(id=p.name, address=p.address) for p in config.peers])

    async def WatchReplicaInfo(self, request, context):
        watchers = self.controller.watchers
        session = None
        if request.broker_id:
            try:
                session = (_name(request.cluster_name, "cluster_name"), _name(request.broker_name, "broker_name"),
                           _broker_id(request.broker_id, "broker_id"))
            except BadRequest as exc:
                yield pb.ControllerReplicaResponse(status=_status(ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc)))
                return
        try:
            queue = watchers.subscribe(request.broker_name)
        except TooManyWatchers as exc:
            yield pb.ControllerReplicaResponse(status=_status(ResponseCode.SYSTEM_ERROR, str(exc)))
            return
        if session is not None:
            self.controller.session_started(*session)
        try:
            replicas = self.controller.machine.replicas
            if request.broker_name and replicas.exists(request.broker_name):
                yield pb.ControllerReplicaResponse(status=_status(ResponseCode.SUCCESS),
                                                   view=view_to_proto(group_view(replicas, request.broker_name)))
            while True:
                name, view = await queue.get()
                if view is None:
                    yield pb.ControllerReplicaResponse(status=_status(
                        ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, f"{name} was cleaned"),
                        view=pb.ReplicaGroupView(broker_name=name, master_broker_id=-1))
                else:
                    yield pb.ControllerReplicaResponse(status=_status(ResponseCode.SUCCESS), view=view_to_proto(view))
        finally:
            watchers.unsubscribe(queue)
            if session is not None:
                self.controller.session_ended(*session)

    async def SyncAcl(self, request, context):
        try:
            known = _sync_stamp(request)
        except BadRequest as exc:
            return pb.SyncAclResponse(status=_status(ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc)))
        try:
            answer = await self.acl.sync(known, request.seed_document or None, request.container,
                                         tuple(request.brokers), self.controller.clock.monotonic_ms())
        except AclNotCommitted as exc:
            if self.controller.machine.serving:
                return pb.SyncAclResponse(status=_status(ResponseCode.SYSTEM_ERROR, str(exc)))
            leader, address = self.controller.leader()
            return pb.SyncAclResponse(status=_status(ResponseCode.CONTROLLER_NOT_LEADER, str(exc), leader, address))
        refused = f"{answer.refused.reason.value}: {answer.refused.detail}" if answer.refused else ""
        return pb.SyncAclResponse(status=_status(ResponseCode.SUCCESS), origin=answer.stamp.origin,
                                  version=answer.stamp.version, document=answer.text, seed_refused=refused)

    # ---- broker moves (issue 26)

    def _not_serving(self, remark: str = ""):
        if self.moves is None:
            return _status(ResponseCode.CONTROLLER_INVALID_REQUEST, "this controller does not drive broker moves")
        if not self.controller.machine.serving:
            refused = self.controller.not_leader()
            return _status(refused.code, remark or refused.remark, refused.leader_name, refused.leader_address)
        return None

    async def ReportContainer(self, request, context):
        status = self._not_serving()
        if status is not None:
            return pb.ReportContainerResponse(status=status)
        try:
            _endpoint(request.endpoint, "endpoint")
            _endpoint(request.admin_address, "admin_address")
            if len(request.brokers) > MAX_BROKERS_NAMED or len(request.shared) > MAX_BROKERS_NAMED:
                raise BadRequest(f"at most {MAX_BROKERS_NAMED} brokers per container")
            for name in [*request.brokers, *(b.name for b in request.shared)]:
                _name(name, "broker name")
            if any(len(b.entry_json) > MAX_ENTRY_BYTES or b.ownership_epoch < 0 for b in request.shared):
                raise BadRequest(f"a shared broker's entry_json is at most {MAX_ENTRY_BYTES} bytes and its epoch >= 0")
        except BadRequest as exc:
            return pb.ReportContainerResponse(status=_status(ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc)))
        self.moves.report(request.endpoint, request.admin_address, tuple(request.brokers), shared_of(request))
        return pb.ReportContainerResponse(status=_status(ResponseCode.SUCCESS))

    async def MoveBroker(self, request, context):
        status = self._not_serving()
        if status is not None:
            return pb.MoveBrokerResponse(status=status)
        try:
            _name(request.broker_name, "broker_name")
            _endpoint(request.to, "to")
            move = await self.moves.start(request.broker_name, request.to, request.execute)
        except (BadRequest, MoveRefused) as exc:
            return pb.MoveBrokerResponse(status=_status(ResponseCode.SUCCESS), refused=str(exc))
        except NotCommitted as exc:
            return pb.MoveBrokerResponse(status=self._not_serving(str(exc)) or _status(ResponseCode.SYSTEM_ERROR, str(exc)))
        return pb.MoveBrokerResponse(status=_status(ResponseCode.SUCCESS), move_json=move_json(move))

    async def CancelMove(self, request, context):
        status = self._not_serving()
        if status is not None:
            return pb.CancelMoveResponse(status=status)
        try:
            _name(request.broker_name, "broker_name")
            move, refused = await self.moves.cancel(request.broker_name)
        except (BadRequest, MoveRefused) as exc:
            return pb.CancelMoveResponse(status=_status(ResponseCode.SUCCESS), refused=str(exc))
        except NotCommitted as exc:
            return pb.CancelMoveResponse(status=self._not_serving(str(exc)) or _status(ResponseCode.SYSTEM_ERROR, str(exc)))
        return pb.CancelMoveResponse(status=_status(ResponseCode.SUCCESS), refused=refused, move_json=move_json(move))

    async def ListMoves(self, request, context):
        status = self._not_serving()
        if status is not None:
            return pb.ListMovesResponse(status=status)
        moves, containers = self.moves.listing()
        for body in [*moves["active"], *moves["finished"]]:
            body.pop("entry", None)
        return pb.ListMovesResponse(status=_status(ResponseCode.SUCCESS), moves_json=json.dumps(moves),
                                    containers_json=json.dumps(containers))


MAX_ENTRY_BYTES = 64 * 1024


def _endpoint(value: str, field: str) -> str:
    host, _, port = value.rpartition(":")
    if not host or len(value) > MAX_NAME or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadRequest(f"{field} must be host:port, got {value[:100]!r}")
    return value
