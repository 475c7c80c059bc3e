"""Transcript-style unit tests of the controller state machine (reference 4.2-4.4)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from ha.controller.codes import ResponseCode as Code
from ha.controller.commands import decide
from ha.controller.events import (AlterSyncStateSetEvent, ApplyBrokerIdEvent, CleanBrokerDataEvent,
                                  CorruptEntry, ElectMasterEvent, UpdateBrokerAddressEvent, decode_event,
                                  encode_event)
from ha.controller.liveness import BrokerLiveness, Heartbeat
from ha.controller.replicas import ReplicasInfo
from ha.controller.requests import (AlterSyncStateSet, ApplyBrokerId, CleanBrokerData, ElectMaster,
                                    GetNextBrokerId, GetReplicaInfo, GetSyncStateData, RegisterBroker)
from ha.controller.scan import elections_needed

C, B = "DefaultCluster", "broker-a"
NOW = 1_000_000


class World:
    """One controller node's tables and liveness, applying what it decides."""

    def __init__(self, unclean: bool = False):
        self.replicas = ReplicasInfo()
        self.liveness = BrokerLiveness(default_timeout_ms=10_000, max_brokers=100)
        self.unclean = unclean
        self.now = NOW

    def do(self, request):
        decision = decide(request, self.replicas, self.liveness, self.now, self.unclean)
        for event in decision.events:
            self.replicas.apply(decode_event(encode_event(event)))
        return decision

    def beat(self, broker_id, epoch=0, offset=0, priority=2**31 - 1, name=B):
        self.liveness.heartbeat(Heartbeat(C, name, broker_id, f"10.0.0.{broker_id}:10911", epoch, offset, 0, 0,
                                          priority), self.now)

    def join(self, broker_id, name=B):
        code = f"10.0.0.{broker_id}:10911;{broker_id}"
        assert self.do(GetNextBrokerId(C, name)).reply.next_broker_id == broker_id
        assert self.do(ApplyBrokerId(C, name, broker_id, code)).reply.ok
        assert self.do(RegisterBroker(C, name, broker_id, f"10.0.0.{broker_id}:10911")).reply.ok
        self.beat(broker_id)

    def state(self, name=B):
        return self.replicas.sync_state_info_table[name]


def group_of_three() -> World:
    world = World()
    for i in (1, 2, 3):
        world.join(i)
    assert world.do(ElectMaster(C, B, 1)).reply.ok
    assert world.do(AlterSyncStateSet(B, 1, 1, frozenset({1, 2, 3}), 1)).reply.ok
    return world


def test_broker_ids_start_at_one_and_are_never_reused():
    world = World()
    for i in (1, 2, 3):
        world.join(i)
    assert world.do(GetNextBrokerId(C, B)).reply.next_broker_id == 4
    assert world.do(CleanBrokerData(C, B, "3", clean_living_broker=True)).reply.ok
    assert world.do(GetNextBrokerId(C, B)).reply.next_broker_id == 4
    assert world.do(ApplyBrokerId(C, B, 3, "10.0.0.9:1;9")).reply.code == Code.CONTROLLER_BROKER_ID_INVALID


def test_apply_broker_id_rules():
    world = World()
    assert world.do(ApplyBrokerId(C, B, 2, "a:1;1")).reply.code == Code.CONTROLLER_BROKER_ID_INVALID
    assert world.do(ApplyBrokerId(C, B, 1, "a:1;1")).reply.ok
    assert world.replicas.replica_info_table[B].brokers[1].address == "a:1"
    assert world.do(ApplyBrokerId(C, B, 1, "a:1;1")).reply.ok  # idempotent retry, same check code
    assert world.do(ApplyBrokerId(C, B, 1, "b:1;2")).reply.code == Code.CONTROLLER_BROKER_ID_INVALID
    assert world.replicas.replica_info_table[B].next_assign_broker_id == 2


def test_register_unknown_needs_registration_and_address_change_is_an_event():
    world = World()
    assert world.do(RegisterBroker(C, B, 1, "x:1")).reply.code == Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    world.join(1)
    decision = world.do(RegisterBroker(C, B, 1, "10.9.9.9:1"))
    assert decision.events == (UpdateBrokerAddressEvent(C, B, "10.9.9.9:1", 1),)
    assert world.replicas.replica_info_table[B].brokers[1].register_check_code == "10.0.0.1:10911;1"


def test_register_reports_master_only_when_alive():
    world = group_of_three()
    assert world.do(RegisterBroker(C, B, 2, "10.0.0.2:10911")).reply.view.master_broker_id == 1
    world.now += 20_000
    world.beat(2)
    view = world.do(RegisterBroker(C, B, 2, "10.0.0.2:10911")).reply.view
    assert view.master_broker_id is None and view.master_epoch == 1


def test_first_election_first_caller_wins_without_alive_check():
    world = World()
    world.join(1)
    world.join(2)
    world.now += 60_000  # nobody alive
    reply = world.do(ElectMaster(C, B, 2)).reply
    assert reply.ok and reply.view.master_broker_id == 2 and reply.view.master_epoch == 1
    assert reply.view.sync_state_set == {2} and reply.view.sync_state_set_epoch == 1
    assert dict(reply.view.members) == {1: "10.0.0.1:10911", 2: "10.0.0.2:10911"}


def test_elect_unknown_set_and_master_still_exists():
    world = group_of_three()
    assert world.do(ElectMaster(C, "nope", 1)).reply.code == Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    reply = world.do(ElectMaster(C, B, 2)).reply
    assert reply.code == Code.CONTROLLER_MASTER_STILL_EXIST and reply.view.master_broker_id == 1
    assert world.state().master_epoch == 1


def test_the_recorded_master_renews_its_epoch_with_the_set_reset_to_itself():
    """A master that must not resume its epoch (ha.role.decisions: a restart, or an old view
    after stepping down) is elected again at epoch + 1, alone in the SyncStateSet."""
    world = group_of_three()
    assert world.state().master_epoch == 1 and world.state().sync_state_set == {1, 2, 3}
    decision = world.do(ElectMaster(C, B, 1, renew_master_epoch=1))
    assert decision.events == (ElectMasterEvent(True, B, 1),)
    view = decision.reply.view
    assert decision.reply.ok and view.master_broker_id == 1 and view.master_epoch == 2
    assert view.sync_state_set == {1} and view.sync_state_set_epoch == 3
    assert world.state().master_epoch == 2 and world.state().sync_state_set == {1}


@pytest.mark.parametrize("name, request_, code, master, epoch", [
    ("a repeated renewal (the first one's reply was lost): no second bump, the current view",
     ElectMaster(C, B, 1, renew_master_epoch=1), Code.CONTROLLER_FENCED_MASTER_EPOCH, 1, 2),
    ("another broker asks to renew the master's epoch", ElectMaster(C, B, 2, renew_master_epoch=2),
     Code.CONTROLLER_INVALID_MASTER, 1, 2),
    ("a renewal of an epoch the controller never reached", ElectMaster(C, B, 1, renew_master_epoch=7),
     Code.CONTROLLER_FENCED_MASTER_EPOCH, 1, 2),
])
def test_a_renewal_is_refused_with_the_current_view_unless_it_is_the_masters_epoch(name, request_, code, master,
                                                                                  epoch):
    world = group_of_three()
    assert world.do(ElectMaster(C, B, 1, renew_master_epoch=1)).reply.ok
    decision = world.do(request_)
    assert decision.events == () and decision.reply.code == code, name
    assert decision.reply.view.master_broker_id == master and decision.reply.view.master_epoch == epoch
    assert world.state().master_epoch == 2


def test_a_renewal_with_no_master_recorded_is_refused():
    world = group_of_three()
    world.now += 11_000
    assert world.do(ElectMaster(C, B)).events == (ElectMasterEvent(False, B),)
    decision = world.do(ElectMaster(C, B, 1, renew_master_epoch=2))
    assert decision.events == () and decision.reply.code == Code.CONTROLLER_INVALID_MASTER
    assert decision.reply.view.master_broker_id is None


def test_policy_epoch_beats_offset_then_offset_then_priority():
    world = group_of_three()
    world.now += 11_000
    world.beat(2, epoch=1, offset=2)
    world.beat(3, epoch=0, offset=3)
    assert world.do(ElectMaster(C, B)).reply.view.master_broker_id == 2
    world = group_of_three()
    world.now += 11_000
    world.beat(2, epoch=1, offset=2)
    world.beat(3, epoch=1, offset=3)
    assert world.do(ElectMaster(C, B)).reply.view.master_broker_id == 3
    world = group_of_three()
    world.now += 11_000
    world.beat(2, epoch=1, offset=3, priority=5)
    world.beat(3, epoch=1, offset=3, priority=1)
    assert world.do(ElectMaster(C, B)).reply.view.master_broker_id == 3


def test_admin_designated_election_and_unavailable_prefer():
    world = group_of_three()
    reply = world.do(ElectMaster(C, B, 3, designate_elect=True)).reply
    assert reply.ok and reply.view.master_broker_id == 3 and world.state().master_epoch == 2
    world.do(AlterSyncStateSet(B, 3, 2, frozenset({1, 3}), 3))
    assert world.do(ElectMaster(C, B, 2, designate_elect=True)).reply.code == Code.CONTROLLER_ELECT_MASTER_FAILED


def test_no_candidate_controller_trigger_clears_master_broker_trigger_fails():
    world = group_of_three()
    world.now += 11_000
    world.beat(2)  # alive but... set SSS without 2 first
    world = group_of_three()
    assert world.do(AlterSyncStateSet(B, 1, 1, frozenset({1}), 2)).reply.ok
    world.now += 11_000
    world.beat(2)
    assert world.do(ElectMaster(C, B, 2)).reply.code == Code.CONTROLLER_ELECT_MASTER_FAILED
    assert world.state().master_epoch == 1
    decision = world.do(ElectMaster(C, B))
    assert decision.reply.code == Code.CONTROLLER_MASTER_NOT_AVAILABLE
    assert decision.events == (ElectMasterEvent(False, B),)
    assert world.state().master_broker_id is None and world.state().master_epoch == 2
    again = world.do(ElectMaster(C, B))  # nothing more to clear: no epoch churn
    assert again.reply.code == Code.CONTROLLER_MASTER_NOT_AVAILABLE and again.events == ()


def test_unclean_election_only_when_enabled():
    world = group_of_three()
    world.unclean = True
    assert world.do(AlterSyncStateSet(B, 1, 1, frozenset({1}), 2)).reply.ok
    world.now += 11_000
    world.beat(2)
    reply = world.do(ElectMaster(C, B)).reply
    assert reply.ok and reply.view.master_broker_id == 2


@pytest.mark.parametrize("request_, code", [
    (AlterSyncStateSet("nope", 1, 1, frozenset({1}), 2), Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
    (AlterSyncStateSet(B, 1, 1, frozenset({1, 2, 3}), 2), Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
    (AlterSyncStateSet(B, 2, 1, frozenset({1, 2}), 2), Code.CONTROLLER_INVALID_MASTER),
    (AlterSyncStateSet(B, 1, 0, frozenset({1, 2}), 2), Code.CONTROLLER_FENCED_MASTER_EPOCH),
    (AlterSyncStateSet(B, 1, 1, frozenset({1, 2}), 1), Code.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
    (AlterSyncStateSet(B, 1, 1, frozenset({1, 7}), 2), Code.CONTROLLER_INVALID_REPLICAS),
    (AlterSyncStateSet(B, 1, 1, frozenset({2, 3}), 2), Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
])
def test_alter_sync_state_set_checks_in_order(request_, code):
    world = group_of_three()
    before = world.replicas.snapshot()
    decision = world.do(request_)
    assert decision.reply.code == code and decision.events == ()
    assert world.replicas.snapshot() == before


def test_alter_rejects_dead_replica_and_accepts_alive():
    world = group_of_three()
    assert world.do(AlterSyncStateSet(B, 1, 1, frozenset({1}), 2)).reply.ok
    world.now += 11_000
    world.beat(1)
    assert world.do(AlterSyncStateSet(B, 1, 1, frozenset({1, 2}), 3)).reply.code == Code.CONTROLLER_BROKER_NOT_ALIVE
    world.beat(2)
    reply = world.do(AlterSyncStateSet(B, 1, 1, frozenset({1, 2}), 3)).reply
    assert reply.ok and reply.view.sync_state_set_epoch == 4 and world.state().sync_state_set == {1, 2}


def test_replica_info_and_sync_state_data():
    world = group_of_three()
    assert world.do(GetReplicaInfo("x")).reply.code == Code.CONTROLLER_BROKER_METADATA_NOT_EXIST
    view = world.do(GetReplicaInfo(B)).reply.view
    assert (view.master_broker_id, view.master_address, view.master_epoch) == (1, "10.0.0.1:10911", 1)
    world.now += 11_000
    world.beat(1)
    (group,) = world.do(GetSyncStateData((B, "unknown"))).reply.groups
    assert [(r.broker_id, r.alive, r.in_sync) for r in group.replicas] == [(1, True, True), (2, False, True),
                                                                           (3, False, True)]


def test_clean_broker_data_rules():
    world = group_of_three()
    assert world.do(CleanBrokerData(C, "x")).reply.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert world.do(CleanBrokerData(C, B, "1;x")).reply.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert world.do(CleanBrokerData(C, B, "2")).reply.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert world.do(CleanBrokerData(C, B)).reply.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert world.do(CleanBrokerData(C, B, "2;3", clean_living_broker=True)).reply.ok
    assert set(world.replicas.replica_info_table[B].brokers) == {1} and world.state().sync_state_set == {1}
    world.now += 11_000
    assert world.do(CleanBrokerData(C, B)).reply.ok
    assert not world.replicas.exists(B)


def test_cleaning_the_master_clears_it_with_an_epoch_bump():
    world = group_of_three()
    assert world.do(CleanBrokerData(C, B, "1", clean_living_broker=True)).reply.ok
    assert world.state().master_broker_id is None and world.state().master_epoch == 2


def test_liveness_keeps_the_best_epoch_and_offset():
    live = BrokerLiveness(10_000, 10)
    live.heartbeat(Heartbeat(C, B, 1, "a", epoch=2, max_offset=100), 0)
    live.heartbeat(Heartbeat(C, B, 1, "a", epoch=1, max_offset=900), 5)
    info = live.info(C, B, 1)
    assert (info.epoch, info.max_offset, info.last_update_ms) == (2, 100, 5)
    assert live.is_alive(C, B, 1, 10_005) and not live.is_alive(C, B, 1, 10_006)
    assert [i.broker_id for i in live.expire(10_006)] == [1] and len(live) == 0


def test_liveness_is_bounded():
    live = BrokerLiveness(10_000, 1)
    assert live.heartbeat(Heartbeat(C, B, 1, "a"), 0)
    assert not live.heartbeat(Heartbeat(C, B, 2, "b"), 0)


def test_new_leader_waits_one_heartbeat_timeout_then_elects_for_dead_masters():
    world = group_of_three()
    fresh = BrokerLiveness(10_000, 100)  # a new leader knows nobody yet
    fresh.became_leader(world.now)
    assert elections_needed(world.replicas, fresh, world.now) == []
    assert elections_needed(world.replicas, fresh, world.now + 9_999) == []
    fresh.heartbeat(Heartbeat(C, B, 2, "10.0.0.2:10911"), world.now + 5_000)
    assert elections_needed(world.replicas, fresh, world.now + 10_000) == [ElectMaster(C, B)]
    fresh.heartbeat(Heartbeat(C, B, 1, "10.0.0.1:10911"), world.now + 10_000)
    assert elections_needed(world.replicas, fresh, world.now + 10_000) == []
    fresh.stepped_down()
    assert elections_needed(world.replicas, World().liveness, world.now) == []


def test_snapshot_round_trip():
    world = group_of_three()
    restored = ReplicasInfo.restore(world.replicas.snapshot())
    assert restored.snapshot() == world.replicas.snapshot()
    assert restored.replica_info_table == world.replicas.replica_info_table
    assert restored.sync_state_info_table == world.replicas.sync_state_info_table
    assert ReplicasInfo.restore(b"").snapshot() == ReplicasInfo().snapshot()


@given(st.sampled_from([
    AlterSyncStateSetEvent(B, frozenset({1, 2})), ApplyBrokerIdEvent(C, B, "a:1", 3, "a:1;5"),
    ElectMasterEvent(True, B, 2), ElectMasterEvent(False, B), CleanBrokerDataEvent(B, frozenset({1})),
    CleanBrokerDataEvent(B), UpdateBrokerAddressEvent(C, B, "b:2", 1)]))
def test_event_encoding_round_trips(event):
    data = encode_event(event)
    assert data[:2] in {b"\x00\x01", b"\x00\x02", b"\x00\x03", b"\x00\x05", b"\x00\x06"}
    assert decode_event(data) == event


def test_corrupt_entries_are_reported():
    for data in (b"\x00", b"\x00\x09{}", b"\x00\x01not json", b"\x00\x01{}"):
        with pytest.raises(CorruptEntry):
            decode_event(data)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["apply", "elect", "alter", "clean", "beat", "wait"]),
                          st.integers(1, 4), st.frozensets(st.integers(1, 4), max_size=4)), max_size=40))
def test_epochs_never_go_back_and_ids_never_reused(steps):
    world = World()
    epochs, assigned = {}, set()
    for kind, broker_id, members in steps:
        if kind == "apply":
            world.do(ApplyBrokerId(C, B, broker_id, f"h:{broker_id};1"))
        elif kind == "elect":
            world.do(ElectMaster(C, B, broker_id if broker_id < 4 else None))
        elif kind == "alter" and world.replicas.exists(B):
            s = world.state()
            world.do(AlterSyncStateSet(B, s.master_broker_id or 0, s.master_epoch, members, s.sync_state_set_epoch))
        elif kind == "clean":
            world.do(CleanBrokerData(C, B, str(broker_id), clean_living_broker=True))
        elif kind == "beat":
            world.beat(broker_id)
        else:
            world.now += 6_000
        if world.replicas.exists(B):
            s = world.state()
            old = epochs.get(B, (0, 0))
            assert (s.master_epoch, s.sync_state_set_epoch) >= old and s.master_epoch >= old[0]
            assert s.sync_state_set_epoch >= old[1]
            epochs[B] = (s.master_epoch, s.sync_state_set_epoch)
            ids = set(world.replicas.replica_info_table[B].brokers)
            assert world.replicas.replica_info_table[B].next_assign_broker_id > max(ids | assigned | {0})
            assigned |= ids
