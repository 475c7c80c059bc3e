"""The master's replica group core (ha.replication.master_group): one rule for the SyncStateSet,
the put waits, the confirm offset and the deadlines, without sockets or clocks."""
from __future__ import annotations

import pytest

from ha.epochs import EpochHistory
from ha.replication.config import BrokerRole, HaConfig
from ha.replication.master_group import GroupSettings, MasterGroup, MasterLog, Proposal
from ha.replication.messages import SlaveAck, SlaveHandshake
from ha.replication.quorum import ALL_IN_SYNC_STATE_SET, AckNow, QuorumRejection, WaitForAcks

EPOCHS = EpochHistory.from_pairs([(1, 0)])


def log(max_offset: int, durable: int | None = None) -> MasterLog:
    return MasterLog(EPOCHS, 0, max_offset, max_offset if durable is None else durable, 0)


def group(controller: bool = False, members=(1,), self_id: int = 1, now: int = 0, **ha) -> MasterGroup:
    config = HaConfig(broker_role=BrokerRole.SYNC_MASTER, total_replicas=3, ha_max_time_slave_not_catchup_ms=1000,
                      ha_send_heartbeat_interval_ms=500, ha_housekeeping_interval_ms=2000, slave_timeout_ms=300,
                      **ha)
    return MasterGroup(GroupSettings(self_id, controller, config, retry_ms=200), frozenset(members), 3, 0, now)


def connect(g: MasterGroup, slave_id: int, at: int, now: int = 0, master_max: int | None = None) -> int:
    """A slave holding ``at`` connects while the master holds ``master_max`` (default ``at``)."""
    master = log(at if master_max is None else master_max)
    token, reply, _ = g.connect(SlaveHandshake(slave_id), master, now)
    g.on_ack(token, SlaveAck(reply.min_offset if at == 0 else at), master, now)  # first ack: resume point
    return token


def test_local_mode_applies_an_expansion_at_once_and_confirms_by_the_slowest_member():
    g = group(controller=False, members=(1,))
    token = connect(g, 2, 0)
    out = g.on_ack(token, SlaveAck(1000), log(1000), 10)
    assert out.propose is None and g.applied_sync_state_set == frozenset({1, 2})
    assert g.tracker.confirm_offset == 1000
    assert g.visible_offset(log(1500)) == 1000      # the set has another member: its ack bounds reads


def test_controller_mode_proposes_and_uses_the_union_until_applied():
    g = group(controller=True, members=(1,), all_ack_in_sync_state_set=True)
    token = connect(g, 2, 0, master_max=1000)
    out = g.on_ack(token, SlaveAck(1000), log(1000), 10)
    assert out.propose == Proposal(frozenset({1, 2}), 3)
    assert g.sync_state_set == frozenset({1, 2}) and g.applied_sync_state_set == frozenset({1})
    assert g.decide_put(log(1000)) == WaitForAcks(ALL_IN_SYNC_STATE_SET)   # #5663: the union counts
    out = g.applied(frozenset({1, 2}), 4, log(1000), 20)
    assert g.applied_sync_state_set == frozenset({1, 2}) and g.sync_state_set_epoch == 4
    assert g.applied(frozenset({1}), 4, log(1000), 30).propose is None     # an old reply: ignored
    assert g.applied_sync_state_set == frozenset({1, 2})


def test_a_disconnected_member_is_proposed_out_and_still_needed_until_the_controller_agrees():
    g = group(controller=True, members=(1, 2), all_ack_in_sync_state_set=True)
    token = connect(g, 2, 1000)
    request_id, _ = g.wait(1200, ALL_IN_SYNC_STATE_SET, log(1200), 10)
    out = g.disconnected(token, log(1200), 20)
    assert out.propose == Proposal(frozenset({1}), 3)
    assert request_id not in g.log_grew(log(1200), 25).acked          # slave 2 may still be elected
    out = g.applied(frozenset({1}), 4, log(1200), 30)
    assert out.acked == (request_id,)                                   # the set is {1}: self holds it


def test_a_refused_proposal_is_made_again_after_the_retry_interval():
    g = group(controller=True, members=(1, 2))
    token = connect(g, 2, 1000)
    assert g.disconnected(token, log(1000), 0).propose is not None
    assert g.refused(5).propose is None
    assert g.next_deadline_ms() == 205
    assert g.tick(log(1000), 100).propose is None
    assert g.tick(log(1000), 205).propose == Proposal(frozenset({1}), 3)


@pytest.mark.parametrize("need, acks, durable, done", [
    (2, {2: 1000}, 1000, True),
    (2, {2: 1000}, 500, False),            # the master itself holds only 500 durably
    (3, {2: 1000, 3: 999}, 1000, False),
    (3, {2: 1000, 3: 1000}, 1000, True),
    (ALL_IN_SYNC_STATE_SET, {2: 1000}, 1000, False),   # member 3 has not acked
    (ALL_IN_SYNC_STATE_SET, {2: 1000, 3: 1200}, 1000, True),
])
def test_put_waits_count_the_master_only_for_what_it_holds_durably(need, acks, durable, done):
    g = group(controller=True, members=(1, 2, 3))
    tokens = {slave: connect(g, slave, 0) for slave in (2, 3)}
    request_id, _ = g.wait(1000, need, log(1300, durable), 0)
    acked = ()
    for slave, offset in acks.items():
        acked += g.on_ack(tokens[slave], SlaveAck(offset), log(1300, durable), 1).acked
    assert (request_id in acked) is done


@pytest.mark.parametrize("auto, acked", [(True, True), (False, False)], ids=["auto-in-sync", "fixed-in-sync"])
def test_a_put_waiting_on_a_slave_that_disconnects_is_re_decided_by_rip34(auto, acked):
    """Issue 24 defect 3: a put made just before its slave died (its container was killed)
    waited the whole slaveTimeout and failed although enableAutoInSyncReplicas acknowledged
    every later put alone: a receive's pop record failed, and the messages it had popped stayed
    invisible for 60 s.  With the degrade, the waiting put is acknowledged at the disconnect."""
    g = group(controller=False, members=(1, 2), in_sync_replicas=2, min_in_sync_replicas=1,
              enable_auto_in_sync_replicas=auto)
    token = connect(g, 2, 1000)
    assert g.decide_put(log(1200)) == WaitForAcks(2)
    request_id, out = g.wait(1200, 2, log(1200), 10)
    assert out.acked == ()
    out = g.disconnected(token, log(1200), 20)
    assert (request_id in out.acked) is acked
    assert (request_id in g.waits.pending) is not acked  # fixed: it still needs the slave, and times out


def test_waits_time_out_at_slave_timeout_and_are_bounded():
    g = group(controller=True, members=(1, 2), ha_max_pending_acks=1)
    request_id, _ = g.wait(1000, 2, log(1000), 100)
    assert g.wait(1100, 2, log(1100), 100) is QuorumRejection.SLAVE_NOT_AVAILABLE
    assert g.next_deadline_ms() <= 400
    assert g.tick(log(1000), 399).timed_out == ()
    assert g.tick(log(1000), 400).timed_out == (request_id,)


def test_a_member_not_caught_up_for_the_limit_is_proposed_out_at_its_deadline():
    g = group(controller=True, members=(1, 2))
    token = connect(g, 2, 0)
    plan = g.next_batch(token, log(1000), 0)
    g.sent(token, plan, b"x" * plan.max_bytes, (), log(1000), 0)
    g.on_ack(token, SlaveAck(1000), log(1000), 0)            # caught up at 0
    assert g.tick(log(1000), 500).propose is None            # on time: the driver ticks at each deadline
    assert g.tick(log(1000), 1000).propose is None
    assert g.next_deadline_ms() <= 1001
    assert g.tick(log(2000), 1001).propose == Proposal(frozenset({1}), 3)


def test_a_restarted_master_gives_its_members_the_limit_to_connect():
    g = group(controller=True, members=(1, 2), now=5000)
    assert g.tick(log(0), 5500).propose is None
    assert g.tick(log(0), 6001).propose == Proposal(frozenset({1}), 3)


def test_a_newer_connection_of_a_slave_replaces_the_older():
    g = group()
    first = connect(g, 2, 0)
    second, _, out = g.connect(SlaveHandshake(2), log(0), 5)
    assert out.close == ((first, "REPLACED"),)
    assert g.disconnected(first, log(0), 6).propose is None and g.slave_id_of(second) == 2


def test_idle_connections_are_woken_for_heartbeats():
    g = group()
    token = connect(g, 2, 0)
    assert g.next_deadline_ms() == 500
    assert token in g.tick(log(0), 500).wake


def test_controller_mode_put_decisions_follow_the_set_size():
    g = group(controller=True, members=(1,), all_ack_in_sync_state_set=True, min_in_sync_replicas=1)
    assert g.decide_put(log(0)) == AckNow()
    g2 = group(controller=True, members=(1,), min_in_sync_replicas=2)
    assert g2.decide_put(log(0)) is QuorumRejection.IN_SYNC_REPLICAS_NOT_ENOUGH


def test_a_replaced_proposal_whose_reply_was_lost_stays_in_the_union():
    """Simulation finding: the expansion {1,2} was applied but its reply lost (refused here); a
    shrink then replaced it; the master must keep counting 2 until the controller's set is known."""
    g = group(controller=True, members=(1,), all_ack_in_sync_state_set=True)
    token = connect(g, 2, 0, master_max=1000)
    assert g.on_ack(token, SlaveAck(1000), log(1000), 10).propose == Proposal(frozenset({1, 2}), 3)
    g.refused(20)                                    # no answer: the controller may have applied it
    g.disconnected(token, log(1000), 30)             # the shrink replaces the proposal
    assert g.sync_state_set == frozenset({1, 2})
    assert g.decide_put(log(1000)) == WaitForAcks(ALL_IN_SYNC_STATE_SET)
    request_id, out = g.wait(1100, ALL_IN_SYNC_STATE_SET, log(1100), 40)
    assert request_id not in out.acked              # 2 is away: nothing is acknowledged alone
    g.applied(frozenset({1}), 5, log(1100), 50)      # the controller's set is known again
    assert g.sync_state_set == frozenset({1})


def test_alone_in_the_set_slaves_are_told_only_the_durable_offset():
    """Simulation finding: the confirm offset a master alone ships is its durable offset, not
    bytes it has written but not fdatasynced (a power loss takes those back)."""
    g = group(controller=True, members=(1,))
    assert g.visible_offset(log(1500, durable=1200)) == 1200


def test_the_confirm_offset_follows_the_masters_flush_before_a_slave_may_join():
    """Simulation finding: the confirm offset stood where the last slave ack left it (below the
    master's then durable offset) while puts were acknowledged beyond it, and a slave holding
    less than those puts joined the set."""
    g = group(controller=True, members=(1, 2), all_ack_in_sync_state_set=True)
    token2 = connect(g, 2, 1000)
    g.on_ack(token2, SlaveAck(1500), log(1500, durable=1200), 10)   # the slave's flush won the race
    assert g.tracker.confirm_offset == 1200
    _, out = g.wait(1500, ALL_IN_SYNC_STATE_SET, log(1500), 20)    # now the master's flush is done
    assert out.acked and g.tracker.confirm_offset == 1500 and out.confirm_offset == 1500
    token3 = connect(g, 3, 1300)
    assert g.on_ack(token3, SlaveAck(1400), log(1500), 30).propose is None   # behind an acknowledged put
    assert g.on_ack(token3, SlaveAck(1500), log(1500), 40).propose == Proposal(frozenset({1, 2, 3}), 3)


def test_a_proposal_still_pending_when_another_set_is_applied_keeps_the_confirm_offset_down():
    """Simulation finding (seed 8827): {1,3} was applied while {1,2,3} was still proposed; the
    confirm offset was recomputed over {1,3} alone, passed slave 2's ack, consumers read past
    it, and the controller then applied {1,2,3} and later elected 2, which lacked those bytes."""
    g = group(controller=True, members=(1,), all_ack_in_sync_state_set=True)
    token2, token3 = connect(g, 2, 0, master_max=1000), connect(g, 3, 0, master_max=1000)
    assert g.on_ack(token3, SlaveAck(1000), log(1000), 10).propose == Proposal(frozenset({1, 3}), 3)
    g.on_ack(token2, SlaveAck(1000), log(1000), 11)                               # {1,2,3} waits
    assert g.tracker.proposed == frozenset({1, 2, 3})
    g.on_ack(token3, SlaveAck(1500), log(1500), 12)                               # 2 stays at 1000
    out = g.applied(frozenset({1, 3}), 4, log(1500), 20)
    assert out.propose == Proposal(frozenset({1, 2, 3}), 4)                       # its own round now
    assert g.sync_state_set == frozenset({1, 2, 3})
    assert g.tracker.confirm_offset == 1000 and g.visible_offset(log(1500)) == 1000


# The rejoin race of issue 24 (defect 8): SyncStateSet [1, 2], [2], [1, 2] within 40 ms.  Slave 1
# joins, its connection drops and comes back while the expansion is in flight: the drop made a
# shrink wait behind it, and the controller's reply then sent that shrink, decided against the
# older set, although slave 1 was connected again.  Each row: a step, the proposal it sends
# (None: none) and the set acks use afterwards.
REJOIN = [
    ("ack", 5000, 60_000, Proposal(frozenset({1, 2}), 3), {1, 2}),      # expand: in flight
    ("drop", None, 60_005, None, {1, 2}),                               # a shrink waits behind it
    ("connect", None, 60_010, None, {1, 2}),                            # slave 1 is back
    ("applied", ({1, 2}, 4), 60_020, None, {1, 2}),                     # the old shrink is not sent
    ("ack", 5000, 60_030, None, {1, 2}),
    ("tick", None, 60_040, None, {1, 2}),
]
STILL_GONE = [
    ("ack", 5000, 60_000, Proposal(frozenset({1, 2}), 3), {1, 2}),
    ("drop", None, 60_005, None, {1, 2}),
    ("applied", ({1, 2}, 4), 60_020, Proposal(frozenset({2}), 4), {1, 2}),  # gone: the shrink goes out
]


@pytest.mark.parametrize("steps", [REJOIN, STILL_GONE], ids=["rejoined", "still-gone"])
def test_a_shrink_decided_before_an_expansion_is_applied_only_if_it_still_holds(steps):
    g = group(controller=True, members=(2,), self_id=2)
    token, _, _ = g.connect(SlaveHandshake(1), log(5000), 59_990)
    for step, argument, now, proposal, members in steps:
        if step == "ack":
            out = g.on_ack(token, SlaveAck(argument), log(5000), now)
        elif step == "drop":
            out = g.disconnected(token, log(5000), now)
        elif step == "connect":
            token, _, out = g.connect(SlaveHandshake(1), log(5000), now)
        elif step == "tick":
            out = g.tick(log(5000), now)
        else:
            out = g.applied(frozenset(argument[0]), argument[1], log(5000), now)
        assert (out.propose, g.sync_state_set) == (proposal, frozenset(members)), (step, now)


def test_a_moved_confirm_offset_reaches_an_idle_slave_soon_not_a_heartbeat_later():
    """The last batch of a burst carries the confirm offset from before its own ack: without news
    an idle slave's readers and checkpoint lagged until the next heartbeat (haSendHeartbeatInterval,
    5 s by default; the gone-member test read a slave confirm offset of 0 when its slave stopped)."""
    g = group(members=(1, 2))
    token = connect(g, 2, 0)
    plan = g.next_batch(token, log(1000), 0)
    assert g.sent(token, plan, b"x" * 1000, (), log(1000), 0).confirm_offset == 0
    out = g.on_ack(token, SlaveAck(1000), log(1000), 10)
    assert out.confirm_offset == 1000
    assert g.next_batch(token, log(1000), 10) is None                   # not at once: a batch may carry it
    assert g.next_deadline_ms() == 30
    assert token in g.tick(log(1000), 30).wake
    news = g.next_batch(token, log(1000), 30)
    assert news.max_bytes == 0
    assert g.sent(token, news, b"", (), log(1000), 30).confirm_offset == 1000
    assert g.next_batch(token, log(1000), 31) is None and g.next_deadline_ms() >= 500   # then heartbeats


def test_confirm_news_is_not_sent_when_a_batch_carried_it_and_is_due_once():
    g = group(members=(1, 2))
    token = connect(g, 2, 0)
    g.sent(token, g.next_batch(token, log(1000), 0), b"x" * 1000, (), log(1000), 0)
    g.on_ack(token, SlaveAck(1000), log(1000), 10)                      # news due at 30
    batch = g.sent(token, g.next_batch(token, log(1500), 15), b"x" * 500, (), log(1500), 15)
    assert batch.confirm_offset == 1000                                 # the batch carried it
    assert g.next_deadline_ms() >= 500 and token not in g.tick(log(1500), 30).wake
    g.on_ack(token, SlaveAck(1500), log(1500), 40)                      # news due at 60
    assert token in g.tick(log(1500), 60).wake
    # the stream is busy (a send blocked): the news stays due, but the tick does not wake it again
    assert token not in g.tick(log(1500), 61).wake and g.next_deadline_ms() >= 500
    assert g.next_batch(token, log(1500), 70).max_bytes == 0


@pytest.mark.parametrize("coalesce, acked, written, now, sends", [
    (1000, 100, 300, 10, False),    # the batch [100, 200) is not acked: the 100 bytes since wait for its ack
    (1000, 200, 300, 10, True),     # acked: what waited goes as one batch
    (1000, 150, 300, 10, False),    # a part acked (a keepalive ack while the slave syncs) is not the batch
    (100, 100, 300, 10, True),      # as many bytes ready as haCoalesceBytes: no wait
    (101, 100, 300, 10, False),
    (1000, 100, 300, 499, False),   # a heartbeat interval (500 ms) after the last send at most
    (1000, 100, 300, 500, True),
    (0, 100, 300, 10, True),        # 0: every write goes at once
])
def test_a_write_waits_for_the_ack_of_the_batch_before_it(coalesce, acked, written, now, sends):
    g = group(members=(1, 2), ha_coalesce_bytes=coalesce)
    token = connect(g, 2, 100)
    plan = g.next_batch(token, log(200), 0)
    g.sent(token, plan, b"x" * plan.max_bytes, (), log(200), 0)         # the batch [100, 200) at 0
    if acked > 100:
        g.on_ack(token, SlaveAck(acked), log(written), 5)
    assert g.session_of(token).waits_for_ack(written, now) == (not sends)   # the driver's wake-up test
    plan = g.next_batch(token, log(written), now)
    assert (plan is not None) == sends
    if sends:
        assert (plan.start_offset, plan.max_bytes) == (200, 100)


def test_a_waiting_write_is_woken_by_the_ack_or_by_the_heartbeat_deadline_and_heartbeats_never_wait():
    g = group(members=(1, 2))                                           # haCoalesceBytes: 1 MiB by default
    token = connect(g, 2, 0)
    g.sent(token, g.next_batch(token, log(1000), 0), b"x" * 1000, (), log(1000), 0)
    assert g.next_batch(token, log(1500), 10) is None                   # waits for the ack of [0, 1000)
    assert g.session_of(token).waits_for_ack(1500, 10)                  # a write needs no wake-up
    assert g.next_deadline_ms() <= 500                                  # at worst the heartbeat wakes it
    assert token in g.tick(log(1500), 500).wake
    assert g.next_batch(token, log(1500), 500).max_bytes == 500          # ...and then it goes
    g.sent(token, g.next_batch(token, log(1500), 500), b"x" * 500, (), log(1500), 500)
    assert g.next_batch(token, log(2000), 510) is None
    assert token in g.on_ack(token, SlaveAck(1500), log(2000), 520).wake   # the ack wakes the stream
    assert not g.session_of(token).waits_for_ack(2000, 520)
    g.sent(token, g.next_batch(token, log(2000), 520), b"x" * 500, (), log(2000), 520)
    assert g.next_batch(token, log(2100), 530) is None
    assert token in g.metadata_changed().wake                           # news for the slave: it does not wait
    assert g.next_batch(token, log(2100), 531).max_bytes == 100


@pytest.mark.parametrize("value, reason", [(-1, "0"), (32 * 1024 * 1024, "16777216"), ("1MB", "integer")])
def test_ha_coalesce_bytes_refuses_bad_values_naming_the_key(value, reason):
    from metadata.config import ConfigError, bind

    with pytest.raises(ConfigError) as refused:
        bind(HaConfig, {"haCoalesceBytes": value}, "broker.toml")
    assert refused.value.key == "haCoalesceBytes" and reason in str(refused.value)


def test_a_full_batch_never_waits_so_a_slave_behind_catches_up_batch_after_batch():
    """haTransferBatchSize below haCoalesceBytes (upstream's 32 KiB, say): a batch that is full
    cannot grow by waiting, so a slave that is behind is not sent one batch per round trip."""
    g = group(members=(1, 2), ha_coalesce_bytes=1000, ha_transfer_batch_size=100)
    token = connect(g, 2, 0)
    g.sent(token, g.next_batch(token, log(1000), 0), b"x" * 100, (), log(1000), 0)   # [0, 100), not acked
    plan = g.next_batch(token, log(1000), 1)
    assert (plan.start_offset, plan.max_bytes) == (100, 100)
    g.sent(token, plan, b"x" * 100, (), log(1000), 1)
    assert g.next_batch(token, log(250), 2) is None                     # 50 bytes, less than a batch: they wait
