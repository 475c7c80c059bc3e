"""Messages as the broker and the store see them.

A :class:`SendItem` is a message a client sent, by its fields, before the broker chose its
queue.  A :class:`MessageDraft` is what the broker asks the store to append; the store returns a
:class:`StoredMessage`, the same content plus its place (commit-log offset, queue offset,
store time, size on disk).  Both are frozen.

Hot paths (a send, a receive: tens of thousands of messages a second) build these values
with :meth:`MessageDraft.trusted` and :meth:`StoredMessage.trusted`: the same frozen values,
without the generated ``__init__``'s one ``object.__setattr__`` per field (about 3x faster).

System properties use RocketMQ's reserved key names (:class:`Prop`) so that a record's
meaning is the same as upstream's; user properties live in their own map so a user key can
never shadow a system one.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Mapping, NamedTuple


class MessageType(str, Enum):
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"


class Prop:
    """Reserved system property keys (RocketMQ's names)."""

    TAG = "TAGS"
    KEYS = "KEYS"  # space separated, as upstream
    MESSAGE_ID = "UNIQ_KEY"
    MESSAGE_TYPE = "MSG_TYPE"
    MESSAGE_GROUP = "__SHARDINGKEY"
    DELIVERY_TIME_MS = "__STARTDELIVERTIME"
    RECONSUME_TIMES = "RECONSUME_TIME"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_ID = "__transactionId__"
    TRANSACTION_PREPARED = "TRAN_MSG"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RETRY_TOPIC = "RETRY_TOPIC"
    DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
    DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
    PRODUCER_GROUP = "PGROUP"
    TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"


_new = object.__new__
_EMPTY: Mapping[str, str] = MappingProxyType({})


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return mapping if isinstance(mapping, MappingProxyType) else MappingProxyType(dict(mapping))


def tag_hash(tag: str | None) -> int:
    """The 64-bit tag code kept in consume-queue entries (0 for no tag)."""
    if not tag:
        return 0
    return zlib.crc32(tag.encode("utf-8"))


@dataclass(frozen=True)
class MessageDraft:
    topic: str
    queue_id: int
    body: bytes
    born_timestamp_ms: int
    born_host: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)
    user_properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", _frozen(self.properties))
        object.__setattr__(self, "user_properties", _frozen(self.user_properties))

    @classmethod
    def trusted(cls, topic: str, queue_id: int, body: bytes, born_timestamp_ms: int, born_host: str,
                properties: Mapping[str, str], user_properties: Mapping[str, str]) -> "MessageDraft":
        """The constructor's value (mappings frozen the same way), built without ``__init__``."""
        draft = _new(cls)
        draft.__dict__.update(topic=topic, queue_id=queue_id, body=body, born_timestamp_ms=born_timestamp_ms,
                              born_host=born_host, properties=_frozen(properties),
                              user_properties=_frozen(user_properties))
        return draft

    @classmethod
    def owned(cls, topic: str, queue_id: int, body: bytes, born_timestamp_ms: int, born_host: str,
              properties: dict[str, str], user_properties: dict[str, str]) -> "MessageDraft":
        """:meth:`trusted` for mappings made for this draft alone (a request's decoded fields, a
        record's): they are wrapped read-only, not copied first (two dict copies a message).  The
        caller keeps no other reference to them."""
        draft = _new(cls)
        draft.__dict__.update(topic=topic, queue_id=queue_id, body=body, born_timestamp_ms=born_timestamp_ms,
                              born_host=born_host, properties=MappingProxyType(properties) if properties else _EMPTY,
                              user_properties=MappingProxyType(user_properties) if user_properties else _EMPTY)
        return draft

    def placed(self, queue_id: int) -> "MessageDraft":
        """This draft for queue ``queue_id``; its frozen mappings are shared, not copied again."""
        draft = _new(type(self))
        draft.__dict__.update(self.__dict__, queue_id=queue_id)
        return draft

    @property
    def tag(self) -> str | None:
        return self.properties.get(Prop.TAG)

    @property
    def message_id(self) -> str:
        return self.properties.get(Prop.MESSAGE_ID, "")

    def with_changes(self, **changes) -> "MessageDraft":
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        values.update(changes)
        return MessageDraft(**values)


class _FromDraft:
    """A :class:`StoredMessage` accessor of its draft's field of the same name.  A non-data
    descriptor: the value is kept in the instance's ``__dict__`` (put there by
    :meth:`StoredMessage.trusted`, else on first use), where later reads find it without a
    call.  A receive reads each message's topic, properties and tag several times; as
    properties, each read was two Python calls."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = getattr(instance.draft, self.name)
        instance.__dict__[self.name] = value  # the draft is frozen: the value never changes
        return value


@dataclass(frozen=True)
class StoredMessage:
    draft: MessageDraft
    commit_offset: int  # physical offset of the record in the commit log
    size: int  # bytes of the record on disk
    queue_offset: int  # logical offset in (topic, queue_id)
    store_timestamp_ms: int

    @classmethod
    def trusted(cls, draft: MessageDraft, commit_offset: int, size: int, queue_offset: int,
                store_timestamp_ms: int) -> "StoredMessage":
        """The constructor's value, built without ``__init__``; the draft's fields are kept
        alongside (:class:`_FromDraft`)."""
        stored = _new(cls)
        values = draft.__dict__
        stored.__dict__.update(draft=draft, commit_offset=commit_offset, size=size, queue_offset=queue_offset,
                               store_timestamp_ms=store_timestamp_ms, topic=values["topic"],
                               queue_id=values["queue_id"], body=values["body"], properties=values["properties"],
                               user_properties=values["user_properties"])
        return stored

    # the draft's fields, read as the message's own (not dataclass fields: no annotations)
    topic = _FromDraft()
    queue_id = _FromDraft()
    body = _FromDraft()
    properties = _FromDraft()
    user_properties = _FromDraft()
    tag = _FromDraft()
    message_id = _FromDraft()

    @property
    def next_commit_offset(self) -> int:
        return self.commit_offset + self.size


_SEND_PROPERTIES = frozenset((Prop.MESSAGE_ID, Prop.TAG, Prop.KEYS, Prop.MESSAGE_TYPE, Prop.MESSAGE_GROUP,
                              Prop.DELIVERY_TIME_MS))


class SendItem(NamedTuple):
    """One message to send, by its fields; the broker chooses the queue.

    A named tuple made in C (``tuple.__new__``) by the converter, not a draft: a batch's
    messages became a draft, a properties dict and an item each, and the store encoded the
    dict again (``bench/send_path.py --batch 32``: about 2 us a message of 15).  The plain
    send path encodes the record's properties section from these fields directly
    (``store.record.encode_item_tail``); :attr:`draft` is the same message as a
    draft for the paths that keep one (DELAY, TRANSACTION, tests).
    """

    topic: str
    body: bytes
    born_timestamp_ms: int
    born_host: str
    message_id: str  # "" for none
    tag: str | None
    keys: str | None  # space separated, as upstream's KEYS property
    message_type: MessageType
    message_group: str | None = None  # FIFO
    delivery_timestamp_ms: int | None = None  # DELAY
    user_properties: Mapping[str, str] = _EMPTY
    producer_client_id: str = ""
    other_properties: Mapping[str, str] = _EMPTY  # system properties besides the ones above

    @classmethod
    def of(cls, draft: MessageDraft, message_type: MessageType, message_group: str | None = None,
           delivery_timestamp_ms: int | None = None, producer_client_id: str = "") -> "SendItem":
        """``draft`` (its queue ignored) sent as ``message_type``; its type, group and delivery
        time properties are the item's own, its other properties are kept."""
        properties = draft.properties
        other = {key: value for key, value in properties.items() if key not in _SEND_PROPERTIES}
        return cls(draft.topic, draft.body, draft.born_timestamp_ms, draft.born_host,
                   properties.get(Prop.MESSAGE_ID, ""), properties.get(Prop.TAG) or None,
                   properties.get(Prop.KEYS) or None, message_type, message_group, delivery_timestamp_ms,
                   draft.user_properties, producer_client_id, MappingProxyType(other) if other else _EMPTY)

    def properties(self) -> dict[str, str]:
        """The record's system properties, in the order ``store.record.encode_item_tail`` writes them."""
        properties = {Prop.MESSAGE_ID: self.message_id} if self.message_id else {}
        if self.tag:
            properties[Prop.TAG] = self.tag
        if self.keys:
            properties[Prop.KEYS] = self.keys
        properties[Prop.MESSAGE_TYPE] = self.message_type._value_
        if self.message_group:
            properties[Prop.MESSAGE_GROUP] = self.message_group
        if self.delivery_timestamp_ms is not None:
            properties[Prop.DELIVERY_TIME_MS] = str(self.delivery_timestamp_ms)
        properties.update(self.other_properties)
        return properties

    @property
    def draft(self) -> MessageDraft:
        """This message as a draft for no queue yet (-1)."""
        return MessageDraft.owned(self.topic, -1, self.body, self.born_timestamp_ms, self.born_host,
                                  self.properties(), dict(self.user_properties))
