"""``GetReplicaMetadata`` on the wire: a broker's :class:`ReplicaMetadata` <-> protobuf.

Rules:
- Each table travels as its config-file text (RocketMQ's fastjson dialect, compact JSON for
  the timer checkpoint, RelayMQ's own; the file's ``dataVersion`` inside) plus the same DataVersion as a field, so tools can read versions
  without parsing documents.
- The topic and subscription-group tables and the timer checkpoint are immutable values,
  replaced on every change (the timer's only when a new checkpoint is taken,
  ``TimerService.shared_checkpoint``): the text of the last ones served is kept and served
  again while they are the same objects.  Every slave asks every ``slaveSynchronizePeriod``
  (10 s), and writing a topics.json of 10,000 topics took the master's loop 90 ms each time,
  a checkpoint of 1,000,000 delayed messages 102 ms.
- A reply is a peer's input: :func:`replica_metadata_from_proto` validates every field and
  document and raises :class:`BadReplicaReply` naming the item; nothing else escapes.  A
  document whose DataVersion differs from its field is refused (never guess which is right).
- An asker may name the DataVersions it holds (``held``: a slave's sync every 10 s); a table
  at that very version comes back ``unchanged``, without its document, and the asker keeps
  its own.  One DataVersion names one table, so nothing is lost; what is saved is the text
  and its parse: a slave parsed a checkpoint of 1,000,000 delayed messages in 768 ms of its
  CPU on every sync, changed or not.  An ``unchanged`` item the asker did not hold at that
  version is refused.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

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
from scheduler.timer_text import LISTS, OBJECT, with_pending_text
from services.admin.converters import MAX_BROKER_ID, data_version_to_proto

T = TypeVar("T")
ROLES = ("MASTER", "SLAVE")


class BadReplicaReply(ValueError):
    """A GetReplicaMetadata reply is malformed; the message names the item and the reason."""


def _document(text: str, version: DataVersion) -> pb.AdminReplicaDocument:
    return pb.AdminReplicaDocument(document=text, data_version=data_version_to_proto(version))


# ReplicaMetadata.versions()'s item names -> the reply's (and AdminReplicaVersions') field names
FIELDS = {"topics": "topics", "groups": "subscription_groups", "offsets": "consumer_offsets",
          "timer_checkpoint": "timer_checkpoint"}


def held_to_proto(versions: Mapping[str, DataVersion]) -> pb.AdminReplicaVersions:
    return pb.AdminReplicaVersions(**{FIELDS[item]: data_version_to_proto(v) for item, v in versions.items()})


def held_from_proto(held: pb.AdminReplicaVersions) -> dict[str, DataVersion]:
    return {item: _version_of(getattr(held, name)) for item, name in FIELDS.items() if held.HasField(name)}


def replica_metadata_to_proto(metadata: ReplicaMetadata,
                              held: Mapping[str, DataVersion] | None = None) -> pb.AdminGetReplicaMetadataResponse:
    timer = metadata.timer_checkpoint
    form = OBJECT if held is None else LISTS  # an asker that names what it holds reads both (scheduler.timer_text)
    # RelayMQ's own document, compact JSON as its file is (services.broker.config_files): in the
    # dialect a checkpoint of 1,000,000 delayed messages took the master's loop 825 ms per sync
    texts = {"topics": lambda: _text_of(metadata.topics), "groups": lambda: _text_of(metadata.groups),
             "offsets": lambda: fastjson.dumps(metadata.offsets.to_document()),
             "timer_checkpoint": lambda: _kept_text(timer, lambda: orjson.dumps(
                 with_pending_text(timer, form, dataVersion=timer.data_version.to_json()),
                 option=orjson.OPT_NON_STR_KEYS).decode(), form)}
    documents = {}
    for item, version in metadata.versions().items():
        if held is not None and held.get(item) == version:
            documents[FIELDS[item]] = pb.AdminReplicaDocument(data_version=data_version_to_proto(version), unchanged=True)
        else:
            documents[FIELDS[item]] = _document(texts[item](), version)
    return pb.AdminGetReplicaMetadataResponse(broker_name=metadata.broker_name, broker_id=metadata.broker_id,
                                              role=metadata.role, **documents)


_TEXTS: dict[tuple[int, str], tuple[Any, str]] = {}  # (id(value), form) -> (the value, its text); the value held


def _text_of(table: TopicTable | SubscriptionGroupTable) -> str:
    """``table``'s config-file text, written once per table object."""
    return _kept_text(table, lambda: fastjson.dumps(table.file_document()))


def _kept_text(value: Any, write: Callable[[], str], form: str = "") -> str:
    """``write()``, once per (immutable) ``value`` object and ``form`` while among the last 64 served."""
    kept = _TEXTS.get((id(value), form))
    if kept is not None and kept[0] is value:
        return kept[1]
    text = write()
    if len(_TEXTS) >= 64:
        _TEXTS.clear()
    _TEXTS[(id(value), form)] = (value, text)
    return text


def _version_of(message: pb.AdminDataVersion) -> DataVersion:
    return DataVersion(message.state_version, message.timestamp_ms, message.counter)


def _parse(item: str, field: pb.AdminReplicaDocument, parse: Callable[[Any], T], version_of: Callable[[T], DataVersion],
           held: T | None = None) -> T:
    if field.unchanged:
        if held is None or version_of(held) != _version_of(field.data_version) or field.document:
            raise BadReplicaReply(f"{item}: unchanged at {_version_of(field.data_version)}, which is not the version "
                                  f"asked about" + (" (and it carries a document)" if field.document else ""))
        return held
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
    if index.scan_offset < 0 or index.op_offset < 0 or (index.pending and (min(index.pending) < 0 or min(index.pending.values()) < 0)):
        raise ValueError("offsets and due times must not be negative")
    return VersionedDocument(DataVersion.from_json(document.get("dataVersion", {})), index.to_document())


def replica_metadata_from_proto(reply: pb.AdminGetReplicaMetadataResponse, held: ReplicaMetadata | None = None) -> ReplicaMetadata:
    """The reply's metadata; an ``unchanged`` table is ``held``'s (what the request named)."""
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
        topics=_parse("topics", reply.topics, TopicTable.from_document, lambda t: t.data_version,
                      held and held.topics),
        groups=_parse("subscription_groups", reply.subscription_groups, SubscriptionGroupTable.from_document,
                      lambda g: g.data_version, held and held.groups),
        offsets=_parse("consumer_offsets", reply.consumer_offsets, parse_offsets, lambda o: o.data_version,
                       held and held.offsets),
        timer_checkpoint=_parse("timer_checkpoint", reply.timer_checkpoint, _timer_checkpoint, lambda c: c.data_version,
                                held and held.timer_checkpoint))
