"""Issue 24, defect 6: a replication peer's silence counts only time this side was awake.

Under CPU contention both slaves of a fresh controller-mode cluster were closed as
SLAVE_SILENT twice in their first 8 s: the master's loop had stalled past
``haHousekeepingInterval`` while the slaves' acks waited unread in its socket buffer, and its
late tick counted the stall as the slaves' silence.  Here the local tick comes late; the peer
is not blamed for it, and a peer that is really silent is still closed.
"""
from __future__ import annotations

import pytest

from ha.epochs import EpochHistory
from ha.replication.config import BrokerRole, HaConfig
from ha.replication.master import MasterCloseReason
from ha.replication.master_group import GroupSettings, MasterGroup, MasterGroupOutput, MasterLog, Proposal
from ha.replication.messages import MasterHandshake, SlaveAck, SlaveHandshake
from ha.replication.silence import OwnPauses, PeerSilence, look_interval_ms
from ha.replication.slave import CloseReason, SlaveSession, SlaveSettings, SlaveState

HEARTBEAT_MS, LIMIT_MS = 500, 3000          # conf/controller-mode: haSendHeartbeatInterval, haHousekeepingInterval

# Each row: events ("heard" or "look" at a time), and the looks' answers (True: close).
SILENCE = [
    ("a peer heard every look stays", [("heard", 400), ("look", 500), ("heard", 900), ("look", 1000)], [False, False]),
    ("on-time looks past the limit close", [("look", t) for t in range(500, 3001, 500)] + [("look", 3001)],
     [False] * 6 + [True]),
    ("a look late by our pause closes nothing", [("look", 500), ("look", 4000)], [False, False]),
    ("the pause is not counted afterwards", [("look", 500), ("look", 4000), ("look", 4500), ("look", 5000)],
     [False] * 4),
    ("silence after the pause still closes", [("look", 500), ("look", 4000)] + [("look", t) for t in
                                                                                range(4500, 7001, 500)],
     [False] * 6 + [True, True]),                     # 3.5 s awake (0-1000, 4000-6500): closed at 6500
    ("ordinary jitter counts as awake time", [("look", t + 200) for t in range(500, 3001, 500)] + [("look", 3300)],
     [False] * 5 + [True, True]),
    ("bytes of a frame not parsed yet are hearing", [("look", 500), ("heard", 2900), ("look", 3001)], [False, False]),
]


@pytest.mark.parametrize("name,events,answers", SILENCE, ids=[row[0] for row in SILENCE])
def test_peer_silence(name, events, answers):
    silence = PeerSilence.for_intervals(HEARTBEAT_MS, LIMIT_MS, 0)
    got = []
    for kind, at in events:
        if kind == "heard":
            silence.heard(at)
        else:
            got.append(silence.look(at))
    assert got == answers


def test_looks_are_due_every_heartbeat_and_four_times_per_limit():
    assert look_interval_ms(500, 3000) == 500
    assert look_interval_ms(5000, 20_000) == 5000
    assert look_interval_ms(5000, 8000) == 2000
    assert PeerSilence.for_intervals(500, 3000, 100).deadline_ms() == 600


def test_own_pauses_report_only_lateness_beyond_jitter():
    pauses = OwnPauses(500, 0)
    assert pauses.look(500) == 0 and pauses.look(1200) == 0      # 200 ms late: jitter
    assert pauses.look(4700) == 3000 and pauses.paused(3000)     # due at 1700


# --- the master's replica group -------------------------------------------------------------------
EPOCHS = EpochHistory.from_pairs([(1, 0)])


def log(max_offset: int) -> MasterLog:
    return MasterLog(EPOCHS, 0, max_offset, max_offset, 0)


def group(members=(1, 2)) -> MasterGroup:
    config = HaConfig(broker_role=BrokerRole.SYNC_MASTER, total_replicas=2, all_ack_in_sync_state_set=True,
                      ha_max_time_slave_not_catchup_ms=2000, ha_send_heartbeat_interval_ms=HEARTBEAT_MS,
                      ha_housekeeping_interval_ms=LIMIT_MS)
    return MasterGroup(GroupSettings(1, True, config), frozenset(members), 3, 0, 0)


def drive(g: MasterGroup, token: int, now: int) -> MasterGroupOutput:
    """What the driver does at ``now``: the timer's tick, then the stream's next batch."""
    out = g.tick(log(1000), now)
    plan = g.next_batch(token, log(1000), now)
    if isinstance(plan, MasterGroupOutput):
        return out | plan
    if plan is not None:
        g.sent(token, plan, b"", (), log(1000), now)
    return out


def connected(g: MasterGroup) -> int:
    token, _, _ = g.connect(SlaveHandshake(2), log(1000), 0)
    g.on_ack(token, SlaveAck(1000), log(1000), 0)
    return token


def test_a_master_whose_loop_stalled_does_not_close_a_slave_whose_acks_wait_unread():
    g = group()
    token = connected(g)
    for now in (500, 1000):
        assert not drive(g, token, now).close
        g.on_ack(token, SlaveAck(1000), log(1000), now)
    # the loop stalls from 1000 to 4600; the slave acked at 1500, 2000, ... into the socket buffer
    out = drive(g, token, 4600)
    assert out.close == () and out.propose is None, out   # neither SLAVE_SILENT nor a shrink
    for now in range(1500, 4600, 500):                     # the reader drains the buffer
        g.on_ack(token, SlaveAck(1000), log(1000), 4600)
    for now in range(5100, 9000, 500):
        out = drive(g, token, now)
        g.on_ack(token, SlaveAck(1000), log(1000), now)
        assert not out.close and out.propose is None, now
    assert g.sync_state_set == frozenset({1, 2})


def test_bytes_received_keep_a_slave_alive_before_its_frame_is_parsed():
    g = group()
    token = connected(g)
    for now in range(500, 6001, 500):
        g.heard(token, now - 10)                           # part of an ack, say
        assert not drive(g, token, now).close, now


def test_a_really_silent_slave_is_still_closed_within_the_limit_and_a_look():
    g = group()
    token = connected(g)
    closed_at = None
    for now in range(500, 6001, 500):
        out = drive(g, token, now)
        if out.close:
            closed_at = now
            assert out.close == ((token, MasterCloseReason.SLAVE_SILENT.value),)
            break
    assert closed_at is not None and closed_at <= LIMIT_MS + HEARTBEAT_MS


def test_a_paused_master_does_not_shrink_a_caught_up_member():
    g = group()
    token = connected(g)
    drive(g, token, 500)
    g.on_ack(token, SlaveAck(1000), log(1000), 500)
    assert g.tick(log(1000), 3200).propose is None         # 2.7 s late: our pause, not its lag
    g.on_ack(token, SlaveAck(1000), log(1000), 3210)
    assert g.tick(log(1000), 3700).propose is None


def test_a_member_that_really_lags_is_still_shrunk():
    g = group()
    token, _, _ = g.connect(SlaveHandshake(2), log(1000), 0)
    g.on_ack(token, SlaveAck(500), log(1000), 0)           # behind, never caught up
    proposals = [g.tick(log(1000), now).propose for now in range(500, 2600, 500)]
    assert Proposal(frozenset({1}), 3) in proposals


# --- the slave's session --------------------------------------------------------------------------
def slave_in_transfer() -> SlaveSession:
    session = SlaveSession(SlaveSettings(2, heartbeat_interval_ms=HEARTBEAT_MS, housekeeping_interval_ms=LIMIT_MS),
                           EpochHistory.from_pairs([]), 0, 0, 0)
    session.connected(0)
    session.on_master_handshake(MasterHandshake(((1, 0),), 0, 0, 0), 0)
    assert session.state is SlaveState.TRANSFER
    return session


def test_a_slave_whose_tick_comes_late_does_not_call_its_master_silent():
    session = slave_in_transfer()
    session.tick(500)
    assert session.tick(4000).closed is None               # 3 s late: the slave's own pause
    session.heard(4010)                                    # the master's heartbeats, read now
    assert session.tick(4500).closed is None


def test_a_slave_hearing_bytes_of_a_long_batch_keeps_its_master():
    session = slave_in_transfer()
    for now in range(500, 8001, 500):
        session.heard(now - 100)
        assert session.tick(now).closed is None, now


def test_a_really_silent_master_is_still_closed():
    session = slave_in_transfer()
    closed = [session.tick(now).closed for now in range(500, 4001, 500)]
    assert CloseReason.MASTER_SILENT in closed
    assert session.state is SlaveState.READY
