"""The replicated tables (RocketMQ's ``ReplicasInfoManager`` state) and how events apply.

Rules:
- ``replica_info_table``: broker name -> ``BrokerReplicaInfo`` (ids, addresses, check
  codes, the next id to assign).  Ids start at 1 and are never reused: ``next_assign_broker_id``
  only grows, even when ids are cleaned.
- ``sync_state_info_table``: broker name -> ``SyncStateInfo`` (master, SyncStateSet, and their
  epochs).  Every master change, including "no master", bumps ``master_epoch``; every new
  SyncStateSet bumps ``sync_state_set_epoch``.  Epochs never go back.
- A broker set exists only when it is in both tables.  A set cleaned away entirely leaves a
  ``Retired`` record (next id, epochs): created again, it continues from there, so ids are
  never reused and epochs never go back; its first election is again "first time".  Cleaning some ids keeps the
  SyncStateInfo while any replica remains (so its epochs survive); cleaning the master clears
  it with an epoch bump, like any other master change.
- ``apply`` is the only mutation.  Values are frozen and replaced, so ``copy()`` is a cheap
  shallow copy that a leader can decide a batch of commands against.
- ``snapshot``/``restore`` serialize both tables so the Raft log can be compacted.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import orjson

from ha.controller.overlay import Overlay
from ha.controller.events import (AlterSyncStateSetEvent, ApplyBrokerIdEvent, CleanBrokerDataEvent,
                                  ElectMasterEvent, Event, UpdateBrokerAddressEvent)

SNAPSHOT_FORMAT = 1
SNAPSHOT_CHUNK = 2_000  # broker sets per orjson call when encoding a snapshot


@dataclass(frozen=True)
class BrokerIdInfo:
    address: str
    register_check_code: str


@dataclass(frozen=True)
class BrokerReplicaInfo:
    cluster_name: str
    broker_name: str
    next_assign_broker_id: int = 1
    brokers: Mapping[int, BrokerIdInfo] = dataclasses.field(default_factory=lambda: MappingProxyType({}))

    def address_of(self, broker_id: int | None) -> str:
        info = self.brokers.get(broker_id) if broker_id is not None else None
        return info.address if info else ""

    def with_broker(self, broker_id: int, info: BrokerIdInfo) -> "BrokerReplicaInfo":
        brokers = dict(self.brokers)
        brokers[broker_id] = info
        return dataclasses.replace(self, brokers=MappingProxyType(brokers),
                                   next_assign_broker_id=max(self.next_assign_broker_id, broker_id + 1))


@dataclass(frozen=True)
class SyncStateInfo:
    cluster_name: str
    broker_name: str
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    master_broker_id: int | None = None
    base_master_epoch: int = 0  # the master epoch the set was (re)created with

    @property
    def is_first_time_for_elect(self) -> bool:
        return self.master_epoch == self.base_master_epoch


@dataclass(frozen=True)
class Retired:
    """What a cleaned-away broker set leaves behind, so that it never goes back if created again."""
    next_assign_broker_id: int
    master_epoch: int
    sync_state_set_epoch: int


class ReplicasInfo:
    """The two replicated tables; change them only through :meth:`apply`."""

    def __init__(self) -> None:
        self.replica_info_table: dict[str, BrokerReplicaInfo] = {}
        self.sync_state_info_table: dict[str, SyncStateInfo] = {}
        self.retired_table: dict[str, Retired] = {}

    def first_broker_id(self, broker_name: str) -> int:
        """The id a new (or re-created) broker set starts with."""
        retired = self.retired_table.get(broker_name)
        return retired.next_assign_broker_id if retired else 1

    def copy(self) -> "ReplicasInfo":
        """A scratch copy in O(1): writes stay in it; this one must not change while it is used."""
        other = ReplicasInfo()
        other.replica_info_table = Overlay(self.replica_info_table)
        other.sync_state_info_table = Overlay(self.sync_state_info_table)
        other.retired_table = Overlay(self.retired_table)
        return other

    def detached(self) -> "ReplicasInfo":
        """An independent copy (O(n) dict copies of frozen values): safe to encode in another thread."""
        other = ReplicasInfo()
        other.replica_info_table = dict(self.replica_info_table)
        other.sync_state_info_table = dict(self.sync_state_info_table)
        other.retired_table = dict(self.retired_table)
        return other

    def exists(self, broker_name: str) -> bool:
        return broker_name in self.replica_info_table and broker_name in self.sync_state_info_table

    def broker_names(self) -> list[str]:
        return sorted(name for name in self.replica_info_table if name in self.sync_state_info_table)

    def apply(self, event: Event) -> None:
        if isinstance(event, AlterSyncStateSetEvent):
            self._apply_alter(event)
        elif isinstance(event, ApplyBrokerIdEvent):
            self._apply_broker_id(event)
        elif isinstance(event, ElectMasterEvent):
            self._apply_elect(event)
        elif isinstance(event, CleanBrokerDataEvent):
            self._apply_clean(event)
        elif isinstance(event, UpdateBrokerAddressEvent):
            self._apply_address(event)
        else:
            raise AssertionError(f"not a controller event: {event!r}")

    def _apply_alter(self, event: AlterSyncStateSetEvent) -> None:
        state = self.sync_state_info_table.get(event.broker_name)
        if state is None:
            return
        self.sync_state_info_table[event.broker_name] = dataclasses.replace(
            state, sync_state_set=event.new_sync_state_set, sync_state_set_epoch=state.sync_state_set_epoch + 1)

    def _apply_broker_id(self, event: ApplyBrokerIdEvent) -> None:
        name = event.broker_name
        retired = self.retired_table.pop(name, None) if not self.exists(name) else None
        replicas = self.replica_info_table.get(name) or BrokerReplicaInfo(
            event.cluster_name, name, retired.next_assign_broker_id if retired else 1)
        if name not in self.sync_state_info_table:
            epoch = retired.master_epoch if retired else 0
            self.sync_state_info_table[name] = SyncStateInfo(
                event.cluster_name, name, epoch, retired.sync_state_set_epoch if retired else 0, base_master_epoch=epoch)
        if event.new_broker_id not in replicas.brokers:
            replicas = replicas.with_broker(event.new_broker_id,
                                            BrokerIdInfo(event.broker_address, event.register_check_code))
        self.replica_info_table[name] = replicas

    def _apply_elect(self, event: ElectMasterEvent) -> None:
        state = self.sync_state_info_table.get(event.broker_name)
        if state is None:
            return
        if event.new_master_elected and event.new_master_broker_id is not None:
            state = dataclasses.replace(state, master_broker_id=event.new_master_broker_id,
                                        master_epoch=state.master_epoch + 1,
                                        sync_state_set=frozenset({event.new_master_broker_id}),
                                        sync_state_set_epoch=state.sync_state_set_epoch + 1)
        else:
            state = dataclasses.replace(state, master_broker_id=None, master_epoch=state.master_epoch + 1)
        self.sync_state_info_table[event.broker_name] = state

    def _apply_clean(self, event: CleanBrokerDataEvent) -> None:
        name = event.broker_name
        self._retire(name)  # what survives if this clean removes the whole set
        if not event.broker_ids_to_clean:
            self.replica_info_table.pop(name, None)
            self.sync_state_info_table.pop(name, None)
            return
        replicas = self.replica_info_table.get(name)
        if replicas is not None:
            brokers = {i: b for i, b in replicas.brokers.items() if i not in event.broker_ids_to_clean}
            if brokers:
                self.replica_info_table[name] = dataclasses.replace(replicas, brokers=MappingProxyType(brokers))
            else:
                del self.replica_info_table[name]
        state = self.sync_state_info_table.get(name)
        if state is not None:
            remaining = state.sync_state_set - event.broker_ids_to_clean
            if remaining or name in self.replica_info_table:
                if state.master_broker_id in event.broker_ids_to_clean:  # a cleaned master is no master
                    state = dataclasses.replace(state, master_broker_id=None, master_epoch=state.master_epoch + 1)
                self.sync_state_info_table[name] = dataclasses.replace(state, sync_state_set=remaining)
            else:
                del self.sync_state_info_table[name]
        if self.exists(name):
            self.retired_table.pop(name, None)

    def _retire(self, name: str) -> None:
        replicas, state = self.replica_info_table.get(name), self.sync_state_info_table.get(name)
        if replicas is None and state is None:
            return
        old = self.retired_table.get(name)
        self.retired_table[name] = Retired(
            max(replicas.next_assign_broker_id if replicas else 1, old.next_assign_broker_id if old else 1),
            max(state.master_epoch + 1 if state else 0, old.master_epoch if old else 0),
            max(state.sync_state_set_epoch + 1 if state else 0, old.sync_state_set_epoch if old else 0))

    def _apply_address(self, event: UpdateBrokerAddressEvent) -> None:
        replicas = self.replica_info_table.get(event.broker_name)
        if replicas is None or event.broker_id not in replicas.brokers:
            return
        old = replicas.brokers[event.broker_id]
        self.replica_info_table[event.broker_name] = replicas.with_broker(
            event.broker_id, BrokerIdInfo(event.broker_address, old.register_check_code))

    # -- snapshots -------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """Both tables as JSON with sorted keys, encoded ``SNAPSHOT_CHUNK`` sets at a time.

        One orjson call per chunk rather than one for the whole document: when a driver
        encodes a ``detached()`` copy in a worker thread, the GIL changes hands between
        chunks, so the event loop is never held for the whole encoding.
        """
        replicas = _encode_table(self.replica_info_table, _replica_json)
        states = _encode_table(self.sync_state_info_table, _state_json)
        retired = _encode_table(self.retired_table, _retired_json)
        return b'{"format":%d,"replicaInfoTable":%s,"syncStateSetInfoTable":%s,"retiredTable":%s}' % (
            SNAPSHOT_FORMAT, replicas, states, retired)

    @classmethod
    def restore(cls, data: bytes) -> "ReplicasInfo":
        state = cls()
        if not data:
            return state
        body = orjson.loads(data)
        assert body.get("format") == SNAPSHOT_FORMAT, f"unknown controller snapshot format {body.get('format')}"
        for name, r in body["replicaInfoTable"].items():
            brokers = {int(i): BrokerIdInfo(a, c) for i, (a, c) in r["brokers"].items()}
            state.replica_info_table[name] = BrokerReplicaInfo(r["clusterName"], name, r["nextAssignBrokerId"],
                                                               MappingProxyType(brokers))
        for name, s in body["syncStateSetInfoTable"].items():
            state.sync_state_info_table[name] = SyncStateInfo(s["clusterName"], name, s["masterEpoch"],
                                                              s["syncStateSetEpoch"], frozenset(s["syncStateSet"]),
                                                              s["masterBrokerId"], s.get("baseMasterEpoch", 0))
        for name, r in body.get("retiredTable", {}).items():
            state.retired_table[name] = Retired(r["nextAssignBrokerId"], r["masterEpoch"], r["syncStateSetEpoch"])
        return state


def _replica_json(r: BrokerReplicaInfo) -> dict:
    return {"clusterName": r.cluster_name, "nextAssignBrokerId": r.next_assign_broker_id,
            "brokers": {str(i): [b.address, b.register_check_code] for i, b in r.brokers.items()}}


def _state_json(s: SyncStateInfo) -> dict:
    return {"clusterName": s.cluster_name, "masterEpoch": s.master_epoch, "syncStateSetEpoch": s.sync_state_set_epoch,
            "syncStateSet": sorted(s.sync_state_set), "masterBrokerId": s.master_broker_id,
            "baseMasterEpoch": s.base_master_epoch}


def _retired_json(r: Retired) -> dict:
    return {"nextAssignBrokerId": r.next_assign_broker_id, "masterEpoch": r.master_epoch,
            "syncStateSetEpoch": r.sync_state_set_epoch}


def _encode_table(table: Mapping, to_json) -> bytes:
    """``{name: to_json(value), ...}`` in name order, one orjson call per ``SNAPSHOT_CHUNK`` names."""
    names = sorted(table)
    parts = []
    for start in range(0, len(names), SNAPSHOT_CHUNK):
        chunk = {name: to_json(table[name]) for name in names[start:start + SNAPSHOT_CHUNK]}
        parts.append(orjson.dumps(chunk, option=orjson.OPT_SORT_KEYS)[1:-1])
    return b"{" + b",".join(parts) + b"}"
