"""Controller events: the only things that change the replicated tables.

Rules:
- An event is a frozen value; ``ReplicasInfo.apply`` is the only place it takes effect.
- Events are exactly what Raft replicates.  ``encode_event`` writes RocketMQ's layout: a
  2-byte big-endian event type id followed by UTF-8 JSON with RocketMQ's field names, so a
  log can be read by eye and compared with upstream's.
- The users and ACLs (:mod:`metadata.acl_replication`) ride the same log as one more event,
  :class:`AclDocument` (type id 100, not one of upstream's, which replicates no ACLs): the
  whole state at a version, applied by the machine rather than the replica tables.  A broker
  move's record (:class:`ha.reassign.table.MoveRecord`, type id 101, issue 26) rides it too.
- ``decode_event`` trusts its input (it comes from our own committed log): a malformed
  entry is a bug or corruption and raises ``CorruptEntry``.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Union

import orjson

from ha.reassign.table import MoveRecord, move_from_json, move_to_json
from metadata.acl_replication import AclDocument


class CorruptEntry(ValueError):
    """A committed log entry that is not a controller event."""


@dataclass(frozen=True)
class AlterSyncStateSetEvent:
    broker_name: str
    new_sync_state_set: frozenset[int]


@dataclass(frozen=True)
class ApplyBrokerIdEvent:
    cluster_name: str
    broker_name: str
    broker_address: str
    new_broker_id: int
    register_check_code: str


@dataclass(frozen=True)
class ElectMasterEvent:
    new_master_elected: bool
    broker_name: str
    new_master_broker_id: int | None = None


@dataclass(frozen=True)
class CleanBrokerDataEvent:
    broker_name: str
    broker_ids_to_clean: frozenset[int] = frozenset()


@dataclass(frozen=True)
class UpdateBrokerAddressEvent:
    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int


Event = Union[AlterSyncStateSetEvent, ApplyBrokerIdEvent, ElectMasterEvent, CleanBrokerDataEvent,
              UpdateBrokerAddressEvent, AclDocument, MoveRecord]

EVENT_TYPE_IDS: dict[type, int] = {
    AlterSyncStateSetEvent: 1,
    ApplyBrokerIdEvent: 2,
    ElectMasterEvent: 3,
    CleanBrokerDataEvent: 5,
    UpdateBrokerAddressEvent: 6,
    AclDocument: 100,
    MoveRecord: 101,
}
_HEADER = struct.Struct(">H")


def _to_json(event: Event) -> dict[str, object]:
    if isinstance(event, AlterSyncStateSetEvent):
        return {"brokerName": event.broker_name, "newSyncStateSet": sorted(event.new_sync_state_set)}
    if isinstance(event, ApplyBrokerIdEvent):
        return {"clusterName": event.cluster_name, "brokerName": event.broker_name,
                "brokerAddress": event.broker_address, "newBrokerId": event.new_broker_id,
                "registerCheckCode": event.register_check_code}
    if isinstance(event, ElectMasterEvent):
        return {"newMasterElected": event.new_master_elected, "brokerName": event.broker_name,
                "newMasterBrokerId": event.new_master_broker_id}
    if isinstance(event, CleanBrokerDataEvent):
        return {"brokerName": event.broker_name, "brokerIdSetToClean": sorted(event.broker_ids_to_clean)}
    if isinstance(event, UpdateBrokerAddressEvent):
        return {"clusterName": event.cluster_name, "brokerName": event.broker_name,
                "brokerAddress": event.broker_address, "brokerId": event.broker_id}
    if isinstance(event, AclDocument):
        return {"origin": event.origin, "version": event.version, "document": event.text}
    if isinstance(event, MoveRecord):
        return move_to_json(event.move)
    raise AssertionError(f"not a controller event: {event!r}")


def _from_json(type_id: int, body: dict) -> Event:
    if type_id == 1:
        return AlterSyncStateSetEvent(body["brokerName"], frozenset(int(i) for i in body["newSyncStateSet"]))
    if type_id == 2:
        return ApplyBrokerIdEvent(body["clusterName"], body["brokerName"], body["brokerAddress"],
                                  int(body["newBrokerId"]), body["registerCheckCode"])
    if type_id == 3:
        master = body.get("newMasterBrokerId")
        return ElectMasterEvent(bool(body["newMasterElected"]), body["brokerName"],
                                None if master is None else int(master))
    if type_id == 5:
        return CleanBrokerDataEvent(body["brokerName"], frozenset(int(i) for i in body["brokerIdSetToClean"]))
    if type_id == 6:
        return UpdateBrokerAddressEvent(body["clusterName"], body["brokerName"], body["brokerAddress"],
                                        int(body["brokerId"]))
    if type_id == 100:
        return AclDocument(str(body["origin"]), int(body["version"]), str(body["document"]))
    if type_id == 101:
        return MoveRecord(move_from_json(body))
    raise CorruptEntry(f"unknown controller event type id {type_id}")


def encode_event(event: Event) -> bytes:
    return _HEADER.pack(EVENT_TYPE_IDS[type(event)]) + orjson.dumps(_to_json(event), option=orjson.OPT_SORT_KEYS)


def decode_event(data: bytes) -> Event:
    if len(data) < _HEADER.size:
        raise CorruptEntry(f"entry of {len(data)} bytes is too short for an event header")
    (type_id,) = _HEADER.unpack_from(data)
    try:
        body = orjson.loads(data[_HEADER.size:])
        return _from_json(type_id, body)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CorruptEntry):
            raise
        raise CorruptEntry(f"event type {type_id}: {exc}") from exc
