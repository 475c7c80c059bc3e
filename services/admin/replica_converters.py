"""``GetReplicaMetadata`` on the wire: a broker's :class:`ReplicaMetadata` <-> protobuf.

Rules:
- Each table travels as its config-file text (RocketMQ's fastjson dialect, compact JSON for
  the timer checkpoint, RelayMQ's own; the file's ``dataVersion`` inside) plus the same DataVersion as a field, so tools can read versions
  without parsing documents.
- The topic and subscription-group tables are immutable values, replaced on every change:
  the text of the last ones served is kept and served again while they are the same
  objects.  Every slave asks every ``slaveSynchronizePeriod`` (10 s), and writing a
  topics.json of 10,000 topics took the master's loop 90 ms each time.
- A reply is a peer's input: :func:`replica_metadata_from_proto` validates every field and
  document and raises :class:`BadReplicaReply` naming the item; nothing else escapes.  A
  document whose DataVersion differs from its field is refused (never guess which is right).
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

import orjson

from metadata import fastjson
from metadata.consumer_offsets import parse_document as parse_offsets
from metadata.data_version import DataVersion
from metadata.names import is_valid_topic_name
from metadata.replica_metadata import ReplicaMetadata, VersionedDocument
from metadata.subscription_group import SubscriptionGroupTable
from metadata.topic_config import TopicTable
from proto import admin_pb2 as pb
from scheduler.timer import TimerIndex
from services.admin.converters import MAX_BROKER_ID, data_version_to_proto

T = TypeVar("T")
ROLES = ("MASTER", "SLAVE")


class BadReplicaReply(ValueError):
    """A GetReplicaMetadata reply is malformed; the message names the item and the reason."""


def _document(text: str, version: DataVersion) -> pb.AdminReplicaDocument:
    return pb.AdminReplicaDocument(document=text, data_version=data_version_to_proto(version))


def replica_metadata_to_proto(metadata: ReplicaMetadata) -> pb.AdminGetReplicaMetadataResponse:
    timer = metadata.timer_checkpoint
    # RelayMQ's own document, compact JSON as its file is (services.broker.config_files): in the
    # dialect a checkpoint of 1,000,000 delayed messages took the master's loop 825 ms per sync
    timer_text = orjson.dumps({**timer.document, "dataVersion": timer.data_version.to_json()},
                              option=orjson.OPT_NON_STR_KEYS).decode()
    return pb.AdminGetReplicaMetadataResponse(
        broker_name=metadata.broker_name, broker_id=metadata.broker_id, role=metadata.role,
        topics=_document(_text_of(metadata.topics), metadata.topics.data_version),
        subscription_groups=_document(_text_of(metadata.groups), metadata.groups.data_version),
        consumer_offsets=_document(fastjson.dumps(metadata.offsets.to_document()), metadata.offsets.data_version),
        timer_checkpoint=_document(timer_text, timer.data_version))


_TEXTS: dict[int, tuple[Any, str]] = {}  # id(table) -> (the table, its text); the table held, so its id is its own


def _text_of(table: TopicTable | SubscriptionGroupTable) -> str:
    """``table``'s config-file text, written once per table object."""
    kept = _TEXTS.get(id(table))
    if kept is not None and kept[0] is table:
        return kept[1]
    text = fastjson.dumps(table.file_document())
    if len(_TEXTS) >= 64:
        _TEXTS.clear()
    _TEXTS[id(table)] = (table, text)
    return text


def _version_of(message: pb.AdminDataVersion) -> DataVersion:
    return DataVersion(message.state_version, message.timestamp_ms, message.counter)


def _parse(item: str, field: pb.AdminReplicaDocument, parse: Callable[[Any], T], version_of: Callable[[T], DataVersion]) -> T:
    try:
        value = parse(fastjson.loads(field.document))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # fastjson and the table parsers
        raise BadReplicaReply(f"{item}: {exc}") from None
    if version_of(value) != _version_of(field.data_version):
        raise BadReplicaReply(f"{item}: document dataVersion {version_of(value)} differs from data_version "
                              f"{_version_of(field.data_version)}")
    return value


def _timer_checkpoint(document: Any) -> VersionedDocument:
    index = TimerIndex.from_document(document)
    if index.scan_offset < 0 or index.op_offset < 0 or any(o < 0 or d < 0 for o, d in index.pending.items()):
        raise ValueError("offsets and due times must not be negative")
    return VersionedDocument(DataVersion.from_json(document.get("dataVersion", {})), index.to_document())


def replica_metadata_from_proto(reply: pb.AdminGetReplicaMetadataResponse) -> ReplicaMetadata:
    if not is_valid_topic_name(reply.broker_name):
        raise BadReplicaReply(f"broker_name: {reply.broker_name!r} is not a broker name")
    if not 0 <= reply.broker_id <= MAX_BROKER_ID:
        raise BadReplicaReply(f"broker_id: {reply.broker_id} is out of range")
    if reply.role not in ROLES:
        raise BadReplicaReply(f"role: {reply.role!r} must be MASTER or SLAVE")
    for item in ("topics", "subscription_groups", "consumer_offsets", "timer_checkpoint"):
        if not reply.HasField(item):
            raise BadReplicaReply(f"{item}: missing")
    return ReplicaMetadata(
        broker_name=reply.broker_name, broker_id=reply.broker_id, role=reply.role,
        topics=_parse("topics", reply.topics, TopicTable.from_document, lambda t: t.data_version),
        groups=_parse("subscription_groups", reply.subscription_groups, SubscriptionGroupTable.from_document,
                      lambda g: g.data_version),
        offsets=_parse("consumer_offsets", reply.consumer_offsets, parse_offsets, lambda o: o.data_version),
        timer_checkpoint=_parse("timer_checkpoint", reply.timer_checkpoint, _timer_checkpoint, lambda c: c.data_version))
