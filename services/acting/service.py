"""The ActingService a container serves on its internal port (``proto/acting.proto``).

Rules:
- Each request names one hosted broker (by name, and by id where a container may host
  several members of one group); an unknown one is NOT_FOUND ``BROKER_NOT_EXIST``.
- ``NotifyMinBrokerId`` (from a nameserver): the broker records the group's new smallest id
  and re-decides its special services.
- ``HandOver`` (from a returning master, pre-online's pull): the member stops acting, then
  answers with its versioned special state.
- ``OfferMaster`` (from a returning master in pre-online): the slave member connects its
  replication to that master when the nameserver names none; a member that is not a slave is
  FAILED_PRECONDITION ``NOT_A_SLAVE``.
- ``EscapePut`` (from another group's acting slave): only a writable master stores it;
  messages are checked here (topic names, kinds, sizes), refusals carry a named reason.
- ``LockQueues`` (lockInStrictMode): grants or releases FIFO queue leases for the holder.
- Exceptions become gRPC statuses in exactly one place, :func:`_status_of`.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any, Callable, Protocol, Sequence

import grpc

from ha.acting.escape_target import EscapeKind
from metadata.message import MessageDraft
from metadata.names import is_valid_group_name, is_valid_topic_name
from metadata.status import RequestRejected
from proto import acting_pb2 as pb
from proto import acting_pb2_grpc as pb_grpc
from scheduler.pop.records import QueueKey
from services.acting.escape import EscapedItem
from services.acting.handover import hand_over_to_proto
from services.broker.acting_mode import hand_over

log = logging.getLogger(__name__)
MAX_ESCAPED_PER_CALL = 4096
MAX_KEY_LENGTH = 1024


class BadActingRequest(ValueError):
    """A field is malformed; the message names it."""


class UnknownBroker(LookupError):
    pass


class NotASlave(Exception):
    """OfferMaster to a member that is not a slave."""


class ActingContainer(Protocol):
    def acting_broker(self, broker_name: str, broker_id: int | None):  # -> (Broker, MemberWatch | None)
        ...

    def offer_master(self, broker_name: str, broker_id: int, master_address: str) -> str | None:
        ...


def _status_of(exc: Exception) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, BadActingRequest):
        return grpc.StatusCode.INVALID_ARGUMENT, f"BAD_REQUEST: {exc}"
    if isinstance(exc, UnknownBroker):
        return grpc.StatusCode.NOT_FOUND, f"BROKER_NOT_EXIST: {exc}"
    if isinstance(exc, NotASlave):
        return grpc.StatusCode.FAILED_PRECONDITION, f"NOT_A_SLAVE: {exc}"
    if isinstance(exc, RequestRejected):
        return grpc.StatusCode.FAILED_PRECONDITION, f"{exc.code.name}: {exc.message}"
    log.exception("acting service: internal error")
    return grpc.StatusCode.INTERNAL, f"INTERNAL: {type(exc).__name__}"


def _rpc(method: Callable) -> Callable:
    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await method(self, request)
        except Exception as exc:  # converted in one place
            code, details = _status_of(exc)
            await context.abort(code, details)
    return wrapper


def _name(value: str, field: str) -> str:
    if not is_valid_topic_name(value):
        raise BadActingRequest(f"{field}: {value[:130]!r} must match [%|a-zA-Z0-9_-]+ (1 to 127 characters)")
    return value


def escaped_items(request: pb.ActingEscapePutRequest) -> list[EscapedItem]:
    if not 0 < len(request.messages) <= MAX_ESCAPED_PER_CALL:
        raise BadActingRequest(f"messages: {len(request.messages)} given, 1 to {MAX_ESCAPED_PER_CALL} allowed")
    items = []
    for index, message in enumerate(request.messages):
        where = f"messages[{index}]"
        _name(message.topic, f"{where}.topic")
        try:
            kind = EscapeKind(message.kind)
        except ValueError:
            raise BadActingRequest(f"{where}.kind: {message.kind[:50]!r} is not one of "
                                   f"{', '.join(k.value for k in EscapeKind)}") from None
        if not message.escape_key or len(message.escape_key) > MAX_KEY_LENGTH:
            raise BadActingRequest(f"{where}.escape_key: 1 to {MAX_KEY_LENGTH} characters")
        if message.queue_id < 0:
            raise BadActingRequest(f"{where}.queue_id: {message.queue_id} is negative")
        draft = MessageDraft(message.topic, message.queue_id, bytes(message.body), message.born_timestamp_ms,
                             message.born_host, dict(message.properties), dict(message.user_properties))
        items.append(EscapedItem(message.escape_key, kind, draft))
    return items


def queue_keys(queues: Sequence[pb.ActingQueueKey]) -> list[QueueKey]:
    keys = []
    for index, queue in enumerate(queues):
        if not is_valid_group_name(queue.group):
            raise BadActingRequest(f"queues[{index}].group: {queue.group[:260]!r} is not a group name")
        _name(queue.topic, f"queues[{index}].topic")
        if queue.queue_id < 0:
            raise BadActingRequest(f"queues[{index}].queue_id: {queue.queue_id} is negative")
        keys.append(QueueKey(queue.group, queue.topic, queue.queue_id))
    return keys


class ActingServicer(pb_grpc.ActingServiceServicer):
    def __init__(self, container: ActingContainer):
        self.container = container

    def _broker(self, name: str, broker_id: int | None):
        found = self.container.acting_broker(_name(name, "broker_name"), broker_id)
        if found is None:
            raise UnknownBroker(f"{name}" + (f" with id {broker_id}" if broker_id is not None else "") + " is not hosted here")
        return found

    @_rpc
    async def NotifyMinBrokerId(self, request):
        if request.min_broker_id < 0:
            raise BadActingRequest(f"min_broker_id: {request.min_broker_id} is negative")
        broker, watch = self._broker(request.broker_name, request.broker_id)
        if watch is not None:
            await watch.notified(request.min_broker_id, request.offline_broker_address)
        return pb.ActingNotifyMinBrokerIdResponse()

    @_rpc
    async def HandOver(self, request):
        broker, _ = self._broker(request.broker_name, request.broker_id)
        state = await hand_over(broker)
        return await asyncio.to_thread(hand_over_to_proto, state)  # fresh documents: encoded off the loop

    @_rpc
    async def OfferMaster(self, request):
        name = _name(request.broker_name, "broker_name")
        if request.broker_id <= 0:
            raise BadActingRequest(f"broker_id: {request.broker_id} is not a slave's id (> 0)")
        if request.master_broker_id < 0:
            raise BadActingRequest(f"master_broker_id: {request.master_broker_id} is negative")
        host, _, port = request.master_address.rpartition(":")
        if not host or len(request.master_address) > 300 or not port.isdigit() or not 0 < int(port) < 65536:
            raise BadActingRequest(f"master_address: {request.master_address[:300]!r} is not host:port")
        state = self.container.offer_master(name, request.broker_id, request.master_address)
        if state is None:
            raise UnknownBroker(f"{name} with id {request.broker_id} is not hosted here")
        return pb.ActingOfferMasterResponse(replication_state=state)

    @_rpc
    async def EscapePut(self, request):
        items = escaped_items(request)
        broker, _ = self._broker(request.broker_name, None)
        places = await broker.escape_put(items)
        return pb.ActingEscapePutResponse(places=[pb.ActingEscapedPlace(topic=p.topic, queue_id=p.queue_id,
                                                                        queue_offset=p.queue_offset) for p in places])

    @_rpc
    async def LockQueues(self, request):
        keys = queue_keys(request.queues)
        if request.lease_ms <= 0 or request.lease_ms > 600_000:
            raise BadActingRequest(f"lease_ms: {request.lease_ms} is not between 1 and 600000")
        broker, _ = self._broker(request.broker_name, request.broker_id)
        if request.unlock:
            broker.fifo_locks.release(keys, request.holder_id)
            return pb.ActingLockQueuesResponse()
        granted = broker.fifo_locks.grant(keys, request.holder_id, request.lease_ms)
        return pb.ActingLockQueuesResponse(granted=[pb.ActingQueueKey(group=k.group, topic=k.topic, queue_id=k.queue_id)
                                                    for k in granted])
