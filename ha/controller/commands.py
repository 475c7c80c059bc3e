"""Decide each controller request against the replicated tables: ``decide(...) -> Decision``.

Rules:
- Pure: inputs are the tables, the node's liveness view, ``now_ms`` and the unclean-election
  switch; the output is the events to replicate plus the reply.  Nothing is mutated here;
  the caller applies the events (after they commit, on every node).
- Every check of reference 4.3, in upstream's order, with upstream's response codes.
- Deliberate differences, each to keep epochs meaningful: a controller-triggered election
  with no candidate clears the master (epoch + 1) only if a master is still recorded, so a
  dead group does not churn epochs on every scan; a clean without ids is refused while
  any broker of the set is alive (not only while a master is recorded).  A set's first
  election picks, among its alive replicas, the lowest ``brokerElectionPriority`` (the
  requester on a tie) rather than whoever asked first, so a deployment's intended masters
  win when their replicas start together.
- A renewal (ElectMaster ``renew_master_epoch``, not in upstream): the recorded master of
  that very epoch asks to be elected again rather than resume an epoch it may have written
  differently before (a restart after a power loss) or may hold an old SyncStateSet of (a
  stale view; ha.role.decisions).  The answer is ``ElectMasterEvent(True, same id)``: epoch
  + 1, the SyncStateSet reset to the master alone.  Safe because the master is a member of
  every set applied in its epoch (AlterSyncStateSet requires it) and holds, durably, every
  acknowledged message (it counts itself only for what it has fdatasynced, and a power loss
  keeps that), so the only replica the set then lets the controller elect has them all;
  slaves rejoin through the master's expansion, which needs the confirm offset.  Anything
  else is refused with the current view, which the broker decides on: another master, no
  master, or an epoch already past the one to renew (the renewal was applied, its reply lost)
  change nothing here, so a repeated request never bumps the epoch twice.
"""
from __future__ import annotations

from types import MappingProxyType

from ha.controller.codes import ResponseCode as Code
from ha.controller.election import choose_master
from ha.controller.events import (AlterSyncStateSetEvent, ApplyBrokerIdEvent, CleanBrokerDataEvent,
                                  ElectMasterEvent, UpdateBrokerAddressEvent)
from ha.controller.liveness import BrokerLiveness
from ha.controller.replicas import ReplicasInfo
from ha.controller.requests import (AlterSyncStateSet, ApplyBrokerId, CleanBrokerData, Decision, ElectMaster,
                                    GetNextBrokerId, GetReplicaInfo, GetSyncStateData, GroupDetail, GroupView,
                                    RegisterBroker, ReplicaStatus, Reply, Request, reject)


def group_view(replicas: ReplicasInfo, broker_name: str) -> GroupView:
    state = replicas.sync_state_info_table[broker_name]
    info = replicas.replica_info_table[broker_name]
    return GroupView(broker_name, state.master_broker_id, info.address_of(state.master_broker_id),
                     state.master_epoch, state.sync_state_set_epoch, state.sync_state_set,
                     MappingProxyType({i: b.address for i, b in info.brokers.items()}))


def decide(request: Request, replicas: ReplicasInfo, liveness: BrokerLiveness, now_ms: int,
           allow_unclean: bool = False) -> Decision:
    if isinstance(request, GetNextBrokerId):
        info = replicas.replica_info_table.get(request.broker_name)
        return Decision((), Reply(next_broker_id=info.next_assign_broker_id if info
                                  else replicas.first_broker_id(request.broker_name)))
    if isinstance(request, ApplyBrokerId):
        return _apply_broker_id(request, replicas)
    if isinstance(request, RegisterBroker):
        return _register(request, replicas, liveness, now_ms)
    if isinstance(request, ElectMaster):
        return _elect(request, replicas, liveness, now_ms, allow_unclean)
    if isinstance(request, AlterSyncStateSet):
        return _alter(request, replicas, liveness, now_ms)
    if isinstance(request, GetReplicaInfo):
        if not replicas.exists(request.broker_name):
            return reject(Code.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                          f"Broker metadata is not existed: {request.broker_name}")
        return Decision((), Reply(view=group_view(replicas, request.broker_name)))
    if isinstance(request, GetSyncStateData):
        return _sync_state_data(request, replicas, liveness, now_ms)
    if isinstance(request, CleanBrokerData):
        return _clean(request, replicas, liveness, now_ms)
    raise AssertionError(f"not a controller request: {request!r}")


def _apply_broker_id(request: ApplyBrokerId, replicas: ReplicasInfo) -> Decision:
    name, wanted = request.broker_name, request.applied_broker_id
    address = request.register_check_code.split(";", 1)[0]
    event = ApplyBrokerIdEvent(request.cluster_name, name, address, wanted, request.register_check_code)
    info = replicas.replica_info_table.get(name)
    if info is None or not replicas.exists(name):
        if wanted != replicas.first_broker_id(name):
            return reject(Code.CONTROLLER_BROKER_ID_INVALID,
                          f"Broker-set: {name} hasn't been registered in controller, but broker try to apply "
                          f"brokerId: {wanted}")
        return Decision((event,), Reply(next_broker_id=wanted))
    known = info.brokers.get(wanted)
    if known is None and wanted >= info.next_assign_broker_id:
        return Decision((event,), Reply(next_broker_id=wanted))
    if known is not None and known.register_check_code == request.register_check_code:
        return Decision((event,), Reply(next_broker_id=wanted))  # an idempotent retry
    return reject(Code.CONTROLLER_BROKER_ID_INVALID,
                  f"Fail to apply brokerId: {wanted} in broker-set: {name}: the id is used or was used before")


def _register(request: RegisterBroker, replicas: ReplicasInfo, liveness: BrokerLiveness, now_ms: int) -> Decision:
    name = request.broker_name
    if not replicas.exists(name) or request.broker_id not in replicas.replica_info_table[name].brokers:
        return reject(Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                      f"Broker {name} id {request.broker_id} has not applied for a broker id")
    info = replicas.replica_info_table[name]
    events = ()
    if info.brokers[request.broker_id].address != request.broker_address:
        events = (UpdateBrokerAddressEvent(request.cluster_name, name, request.broker_address, request.broker_id),)
    view = group_view(replicas, name)
    state = replicas.sync_state_info_table[name]
    if state.master_broker_id is None or not liveness.is_alive(state.cluster_name, name, state.master_broker_id,
                                                               now_ms):
        view = GroupView(name, None, "", view.master_epoch, view.sync_state_set_epoch, view.sync_state_set,
                         view.members)
    return Decision(events, Reply(view=view))


def _alive_infos(replicas: ReplicasInfo, name: str, liveness: BrokerLiveness, now_ms: int) -> dict:
    cluster = replicas.sync_state_info_table[name].cluster_name
    alive = {}
    for broker_id in replicas.replica_info_table[name].brokers:
        info = liveness.info(cluster, name, broker_id)
        if info is not None and info.alive(now_ms):
            alive[broker_id] = info
    return alive


def _elect(request: ElectMaster, replicas: ReplicasInfo, liveness: BrokerLiveness, now_ms: int,
           allow_unclean: bool) -> Decision:
    name = request.broker_name
    if not replicas.exists(name):
        return reject(Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, f"Broker {name} hasn't been registered")
    if request.renew_master_epoch > 0:
        return _renew(request, replicas)
    state = replicas.sync_state_info_table[name]
    old = state.master_broker_id
    if state.is_first_time_for_elect:
        new = None if request.controller_triggered else _first_master(
            request.broker_id, _alive_infos(replicas, name, liveness, now_ms))
    else:
        prefer = request.broker_id if request.designate_elect else None
        new = choose_master(state.sync_state_set, replicas.replica_info_table[name].brokers,
                            _alive_infos(replicas, name, liveness, now_ms), old, prefer, allow_unclean)
    if new is not None and new == old:
        return reject(Code.CONTROLLER_MASTER_STILL_EXIST,
                      f"The old master {old} is still alive, no need to elect a new master for {name}",
                      group_view(replicas, name))
    if new is not None:
        after = replicas.copy()
        event = ElectMasterEvent(True, name, new)
        after.apply(event)
        return Decision((event,), Reply(view=group_view(after, name)))
    if request.controller_triggered:
        if old is None:
            return reject(Code.CONTROLLER_MASTER_NOT_AVAILABLE, f"No master and no candidate for {name}",
                          group_view(replicas, name))
        after = replicas.copy()
        event = ElectMasterEvent(False, name)
        after.apply(event)
        return Decision((event,), Reply(Code.CONTROLLER_MASTER_NOT_AVAILABLE,
                                        f"Failed to elect a new master for {name}: master cleared",
                                        group_view(after, name)))
    return reject(Code.CONTROLLER_ELECT_MASTER_FAILED,
                  f"Failed to elect a new master for {name}: no alive candidate"
                  + ("" if allow_unclean else " in the SyncStateSet"), group_view(replicas, name))


def _renew(request: ElectMaster, replicas: ReplicasInfo) -> Decision:
    """The recorded master asks for a new epoch instead of resuming ``renew_master_epoch``."""
    name, state = request.broker_name, replicas.sync_state_info_table[request.broker_name]
    if state.master_broker_id is None or state.master_broker_id != request.broker_id:
        return reject(Code.CONTROLLER_INVALID_MASTER,
                      f"Not renewing epoch {request.renew_master_epoch} of {name} for {request.broker_id}: the master "
                      f"is {state.master_broker_id}", group_view(replicas, name))
    if state.master_epoch != request.renew_master_epoch:
        return reject(Code.CONTROLLER_FENCED_MASTER_EPOCH,
                      f"Not renewing epoch {request.renew_master_epoch} of {name}: the master epoch is "
                      f"{state.master_epoch}", group_view(replicas, name))
    after = replicas.copy()
    event = ElectMasterEvent(True, name, request.broker_id)
    after.apply(event)
    return Decision((event,), Reply(view=group_view(after, name)))


def _first_master(requester: int, alive: dict) -> int:
    """The first master: the alive replica with the lowest election priority, the requester on a tie."""
    if requester not in alive:
        return requester
    best = min(alive, key=lambda i: (alive[i].election_priority, i != requester, i))
    return best


def _alter(request: AlterSyncStateSet, replicas: ReplicasInfo, liveness: BrokerLiveness, now_ms: int) -> Decision:
    name, new_set = request.broker_name, request.new_sync_state_set
    if not replicas.exists(name):
        return reject(Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, f"Broker metadata is not existed: {name}")
    state = replicas.sync_state_info_table[name]
    if new_set == state.sync_state_set:
        return reject(Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                      "The newSyncStateSet is equal with the old SyncStateSet, no needed to update it")
    if state.master_broker_id is None or state.master_broker_id != request.master_broker_id:
        return reject(Code.CONTROLLER_INVALID_MASTER,
                      f"Rejecting alter SyncStateSet request because the current master is "
                      f"{state.master_broker_id}, not {request.master_broker_id}")
    if request.master_epoch != state.master_epoch:
        return reject(Code.CONTROLLER_FENCED_MASTER_EPOCH,
                      f"Master epoch {request.master_epoch} is fenced, current is {state.master_epoch}")
    if request.sync_state_set_epoch != state.sync_state_set_epoch:
        return reject(Code.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                      f"SyncStateSet epoch {request.sync_state_set_epoch} is fenced, "
                      f"current is {state.sync_state_set_epoch}")
    members = replicas.replica_info_table[name].brokers
    for broker_id in sorted(new_set):
        if broker_id not in members:
            return reject(Code.CONTROLLER_INVALID_REPLICAS, f"Replica {broker_id} is not a member of {name}")
        if not liveness.is_alive(state.cluster_name, name, broker_id, now_ms):
            return reject(Code.CONTROLLER_BROKER_NOT_ALIVE, f"Replica {broker_id} of {name} is not alive")
    if state.master_broker_id not in new_set:
        return reject(Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                      f"The newSyncStateSet does not contain the master {state.master_broker_id}")
    after = replicas.copy()
    event = AlterSyncStateSetEvent(name, new_set)
    after.apply(event)
    return Decision((event,), Reply(view=group_view(after, name)))


def _sync_state_data(request: GetSyncStateData, replicas: ReplicasInfo, liveness: BrokerLiveness,
                     now_ms: int) -> Decision:
    names = request.broker_names or tuple(replicas.broker_names())
    groups = []
    for name in names:
        if not replicas.exists(name):
            continue
        view = group_view(replicas, name)
        cluster = replicas.sync_state_info_table[name].cluster_name
        statuses = tuple(ReplicaStatus(i, addr, liveness.is_alive(cluster, name, i, now_ms),
                                       i in view.sync_state_set) for i, addr in sorted(view.members.items()))
        groups.append(GroupDetail(view, statuses))
    return Decision((), Reply(groups=tuple(groups)))


def _parse_ids(text: str) -> frozenset[int] | None:
    try:
        return frozenset(int(part) for part in text.split(";") if part.strip())
    except ValueError:
        return None


def _clean(request: CleanBrokerData, replicas: ReplicasInfo, liveness: BrokerLiveness, now_ms: int) -> Decision:
    name = request.broker_name
    ids = _parse_ids(request.broker_ids_to_clean)
    if ids is None:
        return reject(Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                      f"Please set the option <brokerControllerIdsToClean> according to the format, "
                      f"got {request.broker_ids_to_clean!r}")
    if not replicas.exists(name):
        return reject(Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                      f"Broker {name} is not existed,clean broker data failure.")
    if not request.clean_living_broker:
        cluster = replicas.sync_state_info_table[name].cluster_name
        targets = ids or frozenset(replicas.replica_info_table[name].brokers)
        living = sorted(i for i in targets if liveness.is_alive(cluster, name, i, now_ms))
        if living:
            return reject(Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                          f"Broker [{name}, {living[0]}] is still alive, clean up failure")
    return Decision((CleanBrokerDataEvent(name, ids),), Reply())
