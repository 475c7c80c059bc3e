"""Issue 24, defect 5: a slave whose log is empty joins the SyncStateSet of an empty master.

Its first ack is offset 0, the confirm offset of an empty log (upstream expands once the
slave's offset reaches the confirm offset).  Before the fix acks of 0 were ignored: a fresh
cluster kept the set at the master alone until its first write, so the first messages were
acknowledged on one disk and a master lost before them left its group with nobody electable.
"""
from __future__ import annotations

import pytest

from ha.epochs import EpochHistory
from ha.replication.config import BrokerRole, HaConfig
from ha.replication.master_group import GroupSettings, MasterGroup, MasterLog, Proposal
from ha.replication.messages import SlaveAck, SlaveHandshake
from ha.replication.quorum import ALL_IN_SYNC_STATE_SET


def log(max_offset: int, epoch_start: int = 0) -> MasterLog:
    return MasterLog(EpochHistory.from_pairs([(1, epoch_start)]), epoch_start, max_offset, max_offset, 0)


def group(members=(1,), controller: bool = True) -> MasterGroup:
    config = HaConfig(broker_role=BrokerRole.SYNC_MASTER, total_replicas=2, all_ack_in_sync_state_set=True,
                      ha_max_time_slave_not_catchup_ms=2000, ha_send_heartbeat_interval_ms=500,
                      ha_housekeeping_interval_ms=3000)
    return MasterGroup(GroupSettings(1, controller, config, retry_ms=200), frozenset(members), 3, 0, 0)


# name, controller mode, master's max offset when the slave connects, the slave's first ack,
# the proposal it makes, the set acks use afterwards
FIRST_ACKS = [
    ("empty slave, empty master: proposed in", True, 0, 0, Proposal(frozenset({1, 2}), 3), {1, 2}),
    ("empty slave, empty master, no controller: in at once", False, 0, 0, None, {1, 2}),
    ("empty slave, master with records: waits to catch up", True, 500, 0, None, {1}),
    ("caught-up slave: proposed in, as before", True, 500, 500, Proposal(frozenset({1, 2}), 3), {1, 2}),
]


@pytest.mark.parametrize("name,controller,master_max,ack,proposal,members", FIRST_ACKS,
                         ids=[row[0] for row in FIRST_ACKS])
def test_the_first_ack_expands_the_set_when_it_reaches_the_confirm_offset(name, controller, master_max, ack,
                                                                         proposal, members):
    g = group(controller=controller)
    token, reply, _ = g.connect(SlaveHandshake(2), log(master_max), 0)
    out = g.on_ack(token, SlaveAck(ack), log(master_max), 5)
    assert out.propose == proposal
    assert g.sync_state_set == frozenset(members)


def test_a_fresh_group_acknowledges_its_first_message_on_both_replicas():
    g = group()
    token, _, _ = g.connect(SlaveHandshake(2), log(0), 0)
    g.on_ack(token, SlaveAck(0), log(0), 5)
    g.applied(frozenset({1, 2}), 4, log(0), 10)
    assert g.applied_sync_state_set == frozenset({1, 2})
    request_id, out = g.wait(100, ALL_IN_SYNC_STATE_SET, log(100), 20)
    assert request_id not in out.acked                        # the slave must hold it too
    assert g.on_ack(token, SlaveAck(100), log(100), 30).acked == (request_id,)


def test_an_idle_empty_member_is_not_shrunk_out():
    """Heartbeats to an empty member keep it caught up: the idle set stays whole."""
    g = group(members=(1, 2))
    token, _, _ = g.connect(SlaveHandshake(2), log(0), 0)
    g.on_ack(token, SlaveAck(0), log(0), 0)
    for now in range(500, 10_001, 500):
        plan = g.next_batch(token, log(0), now)
        if plan is not None and not hasattr(plan, "close"):
            g.sent(token, plan, b"", (), log(0), now)
        g.on_ack(token, SlaveAck(0), log(0), now)
        assert g.tick(log(0), now).propose is None, now
    assert g.sync_state_set == frozenset({1, 2})


def test_a_connection_that_has_not_acked_yet_freezes_the_confirm_offset():
    """#6728 still holds: no ack on a member's connection (-1) is not an ack of 0."""
    g = group(members=(1, 2))
    g.connect(SlaveHandshake(2), log(0), 0)
    assert g.tracker.slaves[2].ack_offset == -1
    assert g.tracker.recompute_confirm(300) == 0
