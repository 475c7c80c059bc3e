"""The one pre-online merge rule (metadata/pre_online_merge.py): the adoption table (scenario 32
and its variants), entries, the fold over several slaves, the offset diff's native outcome as
the same rule, the update steps and the opening of a state version."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey
from metadata.data_version import DataVersion, UpdateStep
from metadata.pre_online_merge import merge_entries, merge_offsets, plan_merge
from metadata.replica_metadata import Adopt, Keep, SyncDirection, decide_adoption
from services.broker.offset_keeper import OffsetKeeper
from spark_tools.offset_diff_model import Replica, ReplicaId, diff_tables


def v(state, counter, timestamp):
    return DataVersion(state_version=state, timestamp_ms=timestamp, counter=counter)


# scenario 32 and its variants: (master, slave) -> the slave's table adopted?
ADOPTION_TABLE = [
    ("equal versions: ties adopt the slave", v(0, 5, 100), v(0, 5, 100), True),
    ("slave's counter ahead", v(0, 5, 100), v(0, 6, 50), True),
    ("master's counter ahead", v(0, 6, 50), v(0, 5, 100), False),
    ("same counter, slave's timestamp later", v(0, 5, 100), v(0, 5, 101), True),
    ("same counter, master's timestamp later", v(0, 5, 101), v(0, 5, 100), False),
    ("slave acted: its state version wins over any counter", v(0, 999, 999), v(1, 0, 0), True),
    ("master newer state version, lower counter", v(1, 0, 0), v(0, 999, 999), False),
    ("controller epochs: the new master's epoch wins (scenario 33)", v(1, 500, 9), v(2, 1, 1), True),
    ("both empty", v(0, 0, 0), v(0, 0, 0), True),
    ("empty slave, master with history", v(0, 3, 7), v(0, 0, 0), False),
]

MASTER_TABLE = {OffsetKey("T", "G"): {0: 10, 1: 20}, OffsetKey("T", "OnlyMaster"): {0: 5}}
SLAVE_TABLE = {OffsetKey("T", "G"): {0: 15}, OffsetKey("T", "OnlySlave"): {3: 4}}


@pytest.mark.parametrize("case, master, slave, adopted", ADOPTION_TABLE, ids=[row[0] for row in ADOPTION_TABLE])
def test_the_adoption_table(case, master, slave, adopted):
    plan = plan_merge(0, {0: master, 1: slave})
    assert plan.adopts(1) is adopted
    assert plan.version == (slave if adopted else master)
    decision = decide_adoption(master, slave, SyncDirection.REVERSE)  # what the broker's pre-online asks
    assert isinstance(decision, Adopt if adopted else Keep)
    merged = merge_offsets(0, {0: ConsumerOffsetTable(master, MASTER_TABLE), 1: ConsumerOffsetTable(slave, SLAVE_TABLE)})
    if adopted:  # putAll per topic@group: the slave's entry replaces the master's whole entry; the master's own stay
        assert dict(merged.offsets) == {OffsetKey("T", "G"): {0: 15}, OffsetKey("T", "OnlyMaster"): {0: 5},
                                        OffsetKey("T", "OnlySlave"): {3: 4}}
    else:
        assert dict(merged.offsets) == MASTER_TABLE
    assert merged.data_version == plan.version


def test_slaves_are_visited_in_ascending_id_against_the_version_adopted_so_far():
    plan = plan_merge(0, {2: v(0, 6, 0), 0: v(0, 5, 0), 1: v(0, 7, 0)})
    assert plan.visit_order == (0, 1, 2) and plan.adopted == (0, 1) and plan.version == v(0, 7, 0)
    tables = {0: {"k": 0, "m": 0}, 1: {"k": 1}, 2: {"k": 2, "s": 2}}
    assert merge_entries(plan, tables) == {"k": 1, "m": 0}
    assert plan.entry_source({0, 1, 2}) == 1 and plan.entry_source({0, 2}) == 0 and plan.entry_source({2}) is None


def test_a_master_that_is_not_broker_id_0_starts_the_visit():
    plan = plan_merge(3, {1: v(0, 1, 0), 3: v(0, 1, 0), 5: v(0, 0, 0)})  # controller mode: any id may be master
    assert plan.visit_order == (3, 1, 5) and plan.adopted == (3, 1) and plan.winner == 1


versions = st.builds(v, st.integers(0, 2), st.integers(0, 4), st.integers(0, 3))
tables = st.dictionaries(st.sampled_from(["T@A", "T@B", "U@A"]),
                         st.dictionaries(st.integers(0, 2), st.integers(0, 50), min_size=0, max_size=3), max_size=3)


def _table(version, entries) -> ConsumerOffsetTable:
    return ConsumerOffsetTable(version, {OffsetKey(*key.split("@")): queues for key, queues in entries.items()})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(versions, tables), min_size=1, max_size=4))
def test_pulling_one_member_at_a_time_is_the_same_merge_as_all_at_once(replicas):
    """The broker adopts member by member (its progress survives retries); the diff plans all
    replicas at once: one rule, so the same table."""
    by_id = {broker_id: _table(version, entries) for broker_id, (version, entries) in enumerate(replicas)}
    at_once = merge_offsets(0, by_id)
    current = by_id[0]
    for broker_id in sorted(by_id)[1:]:
        current = merge_offsets(0, {0: current, 1: by_id[broker_id]})
    assert (current.data_version, dict(current.offsets)) == (at_once.data_version, dict(at_once.offsets))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(versions, tables), min_size=2, max_size=4))
def test_the_offset_diffs_native_outcome_is_what_the_broker_merges(replicas):
    by_id = {broker_id: _table(version, entries) for broker_id, (version, entries) in enumerate(replicas)}
    merged = merge_offsets(0, by_id)
    described = [Replica("broker-a", broker_id, "master" if broker_id == 0 else "slave", table.data_version)
                 for broker_id, table in by_id.items()]
    plain = {ReplicaId("broker-a", broker_id): {(key.topic, key.group): dict(queues) for key, queues in table.offsets.items()}
             for broker_id, table in by_id.items()}
    for key in diff_tables(described, plain).keys:
        assert key.native_offset == merged.get(key.topic, key.group, key.queue_id), key


def test_the_update_step_bumps_at_every_nth_commit_and_restarts_at_zero():
    step = UpdateStep(3)
    assert [step.commit() for _ in range(7)] == [False, False, True, False, False, True, False]
    keeper = OffsetKeeper(3, ConsumerOffsetTable(v(0, 10, 1)))
    keeper.commit("T", "G", 0, 1, now_ms=5)
    keeper.commit("T", "G", 0, 2, now_ms=6)
    assert keeper.table.data_version == v(0, 10, 1)
    keeper.commit("T", "G", 0, 3, now_ms=7)
    assert keeper.table.data_version == v(0, 11, 7)
    restarted = OffsetKeeper(3, keeper.table)  # the counter is per process
    restarted.commit("T", "G", 0, 4, now_ms=8)
    assert restarted.commits == 1 and restarted.table.data_version == v(0, 11, 7)


def test_opening_a_state_version():
    base = v(1, 7, 3)
    assert base.opening(now_ms=9) == v(2, 8, 9)  # an acting slave: the next one
    assert base.opening(now_ms=9, state_version=4) == v(4, 8, 9)  # a controller-mode master: its epoch
    assert base.opening(now_ms=9, state_version=1) is base and base.opening(now_ms=9, state_version=0) is base
    keeper = OffsetKeeper(500, ConsumerOffsetTable(base))
    assert keeper.open_state_version(10, 4) and keeper.table.data_version == v(4, 8, 10)
    assert not keeper.open_state_version(11, 4)
