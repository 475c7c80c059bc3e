"""Protobuf <-> values of mqadmin's everyday operations (offset reset, message lookup, client
connections, broker config), validating every request field at the edge.

A bad field raises ``BadAdminRequest`` naming the field (INVALID_ARGUMENT), as in
``services.admin.converters``; the limits are here, one place.
"""
from __future__ import annotations

from dataclasses import dataclass

from metadata.message import Prop, StoredMessage
from proto import admin_pb2 as pb
from services.admin.converters import BadAdminRequest, broker_name, group_name, topic_name
from services.broker.message_query import MessageMatch

MAX_SCAN = 1_000_000  # messages one lookup reads per broker at most
DEFAULT_SCAN = 100_000
MAX_RESULTS = 1_000
MAX_BODY_BYTES = 65_536
MAX_MATCH_CHARS = 1024
MAX_CONFIG_CHANGES = 64
CLIENT_TYPES = ("", "PRODUCER", "PUSH_CONSUMER", "SIMPLE_CONSUMER", "PULL_CONSUMER", "CONSUMER")
_SYSTEM_KEYS = frozenset(value for name, value in vars(Prop).items() if name.isupper())


@dataclass(frozen=True)
class ResetOffset:
    broker_name: str
    group: str
    topic: str
    timestamp_ms: int | None  # None: to the max offset


@dataclass(frozen=True)
class MessageQuery:
    broker_name: str
    topic: str
    match: MessageMatch
    max_scan: int
    max_results: int
    max_body_bytes: int


def _printable(value: str, field: str) -> str:
    if not value or len(value) > MAX_MATCH_CHARS or any(ord(c) < 32 for c in value):
        raise BadAdminRequest(f"{field}: must be 1 to {MAX_MATCH_CHARS} characters without control characters")
    return value


def _bounded(value: int, field: str, low: int, high: int, default: int) -> int:
    if value == 0:
        return default
    if not low <= value <= high:
        raise BadAdminRequest(f"{field}: {value} must be between {low} and {high}")
    return value


def reset_from_proto(request: pb.AdminResetOffsetRequest) -> ResetOffset:
    target = request.WhichOneof("target")
    if target is None:
        raise BadAdminRequest("target: give timestamp_ms or to_max_offset")
    if target == "timestamp_ms" and request.timestamp_ms < 0:
        raise BadAdminRequest(f"timestamp_ms: {request.timestamp_ms} must not be negative")
    if target == "to_max_offset" and not request.to_max_offset:
        raise BadAdminRequest("to_max_offset: must be true when given")
    return ResetOffset(broker_name(request.broker_name, required=True), group_name(request.group), topic_name(request.topic),
                       request.timestamp_ms if target == "timestamp_ms" else None)


def resets_to_proto(name: str, broker_id: int, rows: list[tuple[int, int, int]]) -> pb.AdminResetOffsetResponse:
    return pb.AdminResetOffsetResponse(broker_name=name, broker_id=broker_id, queues=[
        pb.AdminQueueReset(queue_id=q, old_offset=old, new_offset=new) for q, old, new in rows])


def query_from_proto(request: pb.AdminQueryMessageRequest) -> MessageQuery:
    which = request.WhichOneof("match")
    if which is None:
        raise BadAdminRequest("match: give message_id or key")
    match = (MessageMatch(message_id=_printable(request.message_id, "message_id")) if which == "message_id"
             else MessageMatch(key=_printable(request.key, "key")))
    if " " in match.key:
        raise BadAdminRequest("key: one key, without spaces (keys are stored space-separated)")
    if request.max_body_bytes < 0 or request.max_body_bytes > MAX_BODY_BYTES:
        raise BadAdminRequest(f"max_body_bytes: {request.max_body_bytes} must be between 0 and {MAX_BODY_BYTES}")
    return MessageQuery(broker_name(request.broker_name), topic_name(request.topic), match,
                        _bounded(request.max_scan, "max_scan", 1, MAX_SCAN, DEFAULT_SCAN),
                        _bounded(request.max_results, "max_results", 1, MAX_RESULTS, 32), request.max_body_bytes)


def message_to_proto(name: str, broker_id: int, message: StoredMessage, max_body_bytes: int) -> pb.AdminMessage:
    properties = message.properties
    return pb.AdminMessage(
        broker_name=name, broker_id=broker_id, topic=message.topic, queue_id=message.queue_id,
        queue_offset=message.queue_offset, commit_offset=message.commit_offset, message_id=message.message_id,
        tag=message.tag or "", keys=properties.get(Prop.KEYS, ""), born_timestamp_ms=message.draft.born_timestamp_ms,
        store_timestamp_ms=message.store_timestamp_ms, born_host=message.draft.born_host, body_size=len(message.body),
        body=bytes(message.body[:max_body_bytes]), properties=dict(properties),
        user_properties=dict(message.user_properties))


def client_filter_from_proto(request: pb.AdminClientConnectionsRequest) -> tuple[str, str, str]:
    if request.client_type not in CLIENT_TYPES:
        raise BadAdminRequest(f"client_type: {request.client_type!r} is not one of {', '.join(t for t in CLIENT_TYPES if t)}")
    group = group_name(request.group) if request.group else ""
    topic = topic_name(request.topic) if request.topic else ""
    return group, topic, request.client_type


def config_changes_from_proto(values) -> dict[str, str]:
    if not values:
        raise BadAdminRequest("values: give at least one key")
    if len(values) > MAX_CONFIG_CHANGES:
        raise BadAdminRequest(f"values: at most {MAX_CONFIG_CHANGES} keys at once")
    for key, value in values.items():
        if not key.isidentifier() or len(key) > 128:
            raise BadAdminRequest(f"values: {key[:128]!r} is not a configuration key")
        if len(value) > 4096 or any(ord(c) < 32 for c in value):
            raise BadAdminRequest(f"values: the value of {key} must be at most 4096 characters without control characters")
    return dict(values)


def config_entries_to_proto(entries: list[tuple[str, str, str, bool]]) -> list[pb.AdminBrokerConfigEntry]:
    return [pb.AdminBrokerConfigEntry(key=k, value=v, unit=u, live=live) for k, v, u, live in entries]
