"""RaftStorage: durability, torn-tail cutting, CRC detection, snapshots and compaction."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ha.raft.types import Entry, HardState, Snapshot
from store.raft_storage import CorruptRaftLog, RaftStorage, StorageConfig


def _entries(first: int, last: int, term: int = 1) -> tuple[Entry, ...]:
    return tuple(Entry(term, i, b"e%d" % i) for i in range(first, last + 1))


def _fresh(path: Path, **kwargs) -> RaftStorage:
    storage = RaftStorage(path, StorageConfig(**kwargs))
    storage.load()
    return storage


def test_restart_recovers_term_vote_commit_and_log(tmp_path: Path) -> None:
    storage = _fresh(tmp_path)
    storage.save(HardState(3, 2, 4), _entries(1, 5), None)
    recovered = RaftStorage(tmp_path).load()
    assert recovered.hard_state == HardState(3, 2, 4)
    assert recovered.entries == _entries(1, 5)
    assert recovered.snapshot is None


def test_no_vote_survives_restart_as_none(tmp_path: Path) -> None:
    _fresh(tmp_path).save(HardState(7, None, 0), (), None)
    assert RaftStorage(tmp_path).load().hard_state == HardState(7, None, 0)


def test_conflicting_suffix_is_truncated(tmp_path: Path) -> None:
    storage = _fresh(tmp_path)
    storage.save(None, _entries(1, 5, term=1), None)
    storage.save(None, (Entry(2, 3, b"new"),), None)
    recovered = RaftStorage(tmp_path).load()
    assert recovered.entries == _entries(1, 2) + (Entry(2, 3, b"new"),)


def test_torn_tail_is_cut_and_earlier_records_survive(tmp_path: Path) -> None:
    storage = _fresh(tmp_path)
    storage.save(HardState(1, 1, 0), _entries(1, 3), None)
    size = storage.file_path.stat().st_size
    storage.save(None, _entries(4, 4), None)
    with open(storage.file_path, "r+b") as handle:
        handle.truncate(storage.file_path.stat().st_size - 3)  # the last write tore
    reopened = RaftStorage(tmp_path)
    recovered = reopened.load()
    assert recovered.entries == _entries(1, 3)
    assert reopened.cut_bytes > 0
    assert reopened.file_path.stat().st_size == size
    reopened.save(None, _entries(4, 5), None)  # appending after the cut works
    assert RaftStorage(tmp_path).load().entries == _entries(1, 5)


def test_bad_crc_in_last_record_is_cut(tmp_path: Path) -> None:
    storage = _fresh(tmp_path)
    storage.save(None, _entries(1, 2), None)
    data = bytearray(storage.file_path.read_bytes())
    data[-1] ^= 0xFF
    storage.file_path.write_bytes(bytes(data))
    assert RaftStorage(tmp_path).load().entries == _entries(1, 1)


def test_bad_crc_before_valid_records_is_corruption(tmp_path: Path) -> None:
    storage = _fresh(tmp_path)
    storage.save(HardState(1, None, 0), _entries(1, 3), None)
    data = bytearray(storage.file_path.read_bytes())
    data[12] ^= 0xFF  # inside the first record's payload
    storage.file_path.write_bytes(bytes(data))
    with pytest.raises(CorruptRaftLog):
        RaftStorage(tmp_path).load()


def test_compaction_keeps_the_suffix_and_restart_starts_from_snapshot(tmp_path: Path) -> None:
    storage = _fresh(tmp_path)
    storage.save(HardState(1, 1, 6), _entries(1, 6), None)
    snapshot = Snapshot(4, 1, b"state@4", (1, 2, 3))
    storage.save(None, (), None, compaction=snapshot)
    recovered = RaftStorage(tmp_path).load()
    assert recovered.snapshot == snapshot
    assert recovered.entries == _entries(5, 6)
    assert recovered.hard_state == HardState(1, 1, 6)


def test_leader_snapshot_not_matching_the_log_replaces_it(tmp_path: Path) -> None:
    storage = _fresh(tmp_path)
    storage.save(None, _entries(1, 6, term=1), None)
    snapshot = Snapshot(8, 3, b"leader", (1, 2, 3))
    storage.save(HardState(3, None, 8), (), snapshot)
    recovered = RaftStorage(tmp_path).load()
    assert recovered.snapshot == snapshot and recovered.entries == ()
    storage.save(None, (Entry(3, 9, b"x"),), None)
    assert RaftStorage(tmp_path).load().entries == (Entry(3, 9, b"x"),)


def test_file_is_rewritten_when_dead_records_pile_up(tmp_path: Path) -> None:
    storage = _fresh(tmp_path, rewrite_after_records=5)
    for commit in range(20):
        storage.save(HardState(1, 1, commit), (), None)
    assert storage.file_path.stat().st_size < 20 * 33
    assert RaftStorage(tmp_path).load().hard_state == HardState(1, 1, 19)


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(min_value=0, max_value=400))
def test_any_truncation_recovers_a_prefix_of_what_was_written(tmp_path_factory, cut: int) -> None:
    path = tmp_path_factory.mktemp("raft")
    storage = _fresh(path)
    for index in range(1, 9):
        storage.save(HardState(index, 1, index - 1), (Entry(index, index, b"x" * index),), None)
    data = storage.file_path.read_bytes()
    storage.file_path.write_bytes(data[: max(len(data) - cut, 0)])
    recovered = RaftStorage(path).load()
    count = len(recovered.entries)
    assert recovered.entries == tuple(Entry(i, i, b"x" * i) for i in range(1, count + 1))
    assert recovered.hard_state.term in (count, max(count - 1, 0))
