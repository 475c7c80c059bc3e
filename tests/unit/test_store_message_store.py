"""MessageStore on a tmp dir: put/get, segments, filtering, offsets, retention, truncation,
replication hooks and recovery of torn or corrupt tails."""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from metadata.config import ConfigError, bind
from metadata.message import MessageDraft, Prop, tag_hash
from store.config import FlushDiskType, StoreConfig
from store.replica_index import IndexCursor
from store.message_store import (BadOffset, BadReplicationData, BatchTooLarge, GetStatus, MessageStore,
                                 MessageTooLarge, StoreClosed)

SEGMENT = 64 * 1024


class Clock:
    def __init__(self, now: int = 1_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


def make(path: Path, clock=None, **overrides) -> MessageStore:
    settings = dict(mapped_file_size_commit_log=SEGMENT, mapped_file_size_consume_queue=20 * 50,
                    flush_disk_type=FlushDiskType.SYNC_FLUSH)
    settings.update(overrides)
    return MessageStore(StoreConfig(path, **settings), clock or Clock())


def draft(i: int, queue_id: int = 0, topic: str = "T", tag: str | None = None, size: int = 1000) -> MessageDraft:
    props = {Prop.MESSAGE_ID: f"id-{i}"}
    if tag:
        props[Prop.TAG] = tag
    return MessageDraft(topic, queue_id, f"{i:08d}".encode() * (size // 8), 1, "127.0.0.1:1", props, {"k": str(i)})


def run(coroutine):
    return asyncio.run(coroutine)


async def put_each(store, drafts):
    return [(await store.put([d]))[0] for d in drafts]


def segments(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "commitlog").iterdir())


def test_batches_that_cross_segment_ends_split_at_a_blank_and_survive_restart(tmp_path):
    """A put of many records writes one chunk per segment: the one that does not fit starts
    the next segment after a blank, offsets stay in request order, and a dirty restart's
    recovery (which checks every record's CRC and position) cuts nothing."""
    async def scenario():
        store = make(tmp_path)
        store.start()
        stored = []
        for start in range(0, 320, 32):  # 10 puts of 32 x ~1.1 KiB over 64 KiB segments
            stored += await store.put([draft(i, queue_id=i % 2) for i in range(start, start + 32)])
        assert [m.message_id for m in stored] == [f"id-{i}" for i in range(320)]
        assert all(a.commit_offset < b.commit_offset for a, b in zip(stored, stored[1:]))
        assert {m.commit_offset // SEGMENT for m in stored} == set(range(len(segments(tmp_path))))
        assert all(m.commit_offset % SEGMENT + m.size <= SEGMENT - 12 for m in stored)  # room for a blank
        return stored

    stored = run(scenario())  # no shutdown: the next start recovers
    store = make(tmp_path)
    report = store.start()
    assert report.truncated_bytes == 0
    for queue_id in range(2):
        got = store.get("T", queue_id, 0, 1000, max_bytes=1 << 30).messages
        assert [(m.message_id, m.body) for m in got] == [(m.message_id, m.body) for m in stored if m.queue_id == queue_id]
    store.shutdown()


def test_put_get_roll_over_and_restart(tmp_path):
    async def scenario():
        store = make(tmp_path)
        store.start()
        stored = await put_each(store, [draft(i, queue_id=i % 3) for i in range(200)])
        assert [m.queue_offset for m in stored if m.queue_id == 1][:3] == [0, 1, 2]
        assert len(segments(tmp_path)) >= 3
        result = store.get("T", 1, 0, 1000, max_bytes=1 << 30)
        assert result.status is GetStatus.FOUND and len(result.messages) == 67
        assert result.next_offset == result.max_offset == 67
        assert result.messages[5].body == draft(16).body and result.messages[5].user_properties["k"] == "16"
        assert store.read_at(stored[10].commit_offset).message_id == "id-10"
        store.shutdown()
        return stored

    stored = run(scenario())
    store = make(tmp_path)
    report = store.start()
    assert report.truncated_bytes == 0 and report.clean_shutdown
    for queue_id in range(3):
        got = store.get("T", queue_id, 0, 1000, max_bytes=1 << 30).messages
        assert [m.message_id for m in got] == [m.message_id for m in stored if m.queue_id == queue_id]
    assert store.queues() == {"T": [0, 1, 2]}
    store.shutdown()


def test_rows_are_the_same_put_as_drafts_and_a_refused_row_assigns_nothing(tmp_path):
    """put_rows (the send path's put) writes what put of the same drafts writes, and answers
    where each record went; a row refused in the middle leaves no offset taken."""
    from store.put_rows import row_of

    async def scenario():
        by_rows, by_drafts = make(tmp_path / "rows"), make(tmp_path / "drafts")
        by_rows.start(), by_drafts.start()
        drafts = [draft(i, queue_id=i % 2, tag="a" if i % 3 else None) for i in range(7)]
        now, placed = await by_rows.put_rows([row_of(d) for d in drafts])
        stored = await by_drafts.put(drafts)
        assert now == 1_000_000
        assert placed == [(m.commit_offset, m.size, m.queue_offset) for m in stored]
        assert [q for _, _, q in placed] == [0, 0, 1, 1, 2, 2, 3]
        for queue_id in (0, 1):
            rows_got = by_rows.get("T", queue_id, 0, 100, max_bytes=1 << 30).messages
            drafts_got = by_drafts.get("T", queue_id, 0, 100, max_bytes=1 << 30).messages
            assert [(m.draft, m.commit_offset, m.queue_offset) for m in rows_got] == \
                   [(m.draft, m.commit_offset, m.queue_offset) for m in drafts_got]
        end = by_rows.commit_log_max_offset
        with pytest.raises(MessageTooLarge):
            await by_rows.put_rows([row_of(draft(8)), row_of(draft(9, size=SEGMENT * 2))])
        assert by_rows.commit_log_max_offset == end
        _, placed = await by_rows.put_rows([row_of(draft(10))])
        assert placed[0][2] == 4  # queue 0 goes on from 4: the refused put took nothing
        by_rows.shutdown(), by_drafts.shutdown()

    run(scenario())


def test_get_statuses_limits_and_tag_filter(tmp_path):
    async def scenario():
        store = make(tmp_path)
        store.start()
        await store.put([draft(i, tag="a" if i % 4 else "b", size=100) for i in range(40)])
        assert store.get("T", 9, 0, 10).status is GetStatus.NO_MESSAGE_IN_QUEUE
        assert store.get("T", 0, 40, 10).status is GetStatus.OFFSET_OVERFLOW
        only_b = store.get("T", 0, 0, 100, tag_codes=frozenset({tag_hash("b")}))
        assert [m.queue_offset for m in only_b.messages] == list(range(0, 40, 4))
        none = store.get("T", 0, 1, 100, tag_codes=frozenset({tag_hash("zzz")}))
        assert none.status is GetStatus.NO_MATCHED and none.next_offset == 40
        limited = store.get("T", 0, 0, 5)
        assert len(limited.messages) == 5 and limited.next_offset == 5
        by_bytes = store.get("T", 0, 0, 100, max_bytes=1)
        assert len(by_bytes.messages) == 1 and by_bytes.next_offset == 1
        with pytest.raises(BatchTooLarge):
            await store.put([draft(0)] * (store.config.max_batch_put + 1))
        with pytest.raises(MessageTooLarge):
            await store.put([draft(0, size=SEGMENT)])
        assert store.max_offset("T", 0) == 40
        store.shutdown()
        with pytest.raises(StoreClosed):
            await store.put([draft(1)])

    run(scenario())


def test_offset_for_timestamp_and_earliest_store_time(tmp_path):
    clock = Clock(5000)

    async def scenario():
        store = make(tmp_path, clock)
        store.start()
        assert store.earliest_store_time("T", 0) is None
        for i in range(20):
            clock.now = 5000 + i * 10
            await store.put([draft(i, size=64)])
        assert store.earliest_store_time("T", 0) == 5000
        assert store.offset_for_timestamp("T", 0, 0) == 0
        assert store.offset_for_timestamp("T", 0, 5055) == 6
        assert store.offset_for_timestamp("T", 0, 5060) == 6
        assert store.offset_for_timestamp("T", 0, 99999) == 20
        store.shutdown()

    run(scenario())


def test_retention_deletes_old_segments_and_advances_min_offsets(tmp_path):
    clock = Clock(0)

    async def scenario():
        store = make(tmp_path, clock, file_reserved_time_hours=1.0, disk_max_used_space_ratio=99,
                     disk_space_warning_level_ratio=100)
        store.start()
        await put_each(store, [draft(i, size=1000) for i in range(100)])  # ~2 segments
        clock.now = 2 * 3600 * 1000
        await put_each(store, [draft(i, size=1000) for i in range(100, 200)])
        before = len(segments(tmp_path))
        clock.now = 2 * 3600 * 1000 + 10
        deleted = store.clean_expired()
        assert deleted >= 1 and len(segments(tmp_path)) == before - deleted
        low = store.min_offset("T", 0)
        assert 0 < low <= 100
        assert store.get("T", 0, 0, 10).status is GetStatus.OFFSET_TOO_SMALL
        first = store.get("T", 0, low, 1).messages[0]
        assert first.queue_offset == low and first.commit_offset >= store.commit_log_min_offset
        assert store.earliest_store_time("T", 0) is not None
        store.shutdown()

    run(scenario())
    store = make(tmp_path, clock)
    store.start()
    assert store.min_offset("T", 0) > 0 and store.max_offset("T", 0) == 200
    store.shutdown()


def test_disk_pressure_deletes_oldest_even_if_young(tmp_path):
    async def scenario():
        store = make(tmp_path, disk_max_used_space_ratio=1, disk_space_warning_level_ratio=100)
        store.start()
        await put_each(store, [draft(i) for i in range(200)])
        assert store.clean_expired() >= 1
        assert store.commit_log_min_offset > 0
        store.shutdown()

    run(scenario())


def test_truncate_repairs_queues_and_puts_continue(tmp_path):
    async def scenario():
        store = make(tmp_path)
        store.start()
        stored = await put_each(store, [draft(i, queue_id=i % 2) for i in range(150)])
        cut = stored[100]
        store.truncate(cut.commit_offset)
        assert store.commit_log_max_offset == cut.commit_offset
        assert store.max_offset("T", 0) == 50 and store.max_offset("T", 1) == 50
        assert store.read_at(cut.commit_offset) is None
        with pytest.raises(BadOffset):
            store.truncate(cut.commit_offset + 10**6)
        with pytest.raises(BadOffset):
            store.truncate(stored[50].commit_offset + 3)
        again = await store.put([draft(999, queue_id=0)])
        assert again[0].queue_offset == 50 and again[0].commit_offset == cut.commit_offset
        store.shutdown()

    run(scenario())
    store = make(tmp_path)
    store.start()
    got = store.get("T", 0, 0, 1000, max_bytes=1 << 30).messages
    assert [m.message_id for m in got[-2:]] == ["id-98", "id-999"] and len(got) == 51
    store.shutdown()


def test_read_raw_append_raw_make_identical_logs(tmp_path):
    async def scenario():
        master, slave = make(tmp_path / "m"), make(tmp_path / "s", flush_disk_type=FlushDiskType.ASYNC_FLUSH)
        master.start(), slave.start()
        await put_each(master, [draft(i, queue_id=i % 2, tag="x") for i in range(150)])
        woken = []
        slave.add_append_listener(lambda *args: woken.append(args))
        with pytest.raises(BadReplicationData):
            slave.append_raw(0, b"\x00" * 100, ())
        offset, cursor = 0, IndexCursor()
        while offset < master.commit_log_max_offset:
            data = master.read_raw(offset, 5000)
            assert data
            slave.append_raw(offset, data, master.replication_index(cursor, offset, offset + len(data)))
            offset = slave.commit_log_max_offset
        assert master.read_raw(offset, 5000) == b""
        with pytest.raises(BadReplicationData):
            slave.append_raw(offset - 10, b"x", ())
        assert woken and woken[-1][2] == 75
        for queue_id in (0, 1):
            assert ([m.message_id for m in slave.get("T", queue_id, 0, 1000, 1 << 30).messages]
                    == [m.message_id for m in master.get("T", queue_id, 0, 1000, 1 << 30).messages])
        master.shutdown(), slave.shutdown()

    run(scenario())
    names = segments(tmp_path / "m")
    assert names == segments(tmp_path / "s")
    for name in names:
        left = (tmp_path / "m" / "commitlog" / name).read_bytes()
        right = (tmp_path / "s" / "commitlog" / name).read_bytes()
        assert left[:len(right)] == right  # the master's file goes on with the zeros it keeps ahead
        assert left[len(right):].count(0) == len(left) - len(right)


def _last_record(tmp_path) -> tuple[Path, list]:
    async def scenario():
        store = make(tmp_path)
        store.start()
        stored = await put_each(store, [draft(i, size=200) for i in range(30)])
        store.shutdown()
        return stored
    stored = run(scenario())
    return tmp_path / "commitlog" / segments(tmp_path)[-1], stored


@pytest.mark.parametrize("damage", ["torn", "flip", "garbage"])
def test_recovery_cuts_a_damaged_tail_and_never_serves_it(tmp_path, damage):
    path, stored = _last_record(tmp_path)
    last = stored[-1]
    position = last.commit_offset % SEGMENT
    with open(path, "r+b") as file:
        if damage == "torn":
            file.truncate(position + last.size // 2)
        elif damage == "flip":
            file.seek(position + last.size - 3)
            byte = file.read(1)
            file.seek(position + last.size - 3)
            file.write(bytes([byte[0] ^ 0x40]))
        else:
            file.seek(0, os.SEEK_END)
            file.write(os.urandom(333))
    store = make(tmp_path)
    report = store.start()
    expected_end = last.commit_offset if damage != "garbage" else last.next_commit_offset
    assert report.commit_log_max_offset == expected_end and report.truncated_bytes > 0
    got = store.get("T", 0, 0, 1000, 1 << 30)
    assert [m.message_id for m in got.messages] == [m.message_id for m in stored[:-1 if damage != "garbage" else 30]]
    again = run(_put_one(store))
    assert again.commit_offset == expected_end
    store.shutdown()


def test_zeros_kept_ahead_of_the_data_are_a_clean_end_and_a_stray_byte_in_them_is_cut(tmp_path):
    """The commit log keeps zeros written past its data (cheaper group-commit syncs).  A dirty
    restart takes them for the clean end: nothing truncated, no note.  A non-zero byte among
    them is damage: cut, noted, and every record before it still served."""
    async def scenario():
        store = make(tmp_path, mapped_file_size_commit_log=16 << 20)
        store.start()
        return await put_each(store, [draft(i, size=200) for i in range(30)])

    stored = run(scenario())  # no shutdown
    path = tmp_path / "commitlog" / segments(tmp_path)[-1]
    end = stored[-1].next_commit_offset
    data = path.read_bytes()
    assert len(data) >= end + (2 << 20) and data[end:].count(0) == len(data) - end
    store = make(tmp_path, mapped_file_size_commit_log=16 << 20)
    report = store.start()
    assert (report.commit_log_max_offset, report.truncated_bytes, report.notes) == (end, 0, ())
    store.shutdown()
    with open(path, "r+b") as file:
        file.seek(0, os.SEEK_END)
        file.write(bytes(1 << 20))  # zeros as far again, then one stray byte
        file.write(b"\x01")
    store = make(tmp_path, mapped_file_size_commit_log=16 << 20)
    report = store.start()
    assert report.commit_log_max_offset == end and report.truncated_bytes > 0 and report.notes
    got = store.get("T", 0, 0, 1000, 1 << 30)
    assert [m.message_id for m in got.messages] == [m.message_id for m in stored]
    assert run(_put_one(store)).commit_offset == end
    store.shutdown()


def test_an_async_flush_store_writes_no_zeros_ahead(tmp_path):
    """Zeros ahead make a SYNC_FLUSH group commit's fdatasync cheaper; an ASYNC_FLUSH store would
    only write twice the bytes for them (store.commit_log)."""
    async def scenario():
        store = make(tmp_path, mapped_file_size_commit_log=16 << 20, flush_disk_type=FlushDiskType.ASYNC_FLUSH)
        store.start()
        stored = await put_each(store, [draft(i, size=200) for i in range(30)])
        store.shutdown()
        return stored

    stored = run(scenario())
    assert (tmp_path / "commitlog" / segments(tmp_path)[-1]).stat().st_size == stored[-1].next_commit_offset


async def _put_one(store):
    return (await store.put([draft(777, size=200)]))[0]


def test_recovery_cuts_consume_queue_entries_past_the_log_end(tmp_path):
    path, stored = _last_record(tmp_path)
    with open(path, "r+b") as file:
        file.truncate(stored[20].commit_offset % SEGMENT)  # lose 10 records the CQ still lists
    store = make(tmp_path)
    report = store.start()
    assert report.consume_queue_entries_cut == 10
    assert store.max_offset("T", 0) == 20
    assert len(store.get("T", 0, 0, 1000, 1 << 30).messages) == 20
    store.shutdown()


def test_recovery_rebuilds_lost_consume_queues(tmp_path):
    _, stored = _last_record(tmp_path)
    for file in (tmp_path / "consumequeue" / "T" / "0").iterdir():
        file.unlink()
    (tmp_path / "checkpoint").unlink()
    store = make(tmp_path)
    report = store.start()
    assert report.records_replayed == 30
    assert [m.message_id for m in store.get("T", 0, 0, 1000, 1 << 30).messages] == [m.message_id for m in stored]
    store.shutdown()


def test_group_commit_acknowledges_concurrent_puts(tmp_path):
    async def scenario():
        store = make(tmp_path)
        store.start()
        results = await asyncio.gather(*(store.put([draft(i, queue_id=i % 4)]) for i in range(64)))
        assert store.flushed_offset >= max(r[0].next_commit_offset for r in results)
        assert sum(store.max_offset("T", q) for q in range(4)) == 64
        store.shutdown()

    run(scenario())


def test_config_binds_rocketmq_keys_and_rejects_bad_values(tmp_path):
    config = bind(StoreConfig, {"storePathRootDir": str(tmp_path), "flushDiskType": "SYNC_FLUSH",
                                "mappedFileSizeCommitLog": "65536", "fileReservedTime": "48"}, "broker.conf")
    assert config.flush_disk_type is FlushDiskType.SYNC_FLUSH and config.file_reserved_time_hours == 48
    with pytest.raises(ConfigError, match="mappedFileSizeConsumeQueue"):
        StoreConfig(tmp_path, mapped_file_size_consume_queue=1001)
    with pytest.raises(ConfigError, match="flushDiskType"):
        bind(StoreConfig, {"storePathRootDir": str(tmp_path), "flushDiskType": "SOMETIMES"}, "broker.conf")


def test_confirm_offset_survives_restart_in_the_checkpoint(tmp_path):
    store = make(tmp_path)
    store.start()
    store.set_confirm_offset(12345)
    store.shutdown()
    store = make(tmp_path)
    store.start()
    assert store.confirm_offset == 12345
    store.shutdown()


def test_sync_put_that_outlives_sync_flush_timeout_fails_and_its_records_show_once_flushed(tmp_path):
    import threading
    from dataclasses import replace

    from store.errors import FlushTimeout

    async def scenario():
        store = make(tmp_path, sync_flush_timeout_ms=50)
        store.start()
        release = threading.Event()
        hooks = store._flush._hooks
        store._flush._hooks = replace(hooks, sync_commit_log=lambda low, high: (release.wait(5), hooks.sync_commit_log(low, high)))
        with pytest.raises(FlushTimeout):
            await store.put([draft(1)])
        assert store.get("T", 0, 0, 10).messages == []  # not durable yet: not visible
        release.set()
        for _ in range(100):
            if store.get("T", 0, 0, 10).messages:
                break
            await asyncio.sleep(0.01)
        assert [m.message_id for m in store.get("T", 0, 0, 10).messages] == ["id-1"]
        store.shutdown()
    run(scenario())


def test_get_reads_neighbouring_records_at_once_and_still_skips_a_corrupt_one(tmp_path):
    async def scenario():
        store = make(tmp_path)
        store.start()
        stored = await store.put([draft(i, queue_id=i % 2) for i in range(120)])  # crosses a 64 KiB segment
        ours = [m for m in stored if m.queue_id == 0]
        got = store.get("T", 0, 0, 60)
        assert [m.message_id for m in got.messages] == [m.message_id for m in ours]
        assert got.messages == [store.read_at(m.commit_offset) for m in ours]
        victim = ours[3]
        segment = tmp_path / "commitlog" / segments(tmp_path)[0]
        with open(segment, "r+b") as handle:  # flip one body byte: the record's CRC no longer matches
            handle.seek(victim.commit_offset + victim.size - 10)
            byte = handle.read(1)
            handle.seek(victim.commit_offset + victim.size - 10)
            handle.write(bytes([byte[0] ^ 1]))
        got = store.get("T", 0, 0, 8)
        assert [m.queue_offset for m in got.messages] == [0, 1, 2, 4, 5, 6, 7, 8] and got.next_offset == 9
        store.shutdown()
    run(scenario())


def test_messages_from_counts_entries_at_or_past_a_commit_offset(tmp_path):
    store = make(tmp_path)
    store.start()
    try:
        stored = run(put_each(store, [draft(i, queue_id=i % 3, topic="T" if i % 2 else "U") for i in range(10)]))
        assert store.messages_from(0) == 10
        assert store.messages_from(stored[4].commit_offset) == 6
        assert store.messages_from(stored[4].commit_offset + 1) == 5
        assert store.messages_from(store.commit_log_max_offset) == 0
    finally:
        store.shutdown()


def test_messages_from_counts_what_a_walk_counts_after_puts_cuts_and_puts_again(tmp_path):
    """Each queue's last entry is kept between writes (store.consume_queue.last_entry): a cut
    of the log followed by puts that bring a queue back to the same length must not leave the
    old last entry behind.  Every count is checked against one made from the stored records."""
    store = make(tmp_path)
    store.start()
    try:
        def walked(offset: int) -> int:
            return sum(1 for s in kept if s.commit_offset >= offset)

        kept = run(put_each(store, [draft(i, queue_id=i % 3, topic="T") for i in range(12)]))
        for probe in kept:
            assert store.messages_from(probe.commit_offset) == walked(probe.commit_offset)
        store.truncate(kept[6].commit_offset)  # queues 0, 1, 2 lose their last two entries each
        kept = kept[:6]  # no count here: the queues' last entries stay as read before the cut
        again = run(put_each(store, [draft(100 + i, queue_id=i % 3, topic="T", size=2000) for i in range(6)]))
        kept += again
        for probe in kept:
            assert store.messages_from(probe.commit_offset) == walked(probe.commit_offset)
            assert store.messages_from(probe.commit_offset + 1) == walked(probe.commit_offset + 1)
    finally:
        store.shutdown()


def test_sync_flush_puts_of_one_loop_pass_share_one_wake_of_the_flush_thread(tmp_path):
    """Waking the waiting flush thread costs the loop tens of microseconds on a VM: the puts one
    pass of the loop makes (concurrent calls served together) wake it once, and all complete."""
    async def scenario():
        store = make(tmp_path)
        store.start()
        wakes = []
        real_wake = store._flush.wake
        store._flush.wake = lambda: (wakes.append(1), real_wake())[1]
        stored = await asyncio.gather(*(store.put([draft(i)]) for i in range(16)))
        assert len(wakes) == 1 and [s[0].queue_offset for s in stored] == list(range(16))
        await store.put([draft(16)])
        assert len(wakes) == 2 and store.flushed_offset == store.commit_log_max_offset
        store.shutdown()
    run(scenario())
