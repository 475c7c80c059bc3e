"""The broker contract's values -> protobuf responses.

Rules:
- Every delivered message says ``body_encoding=IDENTITY`` and carries a CRC32 digest as 8
  uppercase hex digits: the official clients fail a whole receive without the encoding
  and nack a message whose digest does not match.
- Every queue of a route says ``broker.id=0`` (clients keep only id 0) and its broker
  endpoints with a scheme: IPv4 for an IPv4 literal, else DOMAIN_NAME.
- Pure: no clock reads; callers pass times in.
"""
from __future__ import annotations

import ipaddress

from metadata.checksum import crc32
from metadata.message import MessageType, Prop, StoredMessage
from metadata.status import Code
from metadata.topic_config import PERM_READ, PERM_WRITE
from proto import messaging_definition_pb2 as pb
from proto import messaging_service_pb2 as service
from services.broker.api import Delivery, QueueRoute, SendOutcome, TransactionCheck
from services.messaging import converters

_TYPES = {MessageType.NORMAL: pb.NORMAL, MessageType.FIFO: pb.FIFO, MessageType.DELAY: pb.DELAY,
          MessageType.TRANSACTION: pb.TRANSACTION}
_UNROUTABLE = {"", "0.0.0.0", "::"}


def status(code: Code, message: str = "") -> pb.Status:
    return pb.Status(code=int(code), message=message or code.name)


OK = status(Code.OK, "OK")


def endpoints(host: str, port: int) -> pb.Endpoints:
    try:
        scheme = pb.IPv4 if ipaddress.ip_address(host).version == 4 else pb.IPv6
    except ValueError:
        scheme = pb.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


def route_endpoints(route: QueueRoute, fallback: pb.Endpoints | None) -> pb.Endpoints:
    """The queue's broker endpoints (every replica's own endpoint when they have them, else the
    hosting container's); an unroutable host borrows the request's access point host."""
    if route.broker_endpoints:
        result = pb.Endpoints(scheme=endpoints(*route.broker_endpoints[0]).scheme)
        for host, port in route.broker_endpoints:
            if host in _UNROUTABLE and fallback is not None and fallback.addresses:
                host = fallback.addresses[0].host
            result.addresses.add(host=host, port=port)
        return result
    host, port = route.endpoint
    if host in _UNROUTABLE and fallback is not None and fallback.addresses:
        host = fallback.addresses[0].host
    return endpoints(host, port)


def permission(perm: int) -> int:
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return pb.READ_WRITE
    return pb.READ if readable else pb.WRITE if writable else pb.NONE


def message_queue(route: QueueRoute, namespace: str, fallback: pb.Endpoints | None, queue_id: int | None = None) -> pb.MessageQueue:
    return pb.MessageQueue(
        topic=pb.Resource(resource_namespace=namespace, name=route.topic),
        id=route.queue_id if queue_id is None else queue_id,
        permission=permission(route.permission),
        broker=pb.Broker(name=route.broker_name, id=0, endpoints=route_endpoints(route, fallback)),
        accept_message_types=[_TYPES[t] for t in route.accept_types],
    )


def assignments(routes: list[QueueRoute], fifo: bool, namespace: str, fallback: pb.Endpoints | None) -> list[pb.Assignment]:
    """Readable queues: one per broker (id -1) for a non-FIFO group, one per queue for FIFO."""
    readable = [r for r in routes if r.permission & PERM_READ]
    if fifo:
        return [pb.Assignment(message_queue=message_queue(r, namespace, fallback)) for r in readable]
    first_per_broker: dict[str, QueueRoute] = {}
    for route in readable:
        first_per_broker.setdefault(route.broker_name, route)
    return [pb.Assignment(message_queue=message_queue(r, namespace, fallback, queue_id=-1)) for r in first_per_broker.values()]


_OK_FIELDS = {"code": int(Code.OK), "message": "OK"}


def send_response(outcomes: list[SendOutcome]) -> service.SendMessageResponse:
    """OK with one OK entry per outcome.  The entries are given as dicts, which upb fills
    about 3x faster than from per-entry messages (a 32-message batch: 34 vs 100 us)."""
    entries = []
    for outcome in outcomes:
        entry = {"status": _OK_FIELDS, "message_id": outcome.message_id, "offset": outcome.queue_offset}
        if outcome.transaction_id:
            entry["transaction_id"] = outcome.transaction_id
        if outcome.recall_handle:
            entry["recall_handle"] = outcome.recall_handle
        entries.append(entry)
    return service.SendMessageResponse(status=OK, entries=entries)


def digest(body: bytes) -> pb.Digest:
    return pb.Digest(type=pb.CRC32, checksum=format(crc32(body) & 0xFFFFFFFF, "08X"))


_TYPE_BY_NAME = {kind.value: code for kind, code in _TYPES.items()}


def ack_response(entries, statuses: list[pb.Status]) -> service.AckMessageResponse:
    """One result per request entry (its id and handle echoed); overall OK, the one failure of
    a single entry, or MULTIPLE_RESULTS.  Entries are given as dicts (see :func:`send_response`)."""
    results, failed = [], []
    for raw, entry_status in zip(entries, statuses):
        if entry_status is OK:
            fields = _OK_FIELDS
        else:
            fields = {"code": entry_status.code, "message": entry_status.message}
            if entry_status.code != Code.OK:
                failed.append(entry_status)
        results.append({"message_id": raw.message_id, "receipt_handle": raw.receipt_handle, "status": fields})
    if not failed:
        overall = OK
    elif len(results) == 1:
        overall = failed[0]
    else:
        overall = status(Code.MULTIPLE_RESULTS, f"{len(failed)} of {len(results)} entries failed")
    return service.AckMessageResponse(status=overall, entries=results)


def _timestamp(ms: int) -> dict:
    seconds, millis = divmod(ms, 1000)
    return {"seconds": seconds, "nanos": millis * 1_000_000}


def message_fields(stored: StoredMessage, topic: str, namespace: str = "") -> dict:
    """A stored message as the clients read it (no delivery fields), as ``pb.Message`` keyword
    arguments: upb fills nested dicts much faster than per-field sets on sub-messages."""
    props = stored.properties
    draft = stored.draft
    body = draft.body
    born_s, born_ms = divmod(draft.born_timestamp_ms, 1000)
    stored_s, stored_ms = divmod(stored.store_timestamp_ms, 1000)
    system = {"message_id": props.get(Prop.MESSAGE_ID, ""), "body_encoding": pb.IDENTITY,
              "message_type": _TYPE_BY_NAME.get(props.get(Prop.MESSAGE_TYPE, ""), pb.NORMAL),
              "born_host": draft.born_host, "queue_id": max(draft.queue_id, 0), "queue_offset": stored.queue_offset,
              "body_digest": {"type": pb.CRC32, "checksum": "%08X" % crc32(body)},
              "born_timestamp": {"seconds": born_s, "nanos": born_ms * 1_000_000},
              "store_timestamp": {"seconds": stored_s, "nanos": stored_ms * 1_000_000}}
    tag = props.get(Prop.TAG)
    if tag is not None:
        system["tag"] = tag
    keys = props.get(Prop.KEYS)
    if keys:
        system["keys"] = keys.split(" ")
    group = props.get(Prop.MESSAGE_GROUP)
    if group is not None:
        system["message_group"] = group
    delivery_ms = props.get(Prop.DELIVERY_TIME_MS, "")
    if delivery_ms.isdigit():
        system["delivery_timestamp"] = _timestamp(int(delivery_ms))
    fields = {"topic": {"resource_namespace": namespace, "name": topic}, "system_properties": system, "body": body}
    if draft.user_properties:
        fields["user_properties"] = dict(draft.user_properties)
    return fields


def message(stored: StoredMessage, topic: str, namespace: str = "") -> pb.Message:
    """A stored message as the clients read it (no delivery fields)."""
    return pb.Message(**message_fields(stored, topic, namespace))


def delivered_fields(delivery: Delivery, broker_name: str, topic: str, namespace: str = "") -> dict:
    """:func:`delivered` as ``pb.Message`` keyword arguments."""
    fields = message_fields(delivery.message, topic, namespace)
    system = fields["system_properties"]
    system["receipt_handle"] = converters.join_receipt_handle(broker_name, delivery.receipt_handle)
    system["delivery_attempt"] = delivery.delivery_attempt
    if delivery.dead_letter_origin is not None:
        origin_topic, origin_id = delivery.dead_letter_origin
        system["dead_letter_queue"] = {"topic": origin_topic, "message_id": origin_id}
    return fields


def delivered(delivery: Delivery, broker_name: str, topic: str, namespace: str = "") -> pb.Message:
    return pb.Message(**delivered_fields(delivery, broker_name, topic, namespace))


def delivered_response(delivery: Delivery, broker_name: str, topic: str, namespace: str = "") -> service.ReceiveMessageResponse:
    """One message of a ReceiveMessage stream (built in one go: no copy of a finished message)."""
    return service.ReceiveMessageResponse(message=delivered_fields(delivery, broker_name, topic, namespace))


def transaction_check_command(check: TransactionCheck) -> service.TelemetryCommand:
    command = service.RecoverOrphanedTransactionCommand(message=message(check.message, check.topic),
                                                        transaction_id=check.transaction_id)
    return service.TelemetryCommand(status=OK, recover_orphaned_transaction_command=command)
