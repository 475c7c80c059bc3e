"""Protobuf requests -> the broker contract's values, with every edge check.

Rules:
- This is the gateway: everything a client sends is checked here against
  :class:`MessagingConfig` and turned into frozen values of ``services.broker.api``; code
  behind it trusts those values.  Bad input raises :class:`RequestRejected` with the code
  the RocketMQ proxy uses; nothing else may escape (a hypothesis test holds us to it).
- Pure: no clock reads, no I/O.  Callers pass ``now_ms`` (wall) and ``remaining_ms``.
- Receipt handles on the wire are ``<broker name>@<broker handle>`` so an ack, which names
  no broker, reaches the broker that delivered the message.
"""
from __future__ import annotations

import re
import zlib
from types import MappingProxyType
from dataclasses import dataclass

from metadata.frozen_values import quick_init
from metadata.message import MessageType
from metadata.names import is_system_topic, is_valid_group_name, is_valid_topic_name
from metadata.status import Code, RequestRejected
from proto import messaging_definition_pb2 as pb
from services.broker.api import FilterExpression, FilterType, ReceiveRequest, SendItem
from services.messaging.config import MessagingConfig

_TYPES = {pb.NORMAL: MessageType.NORMAL, pb.FIFO: MessageType.FIFO, pb.DELAY: MessageType.DELAY,
          pb.TRANSACTION: MessageType.TRANSACTION}
HANDLE_SEPARATOR = "@"


@dataclass(frozen=True)
class ClientContext:
    client_id: str
    language: str = ""
    version: str = ""
    namespace: str = ""
    access_key: str = ""  # the authenticated access key (checked by the server), "" when not authenticated


@quick_init
@dataclass(frozen=True)
class AckEntry:
    message_id: str
    broker_name: str
    receipt_handle: str  # the broker's own handle, prefix removed


def reject(code: Code, message: str) -> RequestRejected:
    return RequestRejected(code, message)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def has_control_character(text: str) -> bool:
    """Java's ``Character.isISOControl``: U+0000..U+001F and U+007F..U+009F."""
    # printable text has none (they are all in category Cc); most text is, and the C check
    # is a fifth of the regular expression's cost
    return not text.isprintable() and _CONTROL.search(text) is not None


_CLIENT_KEYS = {"x-mq-client-id": 0, "x-mq-language": 1, "x-mq-client-version": 2, "x-mq-namespace": 3}
_CONTEXTS: dict[tuple, ClientContext] = {}  # the contexts of callers seen, checked once (bounded)
_CONTEXTS_MAX = 4096


def client_context(metadata, access_key: str = "") -> ClientContext:
    """The caller's identity from its metadata; ``access_key`` only from a verified signature.
    gRPC gives metadata keys in lower case; a caller's context is checked once and kept (the
    same few clients call thousands of times a second)."""
    values = ["", "", "", ""]
    for key, value in metadata or ():
        slot = _CLIENT_KEYS.get(key)
        if slot is not None and isinstance(value, str):
            values[slot] = value
    found = (*values, access_key)
    known = _CONTEXTS.get(found)
    if known is not None:
        return known
    client_id = values[0].strip()
    if not client_id:
        raise reject(Code.CLIENT_ID_REQUIRED, "x-mq-client-id metadata is required")
    if len(client_id) > 1024 or has_control_character(client_id):
        raise reject(Code.CLIENT_ID_REQUIRED, "x-mq-client-id is malformed")
    context = ClientContext(client_id, values[1], values[2], values[3], access_key)
    if len(_CONTEXTS) >= _CONTEXTS_MAX:
        _CONTEXTS.clear()
    _CONTEXTS[found] = context
    return context


def signature_metadata(metadata) -> tuple[str, str]:
    """``authorization`` and ``x-mq-date-time`` ("" when absent), for ``metadata.authentication``."""
    authorization = date_time = ""
    for key, value in metadata or ():
        if isinstance(value, str):
            lowered = key.lower()
            if lowered == "authorization":
                authorization = value
            elif lowered == "x-mq-date-time":
                date_time = value
    return authorization, date_time


def topic_name(resource, *, allow_system: bool = True) -> str:
    name = resource.name
    if not is_valid_topic_name(name):
        raise reject(Code.ILLEGAL_TOPIC, f"topic {name[:200]!r} must match [%|a-zA-Z0-9_-]+ and be 1..127 characters")
    if not allow_system and is_system_topic(name):
        raise reject(Code.ILLEGAL_TOPIC, f"topic {name!r} is a system topic")
    return name


def group_name(resource) -> str:
    name = resource.name
    if not is_valid_group_name(name):
        raise reject(Code.ILLEGAL_CONSUMER_GROUP, f"group {name[:200]!r} must match [%|a-zA-Z0-9_-]+ and be 1..255 characters")
    return name


def _printable(value: str, limit: int, code: Code, what: str) -> str:
    if not value or len(value) > limit or has_control_character(value) or not value.isascii():
        raise reject(code, f"{what} is missing or malformed")
    return value


def message_id(value: str, config: MessagingConfig) -> str:
    return _printable(value, config.max_message_id_size, Code.ILLEGAL_MESSAGE_ID, "message_id")


def split_receipt_handle(value: str, config: MessagingConfig) -> tuple[str, str]:
    """``<broker>@<handle>`` -> (broker, handle); INVALID_RECEIPT_HANDLE for anything else."""
    _printable(value, config.max_receipt_handle_size, Code.INVALID_RECEIPT_HANDLE, "receipt_handle")
    broker, sep, handle = value.partition(HANDLE_SEPARATOR)
    if not sep or not broker or not handle:
        raise reject(Code.INVALID_RECEIPT_HANDLE, "receipt_handle was not issued by this server")
    return broker, handle


def join_receipt_handle(broker_name: str, handle: str) -> str:
    return f"{broker_name}{HANDLE_SEPARATOR}{handle}"


def duration_ms(duration) -> int:
    return duration.seconds * 1000 + duration.nanos // 1_000_000


def timestamp_ms(timestamp) -> int:
    return timestamp.seconds * 1000 + timestamp.nanos // 1_000_000


# ---------------------------------------------------------------- SendMessage


def send_items(request, config: MessagingConfig, now_ms: int, client_id: str) -> list[SendItem]:
    messages = request.messages
    if not messages:
        raise reject(Code.BAD_REQUEST, "SendMessage carries no message")
    if len(messages) > config.max_send_batch_num:
        raise reject(Code.BAD_REQUEST, f"at most {config.max_send_batch_num} messages per request")
    first_topic = None  # checked once: a message naming the same topic needs no second check
    items = []
    for message in messages:
        item = send_item(message, config, now_ms, client_id, first_topic)
        if first_topic is None:
            first_topic = item.topic
        elif item.topic != first_topic:
            raise reject(Code.ILLEGAL_TOPIC, "all messages of one request must have the same topic")
        items.append(item)
    return items


def send_item(message, config: MessagingConfig, now_ms: int, client_id: str, checked_topic: str | None = None) -> SendItem:
    topic = message.topic.name
    if (topic != checked_topic or checked_topic is None) and topic not in _SENDABLE_TOPICS:
        topic = topic_name(message.topic, allow_system=False)
        if len(_SENDABLE_TOPICS) >= _SENDABLE_TOPICS_MAX:
            _SENDABLE_TOPICS.clear()
        _SENDABLE_TOPICS.add(topic)
    # each field read once, optional ones behind HasField: 0.72 us a message, against 1.56 for
    # ListFields into a dict by name (upb makes each descriptor's name anew), timeit
    system = message.system_properties
    has = system.HasField
    body, encoding = message.body, system.body_encoding
    if not (encoding == pb.IDENTITY and 0 < len(body) <= config.max_message_size):  # else the full check
        body = _body(body, encoding, config)
    identifier = system.message_id
    # printable ASCII of the allowed length, in the C checks alone; anything else the full check
    if not (identifier.isascii() and identifier.isprintable() and 0 < len(identifier) <= config.max_message_id_size):
        identifier = message_id(identifier, config)
    tag = system.tag
    if tag or has("tag"):  # set but empty is refused, as blank
        tag = _tag(tag, config)
    else:
        tag = None
    keys = system.keys
    keys = _keys(keys, config) if keys else None
    declared = system.message_type
    grouped, delayed = has("message_group"), has("delivery_timestamp")
    if declared == pb.NORMAL and not grouped and not delayed:
        message_type, group, delivery_ms = _NORMAL, None, None  # what the official clients send most
    else:
        typing = {"message_type": declared}
        if grouped:
            typing["message_group"] = system.message_group
        if delayed:
            typing["delivery_timestamp"] = system.delivery_timestamp
        message_type, group, delivery_ms = _type_and_schedule(typing, config, now_ms)
    born_ms = timestamp_ms(system.born_timestamp) if has("born_timestamp") else now_ms
    user = message.user_properties
    # the item's fields in order (SendItem), made in C: no draft, no properties dict
    return _new_tuple(SendItem, (topic, body, born_ms if born_ms > 0 else 0, system.born_host[:256], identifier,
                                 tag, keys, message_type, group, delivery_ms,
                                 user_properties(user, config) if user else _NO_PROPERTIES, client_id,
                                 _NO_PROPERTIES))


# Topic names a send may name (valid, not a system topic): a function of the name alone, and
# each single send asked the pattern again.  Bounded: emptied when full.
_SENDABLE_TOPICS: set[str] = set()
_SENDABLE_TOPICS_MAX = 4096
_new_tuple = tuple.__new__
_NO_PROPERTIES = MappingProxyType({})
_NORMAL = MessageType.NORMAL


def _body(body: bytes, encoding: int, config: MessagingConfig) -> bytes:
    if encoding == pb.GZIP:
        try:
            inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)
            body = inflater.decompress(body, config.max_message_size + 1)
        except zlib.error:
            raise reject(Code.MESSAGE_CORRUPTED, "body is not valid gzip") from None
    elif encoding not in (pb.IDENTITY, pb.ENCODING_UNSPECIFIED):
        raise reject(Code.BAD_REQUEST, f"unknown body encoding {encoding}")
    if not body:
        raise reject(Code.MESSAGE_BODY_EMPTY, "message body is empty")
    if len(body) > config.max_message_size:
        raise reject(Code.MESSAGE_BODY_TOO_LARGE, f"message body exceeds {config.max_message_size} bytes")
    return body


def _tag(tag: str, config: MessagingConfig) -> str:
    if not tag.strip() or len(tag.encode()) > config.max_tag_size:
        raise reject(Code.ILLEGAL_MESSAGE_TAG, "tag must be non-blank and short")
    if "|" in tag or has_control_character(tag):
        raise reject(Code.ILLEGAL_MESSAGE_TAG, "tag must not contain '|' or control characters")
    return tag


def _keys(keys, config: MessagingConfig) -> str:
    if len(keys) > config.max_key_num:
        raise reject(Code.ILLEGAL_MESSAGE_KEY, f"at most {config.max_key_num} keys")
    for key in keys:
        if not key.strip() or " " in key or has_control_character(key):
            raise reject(Code.ILLEGAL_MESSAGE_KEY, "keys must be non-blank, without spaces or control characters")
    return " ".join(keys)


def user_properties(props, config: MessagingConfig) -> dict[str, str]:
    if not props:
        return {}
    if len(props) > config.user_property_max_num:
        raise reject(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"at most {config.user_property_max_num} user properties")
    total = 0
    for key, value in props.items():
        if not key or has_control_character(key) or has_control_character(value):
            raise reject(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "property keys must be non-empty; no control characters")
        total += len(key.encode()) + len(value.encode())
    if total > config.max_user_property_size:
        raise reject(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"user properties exceed {config.max_user_property_size} bytes")
    return dict(props)


def _type_and_schedule(system: dict, config: MessagingConfig, now_ms: int) -> tuple[MessageType, str | None, int | None]:
    """From the set system properties by name: the message type, FIFO group and DELAY time."""
    group = system.get("message_group")
    delivery = system.get("delivery_timestamp")
    delivery_ms = timestamp_ms(delivery) if delivery is not None else None
    declared = system.get("message_type", pb.MESSAGE_TYPE_UNSPECIFIED)
    if declared == pb.MESSAGE_TYPE_UNSPECIFIED:
        kind = MessageType.FIFO if group is not None else MessageType.DELAY if delivery_ms is not None else MessageType.NORMAL
    elif declared in _TYPES:
        kind = _TYPES[declared]
    else:
        raise reject(Code.UNSUPPORTED, f"message type {declared} is not supported")
    if (group is not None) != (kind is MessageType.FIFO):
        raise reject(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "message_group is required for FIFO messages and only for them")
    if (delivery_ms is not None) != (kind is MessageType.DELAY):
        raise reject(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "delivery_timestamp is required for DELAY messages and only for them")
    if group is not None:
        if not group.strip() or len(group.encode()) >= config.max_message_group_size or has_control_character(group):
            raise reject(Code.ILLEGAL_MESSAGE_GROUP, f"message_group must be non-blank and under {config.max_message_group_size} bytes")
    if delivery_ms is not None and delivery_ms - now_ms > config.max_delay_time_ms:
        raise reject(Code.ILLEGAL_DELIVERY_TIME, f"delivery_timestamp is more than {config.max_delay_time_ms} ms ahead")
    return kind, group, delivery_ms


# ------------------------------------------------------------- ReceiveMessage


def filter_expression(expression, config: MessagingConfig) -> FilterExpression:
    text = expression.expression.strip() or "*"
    if len(text.encode()) > config.max_filter_expression_size or has_control_character(text):
        raise reject(Code.ILLEGAL_FILTER_EXPRESSION, "filter expression is too long or has control characters")
    if expression.type == pb.SQL:
        return FilterExpression(FilterType.SQL, text)
    if expression.type not in (pb.TAG, pb.FILTER_TYPE_UNSPECIFIED):
        raise reject(Code.ILLEGAL_FILTER_EXPRESSION, f"unknown filter type {expression.type}")
    return FilterExpression(FilterType.TAG, text)


def long_poll_ms(request, config: MessagingConfig, remaining_ms: int | None) -> int:
    """Clamp the asked poll to [min, max] and to the deadline minus the reserve."""
    asked = duration_ms(request.long_polling_timeout) if request.HasField("long_polling_timeout") else config.min_long_polling_ms
    poll = min(max(asked, config.min_long_polling_ms), config.max_long_polling_ms)
    if remaining_ms is None:
        return poll
    budget = remaining_ms - config.long_polling_reserve_ms
    if budget < config.min_long_polling_ms:
        raise reject(Code.ILLEGAL_POLLING_TIME, f"{remaining_ms} ms left before the deadline; at least "
                     f"{config.min_long_polling_ms + config.long_polling_reserve_ms} ms are needed")
    return min(poll, budget)


def invisible_ms(request, config: MessagingConfig) -> int:
    if request.auto_renew:
        return config.auto_renew_invisible_time_ms
    if not request.HasField("invisible_duration"):
        raise reject(Code.ILLEGAL_INVISIBLE_TIME, "invisible_duration is required unless auto_renew")
    value = duration_ms(request.invisible_duration)
    if not config.min_invisible_time_ms <= value <= config.max_invisible_time_ms:
        raise reject(Code.ILLEGAL_INVISIBLE_TIME, f"invisible_duration must be between {config.min_invisible_time_ms} "
                     f"and {config.max_invisible_time_ms} ms")
    return value


def receive_request(request, config: MessagingConfig, client_id: str, now_monotonic_ms: int,
                    remaining_ms: int | None, max_attempts: int | None = None, client_type: str = "") -> ReceiveRequest:
    """``client_type``: the caller's, as its heartbeat or settings named it ("" unknown).  A
    receive that picks its queue per call (auto_renew false: a SimpleConsumer; never a
    PushConsumer, which polls every assigned broker in its own loop) yields to a backlog on
    another broker (scheduler.pop.backlog_board)."""
    group = group_name(request.group)
    topic = topic_name(request.message_queue.topic)
    if request.batch_size <= 0:
        raise reject(Code.BAD_REQUEST, "batch_size must be positive")
    # Like the reference proxy, pop from any queue of the topic on the named broker: the
    # SimpleConsumer polls one route queue per call, round-robin, so honouring the id would
    # leave a message in queue 0 unseen by seven polls out of eight.
    queue_id = -1
    attempt_id = request.attempt_id if request.HasField("attempt_id") else ""
    if len(attempt_id) > 256 or has_control_character(attempt_id):
        raise reject(Code.BAD_REQUEST, "attempt_id is malformed")
    filter_ = filter_expression(request.filter_expression, config)
    invisible = invisible_ms(request, config)
    poll = long_poll_ms(request, config, remaining_ms)
    return ReceiveRequest(client_id=client_id, group=group, topic=topic, queue_id=queue_id, filter=filter_,
                          batch_size=min(request.batch_size, config.receive_batch_size), invisible_ms=invisible,
                          auto_renew=request.auto_renew, long_poll_ms=poll, deadline_ms=now_monotonic_ms + poll,
                          attempt_id=attempt_id, max_delivery_attempts=max_attempts,
                          yields_to_backlog_elsewhere=not request.auto_renew and client_type != "PUSH_CONSUMER")


def broker_name_of_queue(request) -> str:
    return request.message_queue.broker.name if request.HasField("message_queue") else ""


# ---------------------------------------------------- ack, change, DLQ, tx, recall


def ack_entries(request, config: MessagingConfig) -> tuple[str, str, list[AckEntry]]:
    group, topic = group_name(request.group), topic_name(request.topic)
    if not request.entries:
        raise reject(Code.BAD_REQUEST, "AckMessage carries no entry")
    if len(request.entries) > config.max_ack_entry_num:
        raise reject(Code.BAD_REQUEST, f"at most {config.max_ack_entry_num} entries per AckMessage")
    entries = []
    id_limit, handle_limit = config.max_message_id_size, config.max_receipt_handle_size
    for entry in request.entries:
        identifier, text = entry.message_id, entry.receipt_handle
        # printable ASCII of the allowed lengths and a well-formed handle, in C checks alone;
        # anything else the full checks (and their errors)
        broker, separator, handle = text.partition(HANDLE_SEPARATOR)
        if not (identifier.isascii() and identifier.isprintable() and 0 < len(identifier) <= id_limit
                and text.isascii() and text.isprintable() and len(text) <= handle_limit and separator and broker
                and handle):
            broker, handle = split_receipt_handle(text, config)
            identifier = message_id(identifier, config)
        entries.append(AckEntry(identifier, broker, handle))
    return group, topic, entries


@dataclass(frozen=True)
class ChangeInvisible:
    group: str
    topic: str
    message_id: str
    broker_name: str
    receipt_handle: str
    invisible_ms: int


def change_invisible(request, config: MessagingConfig) -> ChangeInvisible:
    group, topic = group_name(request.group), topic_name(request.topic)
    broker, handle = split_receipt_handle(request.receipt_handle, config)
    if not request.HasField("invisible_duration"):
        raise reject(Code.ILLEGAL_INVISIBLE_TIME, "invisible_duration is required")
    value = duration_ms(request.invisible_duration)
    if not 0 <= value <= config.max_invisible_time_ms:
        raise reject(Code.ILLEGAL_INVISIBLE_TIME, f"invisible_duration must be between 0 and {config.max_invisible_time_ms} ms")
    return ChangeInvisible(group, topic, message_id(request.message_id, config), broker, handle, value)


def forward_to_dlq(request, config: MessagingConfig) -> AckEntry:
    group_name(request.group)
    topic_name(request.topic)
    broker, handle = split_receipt_handle(request.receipt_handle, config)
    return AckEntry(message_id(request.message_id, config), broker, handle)


@dataclass(frozen=True)
class EndTransaction:
    topic: str
    message_id: str
    transaction_id: str
    commit: bool | None  # None: UNSPECIFIED, the half stays for a later check
    from_check: bool


def end_transaction(request, config: MessagingConfig) -> EndTransaction:
    topic = topic_name(request.topic, allow_system=False)
    msg_id = message_id(request.message_id, config)
    tx_id = _printable(request.transaction_id, config.max_receipt_handle_size, Code.INVALID_TRANSACTION_ID, "transaction_id")
    commit = {pb.COMMIT: True, pb.ROLLBACK: False}.get(request.resolution)
    if commit is None and request.resolution != pb.TRANSACTION_RESOLUTION_UNSPECIFIED:
        raise reject(Code.BAD_REQUEST, f"unknown transaction resolution {request.resolution}")
    return EndTransaction(topic, msg_id, tx_id, commit, request.source == pb.SOURCE_SERVER_CHECK)


def recall(request, config: MessagingConfig) -> tuple[str, str]:
    topic = topic_name(request.topic, allow_system=False)
    handle = _printable(request.recall_handle, config.max_receipt_handle_size, Code.BAD_REQUEST, "recall_handle")
    return topic, handle


def topic_and_group(request) -> tuple[str, str]:
    return topic_name(request.topic), group_name(request.group)


# ---------------------------------------------------- master-only reads


OFFSET_POLICIES = {0: "BEGINNING", 1: "END", 2: "TIMESTAMP"}  # QueryOffsetPolicy


def query_offset(request) -> tuple[str, str, int, str, int | None]:
    """(broker name, topic, queue id, policy, timestamp ms or None) of a QueryOffset."""
    if not request.HasField("message_queue"):
        raise reject(Code.BAD_REQUEST, "QueryOffset needs a message_queue")
    topic = topic_name(request.message_queue.topic)
    broker = request.message_queue.broker.name
    if not broker or not is_valid_topic_name(broker):
        raise reject(Code.BAD_REQUEST, f"message_queue.broker.name {broker[:200]!r} is not a broker name")
    queue_id = request.message_queue.id
    if queue_id < 0:
        raise reject(Code.BAD_REQUEST, f"message_queue.id {queue_id} is negative")
    policy = OFFSET_POLICIES.get(request.query_offset_policy)
    if policy is None:
        raise reject(Code.BAD_REQUEST, f"query_offset_policy {request.query_offset_policy} is not BEGINNING, END or TIMESTAMP")
    timestamp = None
    if policy == "TIMESTAMP":
        if not request.HasField("timestamp"):
            raise reject(Code.BAD_REQUEST, "query_offset_policy TIMESTAMP needs a timestamp")
        timestamp = timestamp_ms(request.timestamp)
        if timestamp < 0:
            raise reject(Code.BAD_REQUEST, "timestamp is before 1970")
    return broker, topic, queue_id, policy, timestamp

