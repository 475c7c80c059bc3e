"""Controller requests and replies: frozen values, validated by the gRPC converter.

A reply carries RocketMQ's response code, a remark for humans, and the views a caller
needs (the group's master and SyncStateSet, a next broker id, per-replica status).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Union

from ha.controller.codes import ResponseCode
from ha.controller.events import Event


@dataclass(frozen=True)
class GetNextBrokerId:
    cluster_name: str
    broker_name: str


@dataclass(frozen=True)
class ApplyBrokerId:
    cluster_name: str
    broker_name: str
    applied_broker_id: int
    register_check_code: str  # "ip:port;timestampMs"


@dataclass(frozen=True)
class RegisterBroker:
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str


@dataclass(frozen=True)
class ElectMaster:
    """Broker trigger (id, not designated), admin trigger (id, designated), controller trigger
    (no id).  ``renew_master_epoch`` > 0: the broker, recorded master at that epoch, asks to be
    elected again at a new epoch instead of resuming that one (ha.role.decisions)."""
    cluster_name: str
    broker_name: str
    broker_id: int | None = None
    designate_elect: bool = False
    renew_master_epoch: int = 0

    @property
    def controller_triggered(self) -> bool:
        return self.broker_id is None or self.broker_id == -1


@dataclass(frozen=True)
class AlterSyncStateSet:
    broker_name: str
    master_broker_id: int
    master_epoch: int
    new_sync_state_set: frozenset[int]
    sync_state_set_epoch: int


@dataclass(frozen=True)
class GetReplicaInfo:
    broker_name: str


@dataclass(frozen=True)
class GetSyncStateData:
    broker_names: tuple[str, ...]  # empty: every broker set


@dataclass(frozen=True)
class CleanBrokerData:
    cluster_name: str
    broker_name: str
    broker_ids_to_clean: str = ""  # RocketMQ's "1;2;3"; empty: the whole set
    clean_living_broker: bool = False


Request = Union[GetNextBrokerId, ApplyBrokerId, RegisterBroker, ElectMaster, AlterSyncStateSet, GetReplicaInfo,
                GetSyncStateData, CleanBrokerData]
READ_ONLY = (GetNextBrokerId, GetReplicaInfo, GetSyncStateData)


@dataclass(frozen=True)
class GroupView:
    broker_name: str
    master_broker_id: int | None
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int
    sync_state_set: frozenset[int]
    members: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))  # id -> address


@dataclass(frozen=True)
class ReplicaStatus:
    broker_id: int
    address: str
    alive: bool
    in_sync: bool


@dataclass(frozen=True)
class GroupDetail:
    view: GroupView
    replicas: tuple[ReplicaStatus, ...]


@dataclass(frozen=True)
class Reply:
    code: ResponseCode = ResponseCode.SUCCESS
    remark: str = ""
    view: GroupView | None = None
    next_broker_id: int = 0
    groups: tuple[GroupDetail, ...] = ()

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


@dataclass(frozen=True)
class Decision:
    events: tuple[Event, ...] = ()
    reply: Reply = field(default_factory=Reply)


def reject(code: ResponseCode, remark: str, view: GroupView | None = None) -> Decision:
    return Decision((), Reply(code, remark, view))
