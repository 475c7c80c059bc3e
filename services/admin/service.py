"""The BrokerAdmin gRPC servicer a container serves on its internal port.

Rules:
- A request names one hosted broker; an empty name in a query means every hosted broker,
  in a mutation every hosted master.  An unknown name is ``BROKER_NOT_EXIST``.
- Topics and groups are changed on masters only (``BROKER_IS_SLAVE`` otherwise): slaves
  follow their master.
- After a topic change the ``on_topics_changed(broker_name)`` callback runs (the container
  re-registers with the nameserver) before the reply, so a route query that follows sees it.
- ``GetReplicaMetadata`` serves one broker's tables as one snapshot (slave sync and
  pre-online pull it); it names a broker (and optionally its id), never "every broker".
- ``WriteConsumerOffsets`` (compare-and-set, ``metadata.offset_write``) names one broker and
  is refused on a slave (``BROKER_IS_SLAVE``: only the master's table is authoritative, slaves
  adopt it by metadata sync).  A table that moved since the plan is a reply with
  ``written = false``, not an error; a refused queue is a status named by its reason.
- Exceptions become gRPC statuses in exactly one place, :func:`_status_of`; details start
  with a named reason (``BAD_REQUEST``, ``BROKER_NOT_EXIST``, ``TOPIC_NOT_FOUND``, ...).
"""
from __future__ import annotations

import asyncio

import functools
import inspect
import json
import logging
from typing import Any, Awaitable, Callable, Mapping, Union

import grpc

from metadata.config import ConfigError
from metadata.offset_write import Moved, Refused, WriteRefusal
from metadata.status import Code, RequestRejected
from proto import admin_pb2 as pb
from proto import admin_pb2_grpc as pb_grpc
from services.admin import converters as conv
from services.admin import operation_converters as ops
from services.admin.add_broker_rules import AddBrokerRefused, check_config_path, check_new_broker
from services.admin.container_api import AddBrokerError, BrokerNotExistError, ContainerAdminApi
from services.admin.replica_converters import held_from_proto, replica_metadata_to_proto
from services.broker.admin_api import BrokerAdminApi
from services.broker.live_config import NotLive

log = logging.getLogger(__name__)

TopicsChanged = Callable[[str], Union[None, Awaitable[None]]]
ConfigLoader = Callable[[str], Mapping[str, Any]]


_WRITE_REFUSAL_CODES = {
    WriteRefusal.TOPIC_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    WriteRefusal.QUEUE_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    WriteRefusal.OFFSET_BEYOND_MAX: grpc.StatusCode.OUT_OF_RANGE,
    WriteRefusal.OFFSET_BEHIND_COMMITTED: grpc.StatusCode.FAILED_PRECONDITION,
}


class AdminRefused(Exception):
    def __init__(self, code: grpc.StatusCode, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.code = code


def _status_of(exc: Exception) -> tuple[grpc.StatusCode, str]:
    """The one place where admin exceptions become gRPC statuses."""
    if isinstance(exc, conv.BadAdminRequest):
        return grpc.StatusCode.INVALID_ARGUMENT, f"BAD_REQUEST: {exc}"
    if isinstance(exc, AdminRefused):
        return exc.code, str(exc)
    if isinstance(exc, BrokerNotExistError):
        return grpc.StatusCode.NOT_FOUND, f"BROKER_NOT_EXIST: {exc}"
    if isinstance(exc, AddBrokerError):
        return grpc.StatusCode.FAILED_PRECONDITION, f"ADD_BROKER_FAILED: {exc}"
    if isinstance(exc, NotLive):
        return grpc.StatusCode.FAILED_PRECONDITION, f"NOT_LIVE: {exc}"
    if isinstance(exc, ConfigError):
        return grpc.StatusCode.INVALID_ARGUMENT, f"BAD_CONFIG_VALUE: {exc}"
    if isinstance(exc, RequestRejected):
        if exc.code in (Code.NOT_FOUND, Code.TOPIC_NOT_FOUND, Code.CONSUMER_GROUP_NOT_FOUND, Code.OFFSET_NOT_FOUND):
            return grpc.StatusCode.NOT_FOUND, f"{exc.code.name}: {exc.message}"
        if 40000 <= exc.code < 50000:
            return grpc.StatusCode.FAILED_PRECONDITION, f"{exc.code.name}: {exc.message}"
        return grpc.StatusCode.INTERNAL, f"{exc.code.name}: {exc.message}"
    log.exception("admin: internal error")
    return grpc.StatusCode.INTERNAL, f"INTERNAL: {type(exc).__name__}: {exc}"


def _rpc(method: Callable) -> Callable:
    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await method(self, request)
        except Exception as exc:  # converted in one place
            code, details = _status_of(exc)
            await context.abort(code, details)
    return wrapper


class BrokerAdminServicer(pb_grpc.BrokerAdminServicer):
    def __init__(self, container: ContainerAdminApi, on_topics_changed: TopicsChanged | None = None,
                 load_config: ConfigLoader | None = None):
        self.container = container
        self.on_topics_changed = on_topics_changed
        self.load_config = load_config

    # ---- selection ----

    def _select(self, name: str) -> list[BrokerAdminApi]:
        brokers = self.container.brokers()
        if not name:
            return [brokers[key] for key in sorted(brokers)]
        broker = brokers.get(name)
        if broker is None:
            broker = next((b for b in brokers.values() if b.name == name), None)
        if broker is None:
            raise BrokerNotExistError(f"Broker not exist: {name}")
        return [broker]

    def _masters(self, name: str) -> list[BrokerAdminApi]:
        selected = self._select(conv.broker_name(name))
        if name and selected[0].role != "MASTER":
            raise AdminRefused(grpc.StatusCode.FAILED_PRECONDITION, "BROKER_IS_SLAVE",
                               f"{name} is a slave; change topics and groups on its master")
        masters = [b for b in selected if b.role == "MASTER"]
        if not masters:
            raise AdminRefused(grpc.StatusCode.FAILED_PRECONDITION, "NO_MASTER", "this container hosts no master")
        return masters

    async def _topics_changed(self, broker_name: str) -> None:
        if self.on_topics_changed is None:
            return
        try:
            result = self.on_topics_changed(broker_name)
            if inspect.isawaitable(result):
                await result
        except Exception:  # the change is durable; registration retries on its own schedule
            log.exception("admin: re-registering %s after a topic change failed", broker_name)

    # ---- topics and groups ----

    @_rpc
    async def CreateOrUpdateTopic(self, request: pb.AdminCreateOrUpdateTopicRequest) -> pb.AdminDone:
        masters = self._masters(request.broker_name)
        done = []
        for broker in masters:
            config = conv.topic_from_proto(request.topic, broker.topic_table().topics.get(request.topic.topic))
            await broker.upsert_topic(config)
            await self._topics_changed(broker.name)
            done.append(broker.name)
        return pb.AdminDone(broker_names=done)

    @_rpc
    async def DeleteTopic(self, request: pb.AdminDeleteTopicRequest) -> pb.AdminDone:
        topic = conv.topic_name(request.topic)
        masters = self._masters(request.broker_name)
        done = []
        for broker in masters:
            if topic in broker.topic_table().topics:
                await broker.delete_topic(topic)
                await self._topics_changed(broker.name)
                done.append(broker.name)
        return pb.AdminDone(broker_names=done)

    @_rpc
    async def ListTopics(self, request: pb.AdminListTopicsRequest) -> pb.AdminListTopicsResponse:
        replies = []
        for broker in self._select(conv.broker_name(request.broker_name)):
            table = broker.topic_table()
            replies.append(pb.AdminBrokerTopics(broker_name=broker.name, data_version=conv.data_version_to_proto(table.data_version),
                                                topics=[conv.topic_to_proto(t) for _, t in sorted(table.topics.items())]))
        return pb.AdminListTopicsResponse(brokers=replies)

    @_rpc
    async def CreateOrUpdateGroup(self, request: pb.AdminCreateOrUpdateGroupRequest) -> pb.AdminDone:
        masters = self._masters(request.broker_name)
        for broker in masters:
            config = conv.group_from_proto(request.group, broker.group_table().groups.get(request.group.group))
            await broker.upsert_group(config)
        return pb.AdminDone(broker_names=[b.name for b in masters])

    @_rpc
    async def DeleteGroup(self, request: pb.AdminDeleteGroupRequest) -> pb.AdminDone:
        group = conv.group_name(request.group)
        done = []
        for broker in self._masters(request.broker_name):
            if group in broker.group_table().groups:
                await broker.delete_group(group)
                done.append(broker.name)
        return pb.AdminDone(broker_names=done)

    @_rpc
    async def ListGroups(self, request: pb.AdminListGroupsRequest) -> pb.AdminListGroupsResponse:
        replies = []
        for broker in self._select(conv.broker_name(request.broker_name)):
            table = broker.group_table()
            replies.append(pb.AdminBrokerGroups(broker_name=broker.name, data_version=conv.data_version_to_proto(table.data_version),
                                                groups=[conv.group_to_proto(g) for _, g in sorted(table.groups.items())]))
        return pb.AdminListGroupsResponse(brokers=replies)

    # ---- status ----

    @_rpc
    async def TopicStatus(self, request: pb.AdminTopicStatusRequest) -> pb.AdminTopicStatusResponse:
        topic = conv.topic_name(request.topic)
        name = conv.broker_name(request.broker_name)
        replies = []
        for broker in self._select(name):
            try:  # a slave answers from its store even before its metadata sync brought the topic
                statuses = broker.topic_status(topic)
            except RequestRejected as rejected:
                if rejected.code is not Code.TOPIC_NOT_FOUND:
                    raise
                if name:
                    raise AdminRefused(grpc.StatusCode.NOT_FOUND, "TOPIC_NOT_FOUND", f"{name} has no topic {topic}") from None
                continue
            queues = [conv.queue_status_to_proto(q) for q in statuses]
            replies.append(pb.AdminBrokerTopicStatus(broker_name=broker.name, broker_id=broker.broker_id,
                                                     role=broker.role, queues=queues, acting=broker.is_acting))
        return pb.AdminTopicStatusResponse(topic=topic, brokers=replies)

    @_rpc
    async def ConsumerProgress(self, request: pb.AdminConsumerProgressRequest) -> pb.AdminConsumerProgressResponse:
        group = conv.group_name(request.group)
        topic = conv.topic_name(request.topic) if request.topic else None
        replies = []
        for broker in self._select(conv.broker_name(request.broker_name)):
            rows = [conv.progress_to_proto(p) for p in broker.consumer_progress(group, topic)]
            known = group in broker.group_table().groups or bool(rows)
            replies.append(pb.AdminBrokerProgress(broker_name=broker.name, broker_id=broker.broker_id, queues=rows,
                                                  group_known=known, acting=broker.is_acting))
        return pb.AdminConsumerProgressResponse(group=group, brokers=replies)

    @_rpc
    async def BrokerStatus(self, request: pb.AdminBrokerStatusRequest) -> pb.AdminBrokerStatusResponse:
        replies = [pb.AdminBrokerStatus(broker_name=b.name, broker_id=b.broker_id, cluster=b.cluster, role=b.role,
                                        status_json=json.dumps(dict(b.status()), default=str, sort_keys=True))
                   for b in self._select(conv.broker_name(request.broker_name))]
        container_json = json.dumps(dict(self.container.container_status()), default=str, sort_keys=True)
        return pb.AdminBrokerStatusResponse(brokers=replies, container_json=container_json)

    @_rpc
    async def GetConsumerOffsets(self, request: pb.AdminGetConsumerOffsetsRequest) -> pb.AdminGetConsumerOffsetsResponse:
        broker = self._select(conv.broker_name(request.broker_name, required=True))[0]
        table = broker.consumer_offset_table()
        return pb.AdminGetConsumerOffsetsResponse(broker_name=broker.name, broker_id=broker.broker_id, role=broker.role,
                                                  document=table.dumps(),
                                                  data_version=conv.data_version_to_proto(table.data_version))

    @_rpc
    async def GetReplicaMetadata(self, request: pb.AdminGetReplicaMetadataRequest) -> pb.AdminGetReplicaMetadataResponse:
        name = conv.broker_name(request.broker_name, required=True)
        wanted = conv.broker_id(request.broker_id) if request.HasField("broker_id") else None
        held = held_from_proto(request.held) if request.HasField("held") else None
        snapshot = self._replica(name, wanted).replica_metadata()  # one consistent state, taken on the loop
        # encoded in a thread (frozen tables): a million offset keys would hold the loop for a second
        return await asyncio.to_thread(replica_metadata_to_proto, snapshot, held)

    @_rpc
    async def WriteConsumerOffsets(self, request: pb.AdminWriteConsumerOffsetsRequest) -> pb.AdminWriteConsumerOffsetsResponse:
        write = conv.offset_write_from_proto(request)
        broker = self._replica(write.broker_name, write.broker_id)
        if broker.role != "MASTER":
            raise AdminRefused(grpc.StatusCode.FAILED_PRECONDITION, "BROKER_IS_SLAVE",
                               f"{broker.name} broker id {broker.broker_id} is a slave; write offsets on its master "
                               f"(slaves adopt the master's offset table by metadata sync)")
        decision = await broker.write_consumer_offsets(write.expected, write.offsets)
        if isinstance(decision, Refused):
            raise AdminRefused(_WRITE_REFUSAL_CODES[decision.reason], decision.reason.value, decision.detail)
        reply = pb.AdminWriteConsumerOffsetsResponse(broker_name=broker.name, broker_id=broker.broker_id)
        if isinstance(decision, Moved):
            reply.written, reply.detail = False, decision.describe()
            reply.data_version.CopyFrom(conv.data_version_to_proto(decision.current))
            return reply
        reply.written = True
        reply.data_version.CopyFrom(conv.data_version_to_proto(decision.data_version))
        reply.offsets.extend(conv.queue_offset_to_proto(item) for item in decision.offsets)
        log.info("admin: wrote %d consumer offsets of %s-%d, dataVersion now %s", len(decision.offsets),
                 broker.name, broker.broker_id, decision.data_version.to_json())
        return reply

    def _replica(self, name: str, broker_id: int | None) -> BrokerAdminApi:
        if broker_id is None:
            return self._select(name)[0]
        broker = next((b for b in self.container.brokers().values() if b.name == name and b.broker_id == broker_id), None)
        if broker is None:
            raise BrokerNotExistError(f"Broker not exist: {name} with brokerId {broker_id}")
        return broker

    # ---- mqadmin's everyday operations ----

    @_rpc
    async def ResetOffset(self, request: pb.AdminResetOffsetRequest) -> pb.AdminResetOffsetResponse:
        reset = ops.reset_from_proto(request)
        broker = self._masters(reset.broker_name)[0]
        rows = await broker.reset_consumer_offsets(reset.group, reset.topic, reset.timestamp_ms)
        return ops.resets_to_proto(broker.name, broker.broker_id, rows)

    @_rpc
    async def QueryMessage(self, request: pb.AdminQueryMessageRequest) -> pb.AdminQueryMessageResponse:
        query = ops.query_from_proto(request)
        reply = pb.AdminQueryMessageResponse()
        for broker in self._select(query.broker_name):
            try:
                result = await broker.query_messages(query.topic, query.match, query.max_scan, query.max_results)
            except RequestRejected as rejected:
                if rejected.code is not Code.TOPIC_NOT_FOUND or query.broker_name:
                    raise
                continue  # another hosted broker may have the topic
            reply.messages.extend(ops.message_to_proto(broker.name, broker.broker_id, m, query.max_body_bytes)
                                  for m in result.messages)
            reply.scanned += result.scanned
            reply.truncated = reply.truncated or result.truncated
        return reply

    @_rpc
    async def ClientConnections(self, request: pb.AdminClientConnectionsRequest) -> pb.AdminClientConnectionsResponse:
        group, topic, client_type = ops.client_filter_from_proto(request)
        return pb.AdminClientConnectionsResponse(clients=[
            pb.AdminClientConnection(client_id=c.client_id, client_type=c.client_type, group=c.group, topics=sorted(c.topics),
                                     idle_ms=c.idle_ms, telemetry_streams=c.streams)
            for c in self.container.clients() if (not group or c.group == group) and (not topic or topic in c.topics)
            and (not client_type or c.client_type == client_type)])

    @_rpc
    async def GetBrokerConfig(self, request: pb.AdminGetBrokerConfigRequest) -> pb.AdminGetBrokerConfigResponse:
        name = conv.broker_name(request.broker_name, required=True)
        broker = self._replica(name, conv.broker_id(request.broker_id) if request.HasField("broker_id") else None)
        source, entries = self.container.broker_config(broker.name, broker.broker_id)
        return pb.AdminGetBrokerConfigResponse(broker_name=broker.name, broker_id=broker.broker_id, source=source,
                                               entries=ops.config_entries_to_proto(entries))

    @_rpc
    async def UpdateBrokerConfig(self, request: pb.AdminUpdateBrokerConfigRequest) -> pb.AdminUpdateBrokerConfigResponse:
        name = conv.broker_name(request.broker_name, required=True)
        changes = ops.config_changes_from_proto(request.values)
        broker = self._replica(name, conv.broker_id(request.broker_id) if request.HasField("broker_id") else None)
        entries = self.container.update_broker_config(broker.name, broker.broker_id, changes)
        log.info("admin: live config of %s-%d changed: %s", broker.name, broker.broker_id, changes)
        return pb.AdminUpdateBrokerConfigResponse(broker_name=broker.name, broker_id=broker.broker_id,
                                                  entries=ops.config_entries_to_proto(entries))

    # ---- brokers ----

    @_rpc
    async def AddBroker(self, request: pb.AdminAddBrokerRequest) -> pb.AdminAddBrokerResponse:
        refused = check_config_path(request.config_path)
        if refused is None and self.load_config is not None:
            try:
                values = self.load_config(request.config_path)
            except (ConfigError, OSError) as exc:
                log.warning("admin: addBroker cannot read %s: %s", request.config_path, exc)
                values = {}
            hosted = [(b.cluster, b.name, b.broker_id) for b in self.container.brokers().values()]
            checked = check_new_broker(values, hosted)
            refused = checked if isinstance(checked, AddBrokerRefused) else None
        if refused is not None:
            raise AdminRefused(grpc.StatusCode.FAILED_PRECONDITION, refused.reason.value, refused.message)
        return pb.AdminAddBrokerResponse(canonical_name=await self.container.add_broker(request.config_path))

    @_rpc
    async def RemoveBroker(self, request: pb.AdminRemoveBrokerRequest) -> pb.AdminRemoveBrokerResponse:
        cluster = conv.broker_name(request.cluster, required=True, field="cluster")
        name = conv.broker_name(request.broker_name, required=True)
        await self.container.remove_broker(cluster, name, conv.broker_id(request.broker_id))
        return pb.AdminRemoveBrokerResponse()


def add_admin_service(server: grpc.aio.Server, container: ContainerAdminApi, *,
                      on_topics_changed: TopicsChanged | None = None, load_config: ConfigLoader | None = None) -> None:
    """Mount the BrokerAdmin service; ``load_config`` (path -> keys) enables section 1.3's file checks."""
    pb_grpc.add_BrokerAdminServicer_to_server(BrokerAdminServicer(container, on_topics_changed, load_config), server)
