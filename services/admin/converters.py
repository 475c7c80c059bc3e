"""Protobuf <-> admin values, validating every request field at the edge.

Rules:
- A bad field raises :class:`BadAdminRequest` naming it (``INVALID_ARGUMENT``); nothing else
  escapes on any protobuf input (fuzzed by ``tests/unit/test_admin_converters.py``).
- Topic and group changes are merged onto the broker's current config, so fields a request
  does not carry keep their values.
- An offset write is checked whole here (names, required expected DataVersion, non-negative
  queue ids and offsets, 1 to ``MAX_OFFSET_WRITE_ENTRIES`` entries, no queue twice); what
  needs the broker's state (topic, queue count, max and committed offsets) is decided by
  ``metadata.offset_write``.
"""
from __future__ import annotations

from dataclasses import dataclass

from metadata.data_version import DataVersion
from metadata.names import is_valid_group_name, is_valid_topic_name
from metadata.offset_write import QueueOffset
from metadata.subscription_group import GroupConfigError, SubscriptionGroupConfig
from metadata.topic_config import TopicConfig, TopicConfigError
from proto import admin_pb2 as pb
from services.broker.admin_api import QueueProgress, QueueStatus

MAX_BROKER_ID = (1 << 31) - 1
# entries of one WriteConsumerOffsets: 100000 of the longest names fit in the internal
# endpoint's 64 MiB messages (services/ha/converters.MAX_FRAME_BYTES)
MAX_OFFSET_WRITE_ENTRIES = 100_000


class BadAdminRequest(ValueError):
    """A request field is malformed; the message names the field and the reason."""


def broker_name(value: str, required: bool = False, field: str = "broker_name") -> str:
    if not value and not required:
        return ""
    if not is_valid_topic_name(value):
        raise BadAdminRequest(f"{field}: {value!r} must match [%|a-zA-Z0-9_-]+ (1 to 127 characters)")
    return value


def topic_name(value: str) -> str:
    if not is_valid_topic_name(value):
        raise BadAdminRequest(f"topic: {value!r} must match [%|a-zA-Z0-9_-]+ (1 to 127 characters)")
    return value


def group_name(value: str) -> str:
    if not is_valid_group_name(value):
        raise BadAdminRequest(f"group: {value!r} must match [%|a-zA-Z0-9_-]+ (1 to 255 characters)")
    return value


def broker_id(value: int) -> int:
    if not 0 <= value <= MAX_BROKER_ID:
        raise BadAdminRequest(f"broker_id: {value} must be between 0 and {MAX_BROKER_ID}")
    return value


def topic_from_proto(message: pb.AdminTopic, current: TopicConfig | None) -> TopicConfig:
    topic_name(message.topic)
    message_type = message.message_type or (current.message_type if current else "NORMAL")
    base = current if current is not None else TopicConfig(message.topic)
    config = base.with_changes(read_queue_nums=message.read_queue_nums, write_queue_nums=message.write_queue_nums,
                               perm=message.perm, message_type=message_type, order=message_type == "FIFO")
    try:
        return config.validate()
    except TopicConfigError as exc:
        raise BadAdminRequest(f"topic: {exc}") from None


def topic_to_proto(config: TopicConfig) -> pb.AdminTopic:
    return pb.AdminTopic(topic=config.topic_name, read_queue_nums=config.read_queue_nums,
                         write_queue_nums=config.write_queue_nums, perm=config.perm, message_type=config.message_type)


def group_from_proto(message: pb.AdminGroup, current: SubscriptionGroupConfig | None) -> SubscriptionGroupConfig:
    group_name(message.group)
    base = current if current is not None else SubscriptionGroupConfig(message.group)
    changes: dict = {"consume_message_orderly": message.consume_message_orderly}
    if message.HasField("retry_max_times"):
        changes["retry_max_times"] = message.retry_max_times
    if message.HasField("consume_enable"):
        changes["consume_enable"] = message.consume_enable
    try:
        return base.with_changes(**changes).validate()
    except GroupConfigError as exc:
        raise BadAdminRequest(f"group: {exc}") from None


def group_to_proto(config: SubscriptionGroupConfig) -> pb.AdminGroup:
    return pb.AdminGroup(group=config.group_name, consume_message_orderly=config.consume_message_orderly,
                         retry_max_times=config.retry_max_times, consume_enable=config.consume_enable)


def data_version_to_proto(version: DataVersion) -> pb.AdminDataVersion:
    return pb.AdminDataVersion(state_version=version.state_version, timestamp_ms=version.timestamp_ms,
                               counter=version.counter)


def queue_status_to_proto(status: QueueStatus) -> pb.AdminQueueStatus:
    return pb.AdminQueueStatus(queue_id=status.queue_id, min_offset=status.min_offset, max_offset=status.max_offset,
                               last_update_ms=status.last_update_ms)


def progress_to_proto(progress: QueueProgress) -> pb.AdminQueueProgress:
    return pb.AdminQueueProgress(topic=progress.topic, queue_id=progress.queue_id,
                                 broker_offset=progress.broker_offset, consumer_offset=progress.consumer_offset,
                                 inflight=progress.inflight, lag=progress.lag)


@dataclass(frozen=True)
class OffsetWrite:
    broker_name: str
    broker_id: int | None  # None: the hosted broker of that name
    expected: DataVersion
    offsets: tuple[QueueOffset, ...]


def data_version_from_proto(message: pb.AdminDataVersion, field: str) -> DataVersion:
    for name in ("state_version", "timestamp_ms", "counter"):
        if getattr(message, name) < 0:
            raise BadAdminRequest(f"{field}.{name}: {getattr(message, name)} must not be negative")
    return DataVersion(message.state_version, message.timestamp_ms, message.counter)


def queue_offset_from_proto(message: pb.AdminQueueOffset, index: int) -> QueueOffset:
    where = f"offsets[{index}]"
    if not is_valid_topic_name(message.topic):
        raise BadAdminRequest(f"{where}.topic: {message.topic!r} must match [%|a-zA-Z0-9_-]+ (1 to 127 characters)")
    if not is_valid_group_name(message.group):
        raise BadAdminRequest(f"{where}.group: {message.group!r} must match [%|a-zA-Z0-9_-]+ (1 to 255 characters)")
    if message.queue_id < 0:
        raise BadAdminRequest(f"{where}.queue_id: {message.queue_id} must not be negative")
    if message.offset < 0:
        raise BadAdminRequest(f"{where}.offset: {message.offset} must not be negative")
    return QueueOffset(message.topic, message.group, message.queue_id, message.offset)


def offset_write_from_proto(request: pb.AdminWriteConsumerOffsetsRequest) -> OffsetWrite:
    name = broker_name(request.broker_name, required=True)
    wanted = broker_id(request.broker_id) if request.HasField("broker_id") else None
    if not request.HasField("expected_data_version"):
        raise BadAdminRequest("expected_data_version: required (the DataVersion the offsets were planned against)")
    expected = data_version_from_proto(request.expected_data_version, "expected_data_version")
    if not 1 <= len(request.offsets) <= MAX_OFFSET_WRITE_ENTRIES:
        raise BadAdminRequest(f"offsets: {len(request.offsets)} entries, expected 1 to {MAX_OFFSET_WRITE_ENTRIES}")
    offsets = tuple(queue_offset_from_proto(message, index) for index, message in enumerate(request.offsets))
    seen: set[tuple[str, str, int]] = set()
    for index, item in enumerate(offsets):
        if item.ref in seen:
            raise BadAdminRequest(f"offsets[{index}]: {item.describe()} is given twice")
        seen.add(item.ref)
    return OffsetWrite(name, wanted, expected, offsets)


def queue_offset_to_proto(item: QueueOffset) -> pb.AdminQueueOffset:
    return pb.AdminQueueOffset(topic=item.topic, group=item.group, queue_id=item.queue_id, offset=item.offset)
