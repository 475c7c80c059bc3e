"""SYNC_FLUSH group commits (store/group_commit.py, store/flush.py): when they sync, and where.

The policy by tables; then the store driving it, with its real files: concurrent puts share
one fdatasync, a window gathers puts that arrive apart, a lone producer and two producers
soon stop waiting, and the loop syncs only while the disk is fast."""
from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from types import SimpleNamespace

import pytest

from store import flush as flush_module
from store.config import FlushDiskType
from store.group_commit import GroupCommit
from tests.unit.test_store_message_store import draft, make, put_each, run

FAST, SLOW = 0.0001, 0.5


def places(commit: GroupCommit, syncs: list[tuple[float, bool]]) -> list[bool]:
    seen = []
    for seconds, inline in syncs:
        commit.observe_sync(seconds, inline=inline)
        seen.append(commit.inline)
    return seen


@pytest.mark.parametrize("syncs, expected", [
    # starts on the thread; the third fast thread sync in a row moves it to the loop
    ([(FAST, False)] * 3, [False, False, True]),
    # a slow thread sync starts the count again
    ([(FAST, False), (FAST, False), (SLOW, False), (FAST, False), (FAST, False)], [False] * 5),
    # one slow sync on the loop sends it back to the thread at once ...
    ([(FAST, False)] * 3 + [(FAST, True), (SLOW, True)], [False, False, True, True, False]),
    # ... and it needs another run of fast thread syncs to come back
    ([(FAST, False)] * 3 + [(SLOW, True)] + [(FAST, False)] * 3, [False, False, True, False, False, False, True]),
    # fast syncs on the loop keep it there
    ([(FAST, False)] * 3 + [(FAST, True)] * 4, [False, False, True] + [True] * 4),
    # exactly the bound is still fast
    ([(0.002, False)] * 3, [False, False, True]),
])
def test_the_loop_syncs_only_after_a_run_of_fast_syncs_and_leaves_after_one_slow(syncs, expected):
    assert places(GroupCommit(window_s=0.002, fast_s=0.002, fast_in_a_row=3), syncs) == expected


def test_not_allowed_on_the_loop_every_sync_stays_on_the_thread():
    assert places(GroupCommit(window_s=0.002, on_loop=False, fast_in_a_row=3), [(FAST, False)] * 10) == [False] * 10


def windows(commit: GroupCommit, groups: list[int]) -> list[bool]:
    """Whether each group waited, given how many puts each gathered."""
    waited = []
    for puts in groups:
        waited.append(commit.window_s > 0)
        commit.observe_window(puts, waited[-1])
    return waited


@pytest.mark.parametrize("groups, expected", [
    # sends that come together keep waiting
    ([5, 3, 2, 8], [True] * 4),
    # a wait for nothing: the next 2 sync at once, then it tries again
    ([1, 1, 1, 1], [True, False, False, True]),
    # each further wait for nothing doubles the groups skipped (2, 4, then at most 6)
    ([1] * 17, [True, False, False, True] + [False] * 4 + [True] + [False] * 6 + [True] + [False] * 1),
    # company seen in a group that did not wait: the next waits, and the backoff starts again at 2
    ([1, 1, 3, 1, 1, 1], [True, False, False, True, False, False]),
    # the group after the longer skip waits again, finds company, and the backoff is reset
    ([1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1], [True, False, False, True, False, False, False, False, True, True, False, False]),
])
def test_a_group_waits_for_company_only_while_puts_come_together(groups, expected):
    assert windows(GroupCommit(window_s=0.002, skip_after_empty=2, skip_most=6, min_company=2), groups) == expected


@pytest.mark.parametrize("groups, expected", [
    # three or more together keep waiting
    ([3, 5, 3, 3], [True] * 4),
    # two producers: a window that gathered two was too little; the next 2 sync at once
    ([2, 2, 2, 2, 2, 2, 2, 2, 2], [True, False, False, True, False, False, False, False, True]),
    # two in one pass of the loop are not company; three are, and the next group waits
    ([2, 2, 2, 3, 3], [True, False, False, True, True]),
    ([2, 1, 3, 3], [True, False, False, True]),
])
def test_two_producers_are_too_few_to_wait_for(groups, expected):
    assert windows(GroupCommit(window_s=0.002, skip_after_empty=2, skip_most=6, min_company=3), groups) == expected


def test_with_no_window_no_group_waits():
    assert windows(GroupCommit(window_s=0.0), [5, 1, 1, 3]) == [False] * 4


def counting_syncs(store) -> list[tuple[int, int, bool]]:
    """Every commit-log fdatasync of ``store``: (low, high, on the loop's thread)."""
    calls, real = [], store._flush._hooks.sync_commit_log
    loop_thread = threading.current_thread()

    def sync(low: int, high: int) -> None:
        calls.append((low, high, threading.current_thread() is loop_thread))
        real(low, high)
    store._flush._hooks = dataclasses.replace(store._flush._hooks, sync_commit_log=sync)
    return calls


@pytest.mark.parametrize("window_us", [0, 2000])
def test_the_puts_of_one_pass_share_one_fdatasync(tmp_path, window_us):
    async def scenario():
        store = make(tmp_path, group_commit_window_us=window_us)
        store.start()
        syncs = counting_syncs(store)
        stored = await asyncio.gather(*(store.put([draft(i)]) for i in range(16)))
        assert len(syncs) == 1 and [s[0].queue_offset for s in stored] == list(range(16))
        assert store.flushed_offset == store.commit_log_max_offset
        store.shutdown()
    run(scenario())


def test_a_window_gathers_puts_that_arrive_apart_and_none_returns_before_its_fdatasync(tmp_path):
    async def scenario():
        store = make(tmp_path, group_commit_window_us=100_000)
        store.start()
        syncs = counting_syncs(store)
        first = asyncio.ensure_future(store.put([draft(0)]))
        await asyncio.sleep(0.02)
        assert not first.done() and syncs == []      # written, waiting for company
        second = asyncio.ensure_future(store.put([draft(1)]))
        await asyncio.gather(first, second)
        assert len(syncs) == 1 and syncs[0][1] == store.commit_log_max_offset
        store.shutdown()
    run(scenario())


def recording_groups(store) -> list[tuple[int, bool]]:
    """Every group ``store`` ends, as (messages in it, whether it waited its window)."""
    groups, real = [], store._flush._group.observe_window

    def observe(messages: int, waited: bool) -> None:
        groups.append((messages, waited))
        real(messages, waited)
    store._flush._group.observe_window = observe
    return groups


def test_a_lone_producer_soon_stops_waiting(tmp_path):
    """One send at a time: the first group waits for nothing, the next 16 sync at once, then one
    waits again and 32 sync at once (store.group_commit.SKIP_AFTER_EMPTY)."""
    async def scenario():
        store = make(tmp_path, group_commit_window_us=20_000)
        store.start()
        groups = recording_groups(store)
        await put_each(store, [draft(i) for i in range(50)])
        assert [i for i, (_, waited) in enumerate(groups) if waited] == [0, 17] and len(groups) == 50
        store.shutdown()
    run(scenario())


def test_two_producers_sync_at_once_after_the_first_window(tmp_path):
    """Two sends at a time (store.group_commit.MIN_COMPANY): the first group waits its window
    and gathers both; the next 16 sync at once, then one waits again."""
    async def scenario():
        store = make(tmp_path, group_commit_window_us=20_000)
        store.start()
        groups = recording_groups(store)
        for i in range(0, 60, 2):
            stored = await asyncio.gather(store.put([draft(i)]), store.put([draft(i + 1)]))
            assert [s[0].queue_offset for s in stored] == [i, i + 1]
        assert [i for i, (_, waited) in enumerate(groups) if waited] == [0, 17]
        assert groups[0] == (2, True) and len(groups) == 30
        store.shutdown()
    run(scenario())


def test_two_producers_of_batches_keep_waiting_for_each_other(tmp_path):
    """Company is counted in messages: two puts of 32 messages each are company enough."""
    async def scenario():
        store = make(tmp_path, group_commit_window_us=20_000)
        store.start()
        groups = recording_groups(store)
        for i in range(0, 20 * 64, 64):
            await asyncio.gather(store.put([draft(i + j) for j in range(32)]),
                                 store.put([draft(i + 32 + j) for j in range(32)]))
        assert groups == [(64, True)] * 20
        store.shutdown()
    run(scenario())


def test_the_loop_syncs_itself_while_the_disk_is_fast_and_hands_back_after_one_slow_sync(tmp_path, monkeypatch):
    # how long a sync took is read from a clock the test moves (real fdatasyncs, their time
    # not left to the machine: on a busy one a sync of 2 ms was "slow" and the run reset)
    clock = [0.0]
    monkeypatch.setattr(flush_module, "time", SimpleNamespace(perf_counter=lambda: clock[0], monotonic=time.monotonic))

    async def scenario():
        store = make(tmp_path, group_commit_window_us=0)
        store.start()
        syncs = counting_syncs(store)
        await put_each(store, [draft(i) for i in range(12)])
        assert [on_loop for _, _, on_loop in syncs] == [False] * 8 + [True] * 4   # FAST_IN_A_ROW = 8
        real = store._flush._hooks.sync_commit_log

        def slow(low: int, high: int) -> None:
            clock[0] += 0.01
            real(low, high)
        store._flush._hooks = dataclasses.replace(store._flush._hooks, sync_commit_log=slow)
        await put_each(store, [draft(i) for i in range(12, 15)])
        assert [on_loop for _, _, on_loop in syncs[12:]] == [True, False, False]
        assert store.flushed_offset == store.commit_log_max_offset
        store.shutdown()
    run(scenario())


def test_a_slaves_runs_committed_together_share_one_fdatasync_and_their_wait_does_not_break_the_group(tmp_path):
    """A slave commits copied runs on its loop and acks each after its fdatasync
    (MessageStore.wait_flushed): runs committed in one pass share one sync, and the ack's wait
    does not wake the thread for a sync of its own while the group is open."""
    from store.replica_index import IndexCursor

    async def scenario():
        master = make(tmp_path / "master", flush_disk_type=FlushDiskType.ASYNC_FLUSH)
        master.start()
        await put_each(master, [draft(i) for i in range(8)])
        slave = make(tmp_path / "slave")
        slave.start()
        syncs = counting_syncs(slave)
        cursor, start = IndexCursor(), 0
        for end in [master.commit_log_max_offset // 2, master.commit_log_max_offset]:
            data = master.read_raw(start, end - start)
            slave.append_raw(start, data, master.replication_index(cursor, start, start + len(data)))
            start += len(data)
        await asyncio.gather(slave.wait_flushed(start // 2), slave.wait_flushed(start))
        assert len(syncs) == 1 and syncs[0][1] == master.commit_log_max_offset
        assert slave.flushed_offset == master.commit_log_max_offset
        slave.shutdown()
        master.shutdown()
    run(scenario())


@pytest.mark.parametrize("value, reason", [(-1, "0"), (200_000, "100000"), ("soon", "integer")])
def test_group_commit_window_micros_refuses_bad_values_naming_the_key(tmp_path, value, reason):
    from metadata.config import ConfigError, bind
    from store.config import StoreConfig

    with pytest.raises(ConfigError) as refused:
        bind(StoreConfig, {"storePathRootDir": str(tmp_path), "groupCommitWindowMicros": value}, "broker.toml")
    assert refused.value.key == "groupCommitWindowMicros" and reason in str(refused.value)
