"""The offset diff's semantics in plain Python (no JVM): reverse sync, safe merge, flags."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from metadata.data_version import DataVersion
from spark_tools.offset_diff_model import (
    OffsetDiffInputError, Replica, ReplicaId, STATUS_DIVERGED, STATUS_IN_SYNC, STATUS_ONE_SIDED,
    VERDICT_DIVERGED, VERDICT_IN_SYNC, VERDICT_NEEDS_HUMAN, diff_tables, merged_data_version,
    plan_group, validate_replicas, verdict,
)


def replica(broker_id: int, counter: int, state: int = 0, ts: int = 0, group: str = "broker-a", role: str | None = None) -> Replica:
    return Replica(group, broker_id, role or ("master" if broker_id == 0 else "slave"), DataVersion(state, ts, counter))


def test_ties_adopt_the_slave_table():
    plan = plan_group([replica(0, 5), replica(1, 5)])
    assert plan.adopted == (0, 1) and plan.native_winner == 1 and plan.newest_id is None


def test_newer_master_keeps_its_table():
    plan = plan_group([replica(0, 6), replica(1, 5)])
    assert plan.native_winner == 0 and plan.newest_id == 0


def test_state_version_dominates_counter_then_timestamp():
    assert plan_group([replica(0, 99, state=1), replica(1, 0, state=2)]).native_winner == 1
    assert plan_group([replica(0, 3, ts=9), replica(1, 3, ts=10)]).newest_id == 1


def test_sequential_visit_compares_against_the_adopted_version():
    # master 5; slave 1 at 7 adopted; slave 2 at 6 is now older than 7: not adopted
    plan = plan_group([replica(0, 5), replica(1, 7), replica(2, 6)])
    assert plan.adopted == (0, 1) and plan.native_version.counter == 7


def test_exactly_one_master_per_group():
    with pytest.raises(OffsetDiffInputError, match="broker-a.*exactly one master"):
        validate_replicas([replica(1, 0), replica(2, 0)])
    with pytest.raises(OffsetDiffInputError, match="broker id 1 given twice"):
        validate_replicas([replica(0, 0), replica(1, 0), replica(1, 0)])


def tables(**by_id):
    return {ReplicaId("broker-a", int(k[1:])): v for k, v in by_id.items()}


def test_stale_master_rejoining_rolls_back_under_master_wins_not_safe():
    replicas = [replica(0, 5), replica(1, 9)]
    result = diff_tables(replicas, tables(b0={("T", "G"): {0: 100, 1: 50}}, b1={("T", "G"): {0: 180, 1: 50}}))
    first, second = result.keys
    assert first.status == STATUS_DIVERGED and first.spread == 80 and first.ahead_id == 1
    assert first.safe_offset == 180 and first.native_offset == 180 and first.rollback_native == 0
    assert first.rollback_if_master_wins == 80 and not first.reset_conflict
    assert second.status == STATUS_IN_SYNC and second.rollback_if_master_wins == 0


def test_put_all_replaces_the_whole_entry_so_missing_queue_disappears():
    replicas = [replica(0, 5), replica(1, 5)]
    result = diff_tables(replicas, tables(b0={("T", "G"): {0: 10, 1: 20}}, b1={("T", "G"): {0: 10}}))
    queue1 = result.keys[1]
    assert queue1.status == STATUS_ONE_SIDED and queue1.native_offset is None and queue1.rollback_native is None
    assert queue1.safe_offset == 20


def test_entry_only_on_master_survives_put_all():
    result = diff_tables([replica(0, 5), replica(1, 5)], tables(b0={("T", "G"): {0: 10}}, b1={}))
    (key,) = result.keys
    assert key.native_offset == 10 and key.status == STATUS_ONE_SIDED


def test_newer_version_lower_offset_is_a_reset_conflict():
    result = diff_tables([replica(0, 9), replica(1, 5)], tables(b0={("T", "G"): {0: 10}}, b1={("T", "G"): {0: 900}}))
    (key,) = result.keys
    assert key.reset_conflict and key.rollback_native == 890
    assert diff_tables([replica(0, 9), replica(1, 5)], tables(b0={("T", "G"): {0: 10}}, b1={("T", "G"): {0: 15}}), tolerance=5).keys[0].reset_conflict is False


def test_native_table_behind_and_ahead_marks_the_group_inconsistent():
    data = tables(b0={("T", "G"): {0: 10, 1: 90}}, b1={("T", "G"): {0: 50, 1: 40}})
    assert diff_tables([replica(0, 9), replica(1, 5)], data).inconsistent_groups == {"broker-a"}
    assert diff_tables([replica(0, 9), replica(1, 5)], data, tolerance=100).inconsistent_groups == frozenset()


def test_beyond_queue_max():
    data = tables(b0={("T", "G"): {0: 10}}, b1={("T", "G"): {0: 12}})
    (key,) = diff_tables([replica(0, 1), replica(1, 1)], data, queue_max={("broker-a", "T", 0): 11}).keys
    assert key.beyond_max


def test_verdict_order():
    assert verdict(0, 0, 0, 0, 0) == VERDICT_IN_SYNC
    assert verdict(1, 0, 0, 0, 0) == VERDICT_DIVERGED
    assert verdict(0, 1, 0, 0, 0) == VERDICT_DIVERGED
    assert verdict(1, 0, 1, 0, 0) == VERDICT_NEEDS_HUMAN
    assert verdict(0, 0, 0, 1, 0) == VERDICT_NEEDS_HUMAN
    assert verdict(0, 0, 0, 0, 1) == VERDICT_NEEDS_HUMAN


def test_merged_version_beats_every_replica():
    replicas = [replica(0, 5, state=1), replica(1, 9, state=0)]
    merged = merged_data_version(replicas, now_ms=1234)
    assert all(merged.compare(member.data_version) > 0 for member in replicas) and merged.timestamp_ms == 1234


offsets = st.dictionaries(st.integers(0, 3), st.integers(0, 1000), max_size=4)


@given(st.lists(offsets, min_size=2, max_size=3), st.lists(st.integers(0, 3), min_size=3, max_size=3))
def test_safe_never_moves_any_replica_backwards(maps, counters):
    replicas = [replica(index, counters[index]) for index in range(len(maps))]
    data = {ReplicaId("broker-a", index): {("T", "G"): queues} for index, queues in enumerate(maps)}
    for key in diff_tables(replicas, data).keys:
        present = [offset for offset in key.offsets.values() if offset is not None]
        assert key.safe_offset == max(present) and key.spread == max(present) - min(present)
        assert key.rollback_native is None or key.rollback_native >= 0
