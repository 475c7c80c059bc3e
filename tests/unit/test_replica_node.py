"""ha.role.replica_node: the effects of each role change, in order, and what may write when."""
from __future__ import annotations

import pytest

from ha.role.decisions import GroupView, Role
from ha.role.fence import PauseFence
from ha.role.replica_node import (TRANSITIONS, AdoptSet, AllowPuts, AskElection, DrainPuts, FollowRole,
                                  InvalidateDerived, Live, MakeDurable, MoveCopyEpoch, OpenEpoch, RefusePuts,
                                  ReplicaNode, StartCopying, StartMasterCore, StopCopying, StopMasterCore)
from ha.role.serving import Refusal

SELF, OTHER = 1, 2


def view(master: int | None, epoch: int, address: str = "", members=frozenset({1, 2}), set_epoch: int = 1) -> GroupView:
    return GroupView(master, address or (f"b{master}" if master else ""), epoch, set_epoch, frozenset(members))


def carry_out(node: ReplicaNode, ready) -> list:
    """A driver that does nothing but report each effect done, checking writes on the way."""
    seen = []
    for effect in ready.effects:
        seen.append((type(effect), node.write_refusal(0)))
        node.done(effect)
    return seen


def master_at(epoch: int) -> ReplicaNode:
    node = ReplicaNode(SELF, file_epoch=epoch - 1, fence=PauseFence(1000))
    carry_out(node, node.on_view(view(SELF, epoch), epoch - 1))
    return node


def slave_of(master: int, epoch: int) -> ReplicaNode:
    node = ReplicaNode(SELF, file_epoch=0, fence=PauseFence(1000))
    carry_out(node, node.on_view(view(master, epoch), 0))
    return node


def kinds(ready) -> list[type]:
    return [type(effect) for effect in ready.effects]


ORDERS = [
    # (start, view, file epoch, the effects in order)
    ("fenced", view(SELF, 3), 2,
     [StopCopying, StopMasterCore, MakeDurable, OpenEpoch, StartMasterCore, AllowPuts, FollowRole]),
    ("slave", view(SELF, 3), 2,
     [StopCopying, StopMasterCore, MakeDurable, OpenEpoch, StartMasterCore, AllowPuts, FollowRole]),
    ("fenced", view(OTHER, 3), 2, [RefusePuts, StopMasterCore, DrainPuts, StopCopying, StartCopying, FollowRole]),
    ("master", view(OTHER, 4), 3,
     [RefusePuts, StopMasterCore, DrainPuts, InvalidateDerived, StopCopying, StartCopying, FollowRole]),
    ("slave", view(OTHER, 4), 0, [RefusePuts, StopMasterCore, DrainPuts, MoveCopyEpoch, FollowRole]),
    ("slave", view(3, 4, address="b3"), 0, [RefusePuts, StopMasterCore, DrainPuts, StopCopying, StartCopying, FollowRole]),
    ("master", view(None, 4), 3, [RefusePuts, InvalidateDerived, StopMasterCore, FollowRole, AskElection]),
    ("fenced", view(None, 4), 0, [AskElection]),
    ("slave", view(None, 4), 0, [AskElection]),
    ("master", view(SELF, 3, set_epoch=2), 3, [AdoptSet]),
    ("fenced", view(SELF, 3), 3, [AskElection]),            # named at the file's epoch: renew it
    ("master", view(SELF, 5), 5, [RefusePuts, InvalidateDerived, StopMasterCore, FollowRole, AskElection]),
]


def start(kind: str) -> ReplicaNode:
    return {"fenced": lambda: ReplicaNode(SELF, 0, PauseFence(1000)), "master": lambda: master_at(3),
            "slave": lambda: slave_of(OTHER, 3)}[kind]()


@pytest.mark.parametrize("kind,the_view,file_epoch,expected", ORDERS)
def test_each_change_carries_out_its_effects_in_order(kind, the_view, file_epoch, expected):
    node = start(kind)
    ready = node.on_view(the_view, file_epoch)
    assert kinds(ready) == expected
    carry_out(node, ready)
    assert not node.in_transition


def test_a_new_master_writes_only_once_its_epoch_is_open_and_its_core_runs():
    node = ReplicaNode(SELF, 0, PauseFence(1000))
    ready = node.on_view(view(SELF, 1), 0)
    seen = carry_out(node, ready)
    before_allow = [refusal for kind, refusal in seen[:[k for k, _ in seen].index(AllowPuts) + 1]]
    assert set(before_allow) == {Refusal.IN_TRANSITION}  # checked before each effect, AllowPuts included
    assert node.write_refusal(0) is None and node.live is Live.MASTER
    assert [e.epoch for e in ready.effects if isinstance(e, OpenEpoch)] == [1]


def test_a_deposed_master_stops_writing_at_the_decision_before_any_effect_ran():
    node = master_at(3)
    assert node.write_refusal(0) is None
    ready = node.on_view(view(OTHER, 4), 3)
    assert node.write_refusal(0) is Refusal.NOT_MASTER  # before the driver did anything
    carry_out(node, ready)
    assert node.role is Role.SLAVE and node.live is Live.SLAVE


def test_a_stale_view_changes_nothing_and_a_confirming_one_lifts_the_pause_fence():
    node = master_at(3)
    node.tick(0)
    assert node.tick(5000)  # a pause: no writes until confirmed
    assert node.write_refusal(5000) is Refusal.PAUSED
    assert node.on_view(view(OTHER, 2), 3).empty  # older epoch: ignored
    assert node.write_refusal(5000) is Refusal.PAUSED
    assert node.on_view(view(SELF, 3), 3).empty   # the leader confirms
    assert node.write_refusal(5000) is None


def test_an_epoch_file_ahead_of_the_view_is_reported_and_stays_fenced():
    node = ReplicaNode(SELF, 0)
    ready = node.on_view(view(SELF, 2), 5)
    assert ready.empty and ready.log_epoch_file_ahead and node.role is Role.FENCED


def test_effects_must_be_reported_in_their_order_and_one_ready_at_a_time():
    node = ReplicaNode(SELF, 0)
    ready = node.on_view(view(SELF, 1), 0)
    with pytest.raises(AssertionError):
        node.done(ready.effects[1])
    with pytest.raises(AssertionError):
        node.on_view(view(SELF, 1), 0)


def test_every_change_a_view_can_cause_is_in_the_transition_table():
    """All pairs of start state and view, for a few epochs: the node asserts every step
    against TRANSITIONS, so a decision that breaks it fails here."""
    views = [view(master, epoch, address=address) for master in (None, SELF, OTHER, 3) for epoch in (2, 3, 4)
             for address in ("", "elsewhere")]
    for kind in ("fenced", "master", "slave"):
        for the_view in views:
            for file_epoch in (0, 2, 3):
                node = start(kind)
                was = node.role
                ready = node.on_view(the_view, max(file_epoch, node.local.file_epoch))
                carry_out(node, ready)
                assert was is node.role or (was, node.role) in TRANSITIONS


def test_outside_controller_mode_the_configured_role_is_taken_once():
    master = ReplicaNode(0, 1)
    ready = master.configure(Role.MASTER)
    assert kinds(ready) == [StartMasterCore, AllowPuts]
    carry_out(master, ready)
    assert master.write_refusal(0) is None
    slave = ReplicaNode(1, 1)
    carry_out(slave, slave.configure(Role.SLAVE))
    assert slave.role is Role.SLAVE and slave.write_refusal(0) is Refusal.NOT_MASTER
    with pytest.raises(AssertionError):
        slave.configure(Role.MASTER)
