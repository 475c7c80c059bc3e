"""The store keeps its epoch file right on truncation, retention and recovery, and the
replication hooks: an empty log started at a master's offset, waiting for a flush."""
from __future__ import annotations

import pytest

from ha.epochs import EpochHistory
from store.epoch_file import read_epoch_file
from store.message_store import BadOffset
from tests.unit.test_store_message_store import SEGMENT, Clock, draft, make, put_each, run


def test_truncation_drops_epochs_beyond_the_cut_and_is_durable(tmp_path):
    async def scenario():
        store = make(tmp_path)
        store.start()
        await put_each(store, [draft(i) for i in range(10)])
        middle = store.commit_log_max_offset
        store.epochs.start_epoch(1, 0)
        store.epochs.start_epoch(3, middle)
        await put_each(store, [draft(i) for i in range(10, 20)])
        cut = store.get("T", 0, 5, 1).messages[0].commit_offset
        store.truncate(cut)
        assert store.epochs.history == EpochHistory.from_pairs([(1, 0)])
        assert read_epoch_file(tmp_path / "epochFileCheckpoint") == store.epochs.history
        store.shutdown()
    run(scenario())


def test_recovery_reconciles_epochs_with_the_log(tmp_path):
    async def scenario():
        store = make(tmp_path)
        store.start()
        await put_each(store, [draft(i) for i in range(5)])
        end = store.commit_log_max_offset
        store.epochs.start_epoch(1, 0)
        store.epochs.start_epoch(2, end)        # an empty epoch at the end is kept
        store.epochs.replace(store.epochs.history.append(4, end + 5000))  # beyond the log: a lost tail
        store.shutdown()
    run(scenario())
    store = make(tmp_path)
    store.start()
    try:
        assert store.epochs.history.pairs() == ((1, 0), (2, store.commit_log_max_offset))
    finally:
        store.shutdown()


def test_retention_forgets_epochs_that_ended_below_the_min_offset(tmp_path):
    clock = Clock(0)

    async def scenario():
        store = make(tmp_path, clock, file_reserved_time_hours=1.0, disk_max_used_space_ratio=99,
                     disk_space_warning_level_ratio=100)
        store.start()
        store.epochs.start_epoch(1, 0)
        await put_each(store, [draft(i) for i in range(100)])
        store.epochs.start_epoch(2, store.commit_log_max_offset)
        clock.now = 2 * 3600 * 1000
        await put_each(store, [draft(i) for i in range(100, 200)])
        clock.now += 10
        before = store.epochs.history
        store.epochs.replace(EpochHistory.from_pairs([(0, 0)] + list(before.pairs())).truncate_suffix(
            store.commit_log_max_offset + 1))  # plus an epoch 0 that ends at offset 0: nothing of it is left
        store.epochs.replace(EpochHistory.from_pairs([(0, 0), (1, 1)] + list(before.pairs())[1:]))
        assert store.clean_expired() >= 1
        assert store.commit_log_min_offset > 1
        assert store.epochs.history.pairs()[0] == (1, 1)  # epoch 0 ([0, 1)) is forgotten, epoch 1 reaches past min
        assert store.epochs.history.last.epoch == 2
        assert read_epoch_file(tmp_path / "epochFileCheckpoint") == store.epochs.history
        store.shutdown()
    run(scenario())


def test_an_empty_log_starts_at_a_segment_start_only(tmp_path):
    async def scenario():
        store = make(tmp_path)
        store.start()
        with pytest.raises(BadOffset):
            store.start_empty_at(SEGMENT + 1)
        store.start_empty_at(3 * SEGMENT)
        assert store.commit_log_min_offset == store.commit_log_max_offset == 3 * SEGMENT
        await store.wait_flushed(3 * SEGMENT)  # nothing to flush: returns at once
        store.shutdown()
        store2 = make(tmp_path)
        store2.start()
        assert store2.commit_log_min_offset == store2.commit_log_max_offset == 3 * SEGMENT
        await put_each(store2, [draft(0)])
        assert store2.get("T", 0, 0, 1).messages[0].commit_offset == 3 * SEGMENT
        store2.shutdown()
    run(scenario())


def test_a_non_empty_log_refuses_to_move(tmp_path):
    async def scenario():
        store = make(tmp_path)
        store.start()
        await put_each(store, [draft(0)])
        with pytest.raises(BadOffset):
            store.start_empty_at(SEGMENT)
        store.shutdown()
    run(scenario())
