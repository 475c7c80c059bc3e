"""Handshake, truncation and transfer on the pure replication cores (seed RIP-44, reference 4.7/4.8).

Named invariants checked after every run: the slave's log is a byte prefix of the master's;
confirm offsets never go back; nothing beyond a confirm offset is exposed (the confirm offset
never exceeds the log of any node that reports it).
"""
from __future__ import annotations

import random

import pytest

from ha.epochs import EpochHistory
from ha.replication.master import MasterSettings
from ha.replication.slave import CloseReason, SlaveSession, SlaveSettings, SlaveState
from ha.replication.sync_state import SyncStateTracker
from tests.support.ha_cluster import Cluster, FakeLog, MasterNode, SlaveNode


def build(master_pairs, master_max, slave_pairs, slave_max, common, *, slave_settings=None,
          known_epoch=0, batch=120, last_file_start=0, master_min=0):
    master_log = FakeLog(master_min)
    master_log.fill_to(master_max, "m")
    slave_log = FakeLog()
    if slave_pairs:
        slave_log.data += master_log.bytes_between(0, common)
        slave_log.fill_to(slave_max, "s")
    epochs = EpochHistory.from_pairs(master_pairs)
    master = MasterNode(master_log, epochs, SyncStateTracker(0, frozenset({0}), 0, 15_000),
                        MasterSettings(batch_size_bytes=batch), last_file_start)
    slave_epochs = EpochHistory.from_pairs(slave_pairs)
    session = SlaveSession(slave_settings or SlaveSettings(1), slave_epochs, slave_log.min_offset,
                           slave_log.max_offset, 0, known_epoch)
    slave = SlaveNode(1, slave_log, session, slave_epochs)
    return Cluster(master, [slave]), master, slave


def check_invariants(cluster: Cluster) -> None:
    master = cluster.master
    for slave in cluster.slaves.values():
        low, high = slave.log.min_offset, slave.log.max_offset
        assert slave.log.bytes_between(low, high) == master.log.bytes_between(low, high)
        assert slave.confirm_history == sorted(slave.confirm_history) or slave.truncations
        assert slave.session.confirm_offset <= slave.log.max_offset
    assert cluster.master_confirms == sorted(cluster.master_confirms)
    assert master.tracker.confirm_offset <= master.log.max_offset


def check_batches_inside_epochs(cluster: Cluster) -> None:
    for batch in cluster.batches:
        entry = cluster.master.epochs.entry_of(batch.epoch)
        assert entry.start_offset == batch.epoch_start_offset <= batch.start_offset
        assert entry.end_offset is None or batch.end_offset <= entry.end_offset


TABLE = [
    # name, master epochs, master max, slave epochs, slave max, cut, expected truncation
    ("divergent last epoch", [(1, 100), (2, 300), (3, 450)], 800, [(1, 100), (2, 300), (3, 500)], 700, 450, 450),
    ("same epochs, different tails", [(1, 100), (2, 300), (3, 500)], 600,
     [(1, 100), (2, 300), (3, 500)], 700, 600, 600),
    ("master with a newer epoch", [(1, 100), (2, 300), (3, 500), (4, 800)], 1000,
     [(1, 100), (2, 300), (3, 500)], 700, 700, None),
    ("slave holds an epoch the master never had", [(1, 0), (3, 350)], 500, [(1, 0), (2, 300)], 400, 300, 300),
    ("slave behind in the same epoch", [(1, 0)], 900, [(1, 0)], 400, 400, None),
    # group simulation seeds 5111 and 6626: epoch 1's master lost its records to a power loss,
    # its empty epoch 1 was replaced by epoch 2 at the same start; the slave holds epoch 1 only
    ("slave holds only an epoch the master superseded", [(2, 0), (4, 300)], 600, [(1, 0)], 279, 0, 0),
    ("the same above a common start", [(1, 0), (3, 100)], 600, [(1, 0), (2, 100)], 279, 100, 100),
]


@pytest.mark.parametrize("name,mp,mmax,sp,smax,common,cut", TABLE, ids=[row[0] for row in TABLE])
def test_handshake_cuts_to_the_consistent_point_then_catches_up(name, mp, mmax, sp, smax, common, cut):
    cluster, master, slave = build(mp, mmax, sp, smax, common)
    cluster.connect(1)
    cluster.run()
    assert slave.truncations == ([cut] if cut is not None else [])
    assert slave.log.data == master.log.data
    assert slave.session.state is SlaveState.TRANSFER
    assert slave.session.epochs.pairs() == master.epochs.pairs()
    assert slave.persisted_epochs.pairs() == master.epochs.pairs()
    check_invariants(cluster)
    check_batches_inside_epochs(cluster)


def test_no_match_refuses_to_sync_and_keeps_the_log():
    cluster, master, slave = build([(1, 200), (2, 500)], 900, [(1, 100), (2, 300), (3, 500)], 700, 100)
    before = bytes(slave.log.data)
    cluster.connect(1)
    cluster.run()
    assert slave.session.state is SlaveState.READY
    assert slave.session.last_close is CloseReason.NO_CONSISTENT_POINT
    assert bytes(slave.log.data) == before and not slave.truncations


def test_no_shared_epoch_but_the_master_starts_later_refuses_to_sync():
    """The disjoint cut needs the master's history to cover the slave's whole log."""
    cluster, master, slave = build([(3, 100), (4, 300)], 900, [(1, 0)], 279, 0, master_min=100)
    before = bytes(slave.log.data)
    cluster.connect(1)
    cluster.run()
    assert slave.session.state is SlaveState.READY
    assert slave.session.last_close is CloseReason.NO_CONSISTENT_POINT
    assert bytes(slave.log.data) == before and not slave.truncations


def test_empty_slave_copies_from_the_masters_min():
    cluster, master, slave = build([(1, 0), (2, 450)], 900, [], 0, 0)
    cluster.connect(1)
    cluster.run()
    assert slave.log.data == master.log.data and slave.session.epochs.pairs() == ((1, 0), (2, 450))
    check_batches_inside_epochs(cluster)


def test_empty_slave_with_sync_from_last_file_starts_at_the_last_file():
    cluster, master, slave = build([(1, 0), (2, 450)], 900, [], 0, 0, last_file_start=600,
                                   slave_settings=SlaveSettings(1, sync_from_last_file=True))
    cluster.connect(1)
    cluster.run()
    assert slave.log.min_offset == 600 and slave.log.max_offset == 900
    assert slave.log.bytes_between(600, 900) == master.log.bytes_between(600, 900)
    assert slave.session.epochs.pairs() == ((2, 450),)


def test_master_older_than_the_controllers_epoch_is_fenced():
    cluster, master, slave = build([(1, 0), (4, 300)], 500, [(1, 0)], 200, 200, known_epoch=5)
    cluster.connect(1)
    cluster.run()
    assert slave.session.last_close is CloseReason.MASTER_EPOCH_FENCED and not slave.truncations


def test_a_dropped_batch_is_a_gap_and_reconnecting_catches_up():
    cluster, master, slave = build([(1, 0), (2, 450)], 900, [(1, 0)], 100, 100)
    cluster.connect(1)
    cluster.step(), cluster.step(), cluster.step()
    cluster.links[1].drop_next_batch = 1
    cluster.run()
    assert slave.session.last_close is CloseReason.GAP and slave.session.state is SlaveState.READY
    cluster.connect(1)
    cluster.run()
    assert slave.log.data == master.log.data
    check_invariants(cluster)


@pytest.mark.parametrize("where", ["payload", "index"])
def test_a_batch_changed_on_the_way_is_refused_by_its_crc_and_nothing_is_appended(where):
    cluster, master, slave = build([(1, 0)], 900, [(1, 0)], 100, 100)
    cluster.connect(1)
    cluster.step(), cluster.step(), cluster.step()
    cluster.links[1].corrupt_next_batch = where
    cluster.run()
    assert slave.session.last_close is CloseReason.BAD_CRC and slave.session.state is SlaveState.READY
    # what was appended is the master's bytes, and the changed batch was not appended
    assert len(slave.log.data) < len(master.log.data) and master.log.data.startswith(slave.log.data)
    cluster.connect(1)
    cluster.run()
    assert slave.log.data == master.log.data
    check_invariants(cluster)


def test_master_appends_a_new_epoch_during_transfer():
    cluster, master, slave = build([(1, 0)], 300, [(1, 0)], 0, 0)
    cluster.connect(1)
    cluster.run()
    master.begin_epoch(3)
    master.log.fill_to(600, "m3")
    cluster.run()
    assert slave.log.data == master.log.data and slave.session.epochs.pairs() == ((1, 0), (3, 300))
    check_batches_inside_epochs(cluster)


def test_heartbeats_do_not_record_an_epoch():
    cluster, master, slave = build([(1, 0)], 100, [(1, 0)], 100, 100)
    cluster.connect(1)
    cluster.run()
    master.begin_epoch(2)
    cluster.now_ms += 10_000
    cluster.run()
    assert slave.session.epochs.pairs() == ((1, 0),)
    assert any(not b.payload and b.epoch == 2 for b in cluster.batches)


@pytest.mark.parametrize("seed", range(12))
def test_random_drops_reconnects_and_master_writes_keep_the_invariants(seed):
    rng = random.Random(seed)
    master_log = FakeLog()
    master = MasterNode(master_log, EpochHistory.from_pairs([(1, 0)]),
                        SyncStateTracker(0, frozenset({0, 1, 2}), 0, 15_000), MasterSettings(batch_size_bytes=150))
    slaves = [SlaveNode(i, FakeLog(), SlaveSession(SlaveSettings(i), EpochHistory(), 0, 0, 0), EpochHistory())
              for i in (1, 2)]
    cluster = Cluster(master, slaves)
    epoch = 1
    for _ in range(200):
        roll = rng.random()
        if roll < 0.3:
            master_log.fill_to(master_log.max_offset + 50 * rng.randint(1, 4), f"e{epoch}")
        elif roll < 0.35:
            epoch += rng.randint(1, 2)
            master.begin_epoch(epoch)
        elif roll < 0.45:
            slave_id = rng.choice((1, 2))
            if slave_id in cluster.links:
                cluster.links[slave_id].drop_next_batch = 1
        elif roll < 0.5:
            slave_id = rng.choice((1, 2))
            if slave_id in cluster.links:
                cluster.disconnect(slave_id)
        for slave_id in (1, 2):
            if slave_id not in cluster.links:
                cluster.connect(slave_id)
        cluster.step()
        check_invariants(cluster)
        if 1 in cluster.links and 2 in cluster.links:
            assert master.tracker.confirm_offset <= min(s.log.max_offset for s in slaves)
    check_batches_inside_epochs(cluster)


def test_a_slave_behind_by_an_epoch_copies_the_old_epochs_records_from_a_newer_master():
    """Simulation finding: batches of an older epoch's records were fenced against the epoch the
    controller announced, so a slave that was behind when the master changed never caught up.
    The fence is on the master's newest epoch (its handshake), not on the data's."""
    cluster, master, slave = build([(1, 0), (4, 300)], 500, [(1, 0)], 100, 100, known_epoch=4)
    cluster.connect(1)
    cluster.run()
    assert slave.log.data == master.log.data and slave.session.epochs.pairs() == ((1, 0), (4, 300))
    assert slave.session.last_close is None
