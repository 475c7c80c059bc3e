"""ha.epochs: the epoch history rules and the consistent point (seed RIP-44, reference 4.8)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from ha.epochs import EpochEntry, EpochError, EpochHistory, EpochRejection, find_consistent_point


def history(*pairs, max_offset=None):
    built = EpochHistory.from_pairs(pairs)
    return built.closed_at(max_offset) if max_offset is not None else built


# --- the reference's table (EpochFileCacheTest) ------------------------------------------------
def test_last_epoch_start_diverged_cuts_at_the_smaller_end():
    slave = history((1, 100), (2, 300), (3, 500), max_offset=700)
    master = history((1, 100), (2, 300), (3, 450), max_offset=800)
    assert find_consistent_point(master, slave) == 450


def test_same_epochs_different_tails_cut_at_the_shorter():
    slave = history((1, 100), (2, 300), (3, 500), max_offset=700)
    master = history((1, 100), (2, 300), (3, 500), max_offset=600)
    assert find_consistent_point(master, slave) == 600


def test_nothing_matches_gives_none():
    slave = history((1, 100), (2, 300), (3, 500), max_offset=700)
    master = history((1, 200), (2, 500), max_offset=900)
    assert find_consistent_point(master, slave) is None


def test_master_with_a_newer_epoch_keeps_the_slave_tail():
    slave = history((1, 100), (2, 300), (3, 500), max_offset=700)
    master = history((1, 100), (2, 300), (3, 500), (4, 800), max_offset=1000)
    assert find_consistent_point(master, slave) == 700


def test_empty_slave_matches_nothing():
    assert find_consistent_point(history((1, 0), max_offset=10), EpochHistory()) is None


def test_slave_with_an_epoch_the_master_never_had():
    slave = history((1, 0), (2, 300), max_offset=400)  # epoch 2 written by a deposed master
    master = history((1, 0), (3, 350), max_offset=500)
    assert find_consistent_point(master, slave) == 300  # epoch 1: min(300, 350)


def test_seed_examples_cut_at_the_minimum():
    # (1): epoch 0 ends at 900 on one side, 1000 on the other.
    assert find_consistent_point(history((0, 0), max_offset=1000), history((0, 0), max_offset=900)) == 900
    # (5): B and C both cut to 800 of epoch 1.
    assert find_consistent_point(history((0, 0), (1, 500), (2, 800), max_offset=1200),
                                 history((0, 0), (1, 500), max_offset=1000)) == 800


# --- history rules -----------------------------------------------------------------------------
def test_truncate_suffix_keeps_epoch_one_and_drops_epoch_two():
    cut = history((1, 100), (2, 300)).truncate_suffix(150)
    assert cut.entries == (EpochEntry(1, 100, None),)


def test_entry_for_finds_the_containing_epoch():
    h = history((1, 100), (2, 300), (3, 500))
    assert h.entry_for(350) == EpochEntry(2, 300, 500)
    assert h.entry_for(99) is None
    assert h.entry_for(10**12).epoch == 3


def test_truncate_prefix_drops_epochs_ending_before_the_min():
    h = history((1, 0), (2, 300), (3, 500))
    assert h.truncate_prefix(300).pairs() == ((2, 300), (3, 500))
    assert h.truncate_prefix(10**9).pairs() == ((3, 500),)


def test_epochs_may_skip_numbers_but_never_go_back():
    h = history((1, 0), (5, 10))
    assert h.check_append(5, 20) is EpochRejection.EPOCH_NOT_NEWER
    assert h.check_append(6, 5) is EpochRejection.START_BEFORE_LAST
    assert h.check_append(-1, 5) is EpochRejection.NEGATIVE
    with pytest.raises(EpochError):
        h.append(4, 20)
    assert h.append(9, 20).last_epoch == 9


def test_a_newer_epoch_at_the_same_start_replaces_an_empty_one():
    h = history((1, 0), (2, 300)).append(3, 300)
    assert h.pairs() == ((1, 0), (3, 300))
    assert h.entries[0].end_offset == 300


def test_truncate_suffix_from_epoch():
    assert history((1, 0), (2, 10), (4, 20)).truncate_suffix_from_epoch(2).entries == (EpochEntry(1, 0),)


# --- properties: a model cluster where one master writes per epoch -----------------------------
def _copy(master_log, master_hist, slave_log, slave_hist, upto):
    """Copy master records [len(slave), upto) like TRANSFER: record epoch changes from headers."""
    while len(slave_log) < upto:
        offset = len(slave_log)
        entry = master_hist.entry_for(offset)
        if slave_hist.last is None or slave_hist.last_epoch != entry.epoch:
            slave_hist = slave_hist.append(entry.epoch, entry.start_offset)
        slave_log.append(master_log[offset])
    return slave_hist


def _handshake(master, slave):
    mlog, mhist = master
    slog, shist = slave
    if shist.is_empty():
        return 0
    point = find_consistent_point(mhist.closed_at(len(mlog)), shist.closed_at(len(slog)))
    return point


operations = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 5), st.integers(0, 6)),
                      min_size=1, max_size=30)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_after_handshake_the_slave_log_is_a_prefix_of_the_masters(ops):
    nodes = [([], EpochHistory()) for _ in range(3)]
    epoch = 0
    for master_id, slave_id, writes, copy in ops:
        epoch += 1 + (copy % 2)  # epochs may skip numbers
        mlog, mhist = nodes[master_id]
        mhist = mhist.append(epoch, len(mlog))
        mlog.extend((epoch, len(mlog) + i) for i in range(writes))
        nodes[master_id] = (mlog, mhist)
        if slave_id == master_id:
            continue
        slog, shist = nodes[slave_id]
        point = _handshake(nodes[master_id], nodes[slave_id])
        if point is None:
            continue
        assert point <= len(slog) and point <= len(mlog)
        del slog[point:]
        shist = shist.truncate_suffix(point)
        assert slog == mlog[:point], "the consistent prefix must be identical"
        shist = _copy(mlog, mhist, slog, shist, min(len(mlog), point + copy))
        nodes[slave_id] = (slog, shist)
        assert slog == mlog[:len(slog)]
        for entry in shist.entries:
            remote = mhist.entry_of(entry.epoch)
            assert remote is not None and remote.start_offset == entry.start_offset


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 50)), max_size=12), st.integers(0, 700))
def test_truncate_suffix_and_prefix_keep_the_rules(steps, cut):
    h, epoch, start = EpochHistory(), 0, 0
    for bump, grow in steps:
        epoch, start = epoch + bump, start + grow
        h = h.append(epoch, start)
    suffix = h.truncate_suffix(cut)
    assert all(e.start_offset < cut for e in suffix.entries)
    assert suffix.last is None or suffix.last.end_offset is None
    prefix = h.truncate_prefix(cut)
    assert h.is_empty() or prefix.last == h.last
    for offset in range(cut, cut + 5):
        if h.entry_for(offset) is not None:
            assert prefix.entry_for(offset) == h.entry_for(offset)
    assert EpochHistory.from_pairs(h.pairs()) == h


def test_within_corrects_a_history_to_the_recovered_log():
    h = history((1, 0), (2, 300), (3, 500), (4, 700))
    assert h.within(0, 500).pairs() == ((1, 0), (2, 300), (3, 500))  # empty epoch 3 kept
    assert h.within(0, 450).entries == (EpochEntry(1, 0, 300), EpochEntry(2, 300, None))
    assert h.within(320, 450).pairs() == ((2, 300),)
