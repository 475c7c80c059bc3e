"""SyncStateSet tracking, confirm offset rules (#6662, #6728, #5663) and the quorum decision."""
from __future__ import annotations

import pytest

from ha.replication.config import BrokerRole, HaConfig
from ha.replication.quorum import (ALL_IN_SYNC_STATE_SET, AckNow, AckWaits, PendingAck, QuorumRejection,
                                   WaitForAcks, decide_controller_mode, decide_quorum_mode)
from ha.replication.sync_state import SyncStateTracker
from metadata.config import ConfigError, bind


def tracker(members=(0, 1, 2)):
    t = SyncStateTracker(0, frozenset(members), 0, 15_000)
    for slave in members:
        if slave:
            t.slave_connected(slave, learner=False)
    return t


def test_confirm_is_the_min_ack_over_the_set_and_never_goes_back():
    t = tracker()
    t.on_ack(1, 500, 1000, 0, 1)
    assert t.confirm_offset == 0  # slave 2 has not acked yet: frozen
    t.on_ack(2, 300, 1000, 0, 2)
    assert t.confirm_offset == 300
    t.on_ack(2, 700, 1000, 0, 3)
    assert t.confirm_offset == 500
    t.on_ack(1, 200, 1000, 0, 4)  # a stale, lower ack
    assert t.confirm_offset == 500


def test_negative_and_stale_acks_are_ignored():
    t = tracker((0, 1))
    t.on_ack(1, 400, 1000, 0, 1)
    t.on_ack(1, -1, 1000, 0, 2)
    t.on_ack(1, 0, 1000, 0, 3)
    assert t.slaves[1].ack_offset == 400 and t.confirm_offset == 400


# issue 24, defect 5: an empty log acks 0, and that is an ack like any other
EMPTY_LOG_ACKS = [
    # name, set, acks (slave, offset), master max, confirm after, proposal after
    ("an empty slave joins an empty master's set", (0,), [(1, 0)], 0, 0, frozenset({0, 1})),
    ("an empty member unfreezes the confirm offset", (0, 1), [(1, 0)], 0, 0, None),
    ("no ack yet on the connection: frozen, not joined", (0,), [], 0, 0, None),
    ("an empty slave behind a master with records stays out", (0,), [(1, 0)], 500, 500, None),
    ("two empty members: the confirm offset is theirs", (0, 1, 2), [(1, 0), (2, 0)], 0, 0, None),
]


@pytest.mark.parametrize("name,members,acks,master_max,confirm,proposal", EMPTY_LOG_ACKS,
                         ids=[row[0] for row in EMPTY_LOG_ACKS])
def test_an_ack_of_an_empty_log_counts(name, members, acks, master_max, confirm, proposal):
    t = SyncStateTracker(0, frozenset(members), 0, 15_000)
    for slave in (1, 2):
        t.slave_connected(slave, learner=False)
    t.recompute_confirm(master_max)
    proposed = None
    for slave, offset in acks:
        proposed = t.on_ack(slave, offset, master_max, 0, 1) or proposed
    assert t.confirm_offset == confirm and proposed == proposal
    assert t.all_members_acked(0) == all(m in dict(acks) for m in set(members) - {0})


def test_confirm_freezes_while_a_member_is_disconnected():
    t = tracker()
    t.on_ack(1, 400, 1000, 0, 1)
    t.on_ack(2, 400, 1000, 0, 1)
    assert t.slave_disconnected(2) == frozenset({0, 1})
    assert t.sync_state_set == frozenset({0, 1, 2})  # union until the controller applies it
    t.on_ack(1, 900, 1000, 0, 2)
    assert t.confirm_offset == 400
    t.apply_sync_state_set(frozenset({0, 1}), 1000)
    assert t.confirm_offset == 900 and not t.synchronizing


def test_expand_needs_the_confirm_offset_and_the_last_epoch_start():
    t = SyncStateTracker(0, frozenset({0}), 0, 15_000)
    t.slave_connected(1, learner=False)
    t.recompute_confirm(800)  # alone in the set: confirm = master max
    assert t.on_ack(1, 100, 800, 50, 1) is None      # below confirm
    assert t.on_ack(1, 800, 1000, 900, 2) is None    # below the last epoch's start
    assert t.on_ack(1, 1000, 1000, 900, 3) == frozenset({0, 1})
    assert t.synchronizing


def test_learners_never_join_the_set():
    t = SyncStateTracker(0, frozenset({0}), 0, 15_000)
    t.slave_connected(7, learner=True)
    assert t.on_ack(7, 1000, 1000, 0, 1) is None


def test_shrink_removes_members_not_caught_up_or_never_seen():
    t = tracker()
    t.on_transfer(1, 1000, 10)
    t.on_ack(1, 1000, 1000, 0, 20)
    assert t.check_shrink(20 + 15_000) == frozenset({0, 1})  # 2 never caught up
    assert t.check_shrink(20 + 15_001) == frozenset({0})


def test_acked_replicas_counts_self_and_connections():
    t = tracker()
    t.on_ack(1, 500, 1000, 0, 1)
    assert t.acked_replicas(500, sync_state_set_only=False) == 2
    assert not t.all_members_acked(500)
    t.on_ack(2, 600, 1000, 0, 1)
    assert t.all_members_acked(500)


def cfg(**values):
    return bind(HaConfig, values, "test")


def test_async_master_acks_at_once():
    assert decide_controller_mode(cfg(), 1) == AckNow()
    assert decide_quorum_mode(cfg(), 1, 0) == AckNow()


def test_sync_master_with_too_few_in_sync_replicas_is_refused_at_once():
    config = cfg(brokerRole="SYNC_MASTER", totalReplicas=3, inSyncReplicas=2, minInSyncReplicas=2)
    assert decide_controller_mode(config, 1) is QuorumRejection.IN_SYNC_REPLICAS_NOT_ENOUGH
    assert decide_controller_mode(config, 2) == WaitForAcks(2)
    assert decide_quorum_mode(config, 3, 0) is QuorumRejection.IN_SYNC_REPLICAS_NOT_ENOUGH
    assert decide_quorum_mode(config, 3, 1) == WaitForAcks(2)


def test_auto_in_sync_replicas_lowers_the_need_down_to_the_minimum():
    config = cfg(brokerRole="SYNC_MASTER", totalReplicas=3, inSyncReplicas=3, minInSyncReplicas=1,
                 enableAutoInSyncReplicas="true")
    assert decide_quorum_mode(config, 3, 0) == AckNow()
    assert decide_quorum_mode(config, 3, 1) == WaitForAcks(2)


def test_all_ack_in_sync_state_set():
    config = cfg(brokerRole="SYNC_MASTER", totalReplicas=2, allAckInSyncStateSet="true")
    assert decide_controller_mode(config, 1) == AckNow()
    assert decide_controller_mode(config, 2) == WaitForAcks(ALL_IN_SYNC_STATE_SET)


def test_ack_waits_complete_expire_and_are_bounded():
    waits = AckWaits(limit=2)
    assert waits.add(PendingAck(1, 100, 2, 3000)) is None
    assert waits.add(PendingAck(2, 200, ALL_IN_SYNC_STATE_SET, 3000)) is None
    assert waits.add(PendingAck(3, 300, 2, 3000)) is QuorumRejection.SLAVE_NOT_AVAILABLE
    assert waits.satisfied(lambda offset: 2 if offset <= 150 else 1, lambda offset: False) == [1]
    assert waits.expire(2999) == [] and waits.expire(3000) == [2]


def test_config_refuses_impossible_replica_counts():
    with pytest.raises(ConfigError):
        cfg(totalReplicas=2, minInSyncReplicas=3)
    assert cfg(brokerRole="SLAVE").broker_role is BrokerRole.SLAVE


def test_a_slave_trailing_steady_load_by_a_batch_stays_caught_up():
    """Found by bench/repeat_tests.py (one core busy, SYNC_FLUSH slaves, 150 messages/s): every
    ack trailed the newest transfer by a batch or two, so with only the last transfer recorded
    no ack ever "reached" it, the slave counted as not caught up since it joined, and after
    haMaxTimeSlaveNotCatchup it was dropped from the set with a lag of 10 ms; the master was
    killed next and the controller had no one to elect."""
    t = SyncStateTracker(0, frozenset({0, 1}), 0, 1500, created_ms=0)
    t.slave_connected(1, learner=False)
    sent = []
    for step in range(1, 1001):  # 5 s: a transfer every 5 ms, the ack of the one two batches back
        now, master_max = step * 5, step * 1000
        t.on_transfer(1, master_max, now)
        sent.append(master_max)
        if len(sent) > 2:
            t.on_ack(1, sent[-3], master_max, 0, now)
        assert t.check_shrink(now) is None, f"dropped at {now} ms while 10 ms behind"
    assert t.slaves[1].last_caught_up_ms >= 5000 - 40


def test_a_slave_that_really_falls_behind_is_dropped_after_the_limit():
    t = SyncStateTracker(0, frozenset({0, 1}), 0, 1500, created_ms=0)
    t.slave_connected(1, learner=False)
    t.on_transfer(1, 1000, 10)
    t.on_ack(1, 1000, 1000, 0, 12)  # caught up at 12
    for step in range(1, 400):  # then its acks stay 1 s behind: transfers at t, acks of t - 1000 ms
        now = 12 + step * 10
        t.on_transfer(1, 1000 + step * 100, now)
        behind = max(0, step - 100)
        t.on_ack(1, 1000 + behind * 100, 1000 + step * 100, 0, now)
    assert t.slaves[1].last_caught_up_ms in range(12 + 299 * 10 - 30, 12 + 299 * 10 + 1)  # 1 s behind the end
    assert t.check_shrink(12 + 399 * 10 + 600) == frozenset({0})  # lag 1 s, then silence: past the 1.5 s limit
    assert len(t.slaves[1].marks) <= 64


def test_the_earliest_deadline_of_waits_added_in_order_and_out_of_order():
    waits = AckWaits(10)
    assert waits.earliest_deadline_ms() is None
    for request_id, deadline in enumerate((100, 120, 120, 150)):
        waits.add(PendingAck(request_id, 10 * request_id, 2, deadline))
    assert waits.earliest_deadline_ms() == 100
    waits.pending.pop(0)
    waits.lower_to(1)
    assert waits.earliest_deadline_ms() == 120
    waits.add(PendingAck(9, 5, 2, 90))   # a clock that went back: scanned
    assert waits.earliest_deadline_ms() == 90
    assert waits.expire(130) == [1, 2, 9]
    assert waits.earliest_deadline_ms() == 150
    waits.expire(200)
    waits.add(PendingAck(10, 5, 2, 300))
    assert waits.earliest_deadline_ms() == 300
