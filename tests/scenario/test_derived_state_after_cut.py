"""Derived state after a log cut: the pop table, the timer index and the transaction table
are rebuilt from the log when it was cut below their cursors, in memory (the store's
derived generation) and after a crash (the state files' anchors, services.broker.system_log).
A Broker over the real message store in a tmp dir, time on a ManualClock."""
from __future__ import annotations

import asyncio

import pytest

from metadata.message import MessageDraft, MessageType, Prop
from services.broker.api import SendItem
from tests.scenario.test_broker_flows import Harness, _with_topic, run


@pytest.fixture
def harness(tmp_path):
    return Harness(tmp_path)


def test_a_cut_pop_log_is_replayed_from_the_start_not_skipped_past(harness):
    """bench/chaos.py finding (a partitioned master rejoined as a slave, was promoted again and
    never delivered one FIFO queue again; 414 acknowledged messages not consumed): the master
    had applied its own pop records and moved its cursor past them; rejoining, its log was cut
    below them and the new master's records were copied in at the same offsets; promoted
    again, its cursor skipped those and its table kept the cut ones.  A truncation (and a
    step-down) makes the pop table, the timer index and the transaction table rebuild from
    the log."""
    from scheduler.pop.records import REVIVE_TOPIC, AckRecord, InFlight, PopRecord, QueueKey, encode_records

    async def scenario():
        broker = await _with_topic(harness, queues=1)
        for body in (b"1", b"2", b"3", b"4"):
            await harness.send("T", body)
        store = harness.store
        cut = store.commit_log_max_offset
        got = await harness.receive("G", "T", batch=2, invisible_ms=5000)   # this master's records: cut below
        await broker.ack("G", "T", "", got[0].receipt_handle)
        assert broker.pop.committed_offset("G", "T", 0) == 1
        store.truncate(cut)   # rejoining as a slave: the consistent point with the new master
        # the new master delivered 1, 2 and 3 and had them acked; its records land at the same offsets
        key, now = QueueKey("G", "T", 0), harness.clock.now_ms()
        stored = store.get("T", 0, 0, 3).messages
        entries = tuple(InFlight(m.queue_offset, now * 1000 + m.queue_offset, 1, now + 5000, 16, m.commit_offset)
                        for m in stored)
        records = [PopRecord(key, 0, 3, entries)] + [AckRecord(key, m.queue_offset) for m in stored]
        await store.put([MessageDraft(REVIVE_TOPIC, 0, body, now) for body in encode_records(records)])
        broker.pop.catch_up()
        assert broker.pop.committed_offset("G", "T", 0) == 3
        assert [d.message.body for d in await harness.receive("G", "T")] == [b"4"]
        await harness.stop()
    run(scenario())


def test_a_cut_timer_log_is_indexed_again_so_the_new_masters_delay_message_is_delivered(harness):
    """The timer's side of the finding above: this master delivered its delay message (an op
    record resolves timer offset 0); rejoining, both were cut and the new master's delay
    message landed at timer offset 0.  The index rebuilt from the log delivers it; a cursor
    past the cut kept offset 0 resolved and never delivered it."""
    async def scenario():
        broker = await _with_topic(harness, kind="DELAY")
        store = harness.store
        cut = store.commit_log_max_offset
        now = harness.clock.now_ms()
        await harness.send("T", b"cut", kind=MessageType.DELAY, due=now + 1000)
        harness.clock.advance(1000)
        assert await broker.run_timer() == 1
        store.truncate(cut)
        draft = MessageDraft("T", 0, b"new master's", harness.clock.now_ms(), properties={Prop.MESSAGE_ID: "ID-NEW"})
        await broker.timer.schedule(draft, harness.clock.now_ms() + 1000)   # as copied from the new master
        harness.clock.advance(1000)
        assert await broker.run_timer() == 1
        assert [d.message.body for d in await harness.receive("G", "T")] == [b"new master's"]
        await harness.stop()
    run(scenario())


def _crash_copy(harness, tmp_path_factory):
    """The broker's directory as kill -9 would leave it now: no stop, no state file written."""
    import shutil
    copy = tmp_path_factory.mktemp("after-crash")
    shutil.copytree(harness.tmp_path, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns("lock"))
    return Harness(copy)


def _across_a_crash(harness, before_crash, after_crash):
    """``before_crash()`` returns the Harness of the crash copy; ``after_crash`` starts it."""
    restarted = run(before_crash())
    run(after_crash(restarted))
    run(harness.stop())


def test_a_pop_state_file_written_before_a_cut_is_not_trusted_after_a_crash(harness, tmp_path_factory):
    """The cut-pop-log finding on the crash path: popState.json (cursor past the cut, the cut
    records in its table) was written before the log was cut and the new master's records
    copied in; killed before the next state file, the broker started from that file and
    skipped the new master's records.  The file's anchor no longer matches the log: the
    state is rebuilt from the log."""
    from scheduler.pop.records import REVIVE_TOPIC, AckRecord, InFlight, PopRecord, QueueKey, encode_records

    async def before_crash():
        broker = await _with_topic(harness, queues=1)
        for body in (b"1", b"2", b"3", b"4"):
            await harness.send("T", body)
        store = harness.store
        cut = store.commit_log_max_offset
        got = await harness.receive("G", "T", batch=2, invisible_ms=5000)
        await broker.ack("G", "T", "", got[0].receipt_handle)
        broker.persist()                      # the file: cursor 2, message 1 acked, message 2 in flight
        store.truncate(cut)
        key, now = QueueKey("G", "T", 0), harness.clock.now_ms()
        stored = store.get("T", 0, 0, 3).messages
        entries = tuple(InFlight(m.queue_offset, now * 1000 + m.queue_offset, 1, now + 5000, 16, m.commit_offset)
                        for m in stored)
        records = [PopRecord(key, 0, 3, entries)] + [AckRecord(key, m.queue_offset) for m in stored]
        await store.put([MessageDraft(REVIVE_TOPIC, 0, body, now) for body in encode_records(records)])
        return _crash_copy(harness, tmp_path_factory)

    async def after_crash(restarted):
        broker = await restarted.start()
        assert broker.pop.committed_offset("G", "T", 0) == 3
        assert [d.message.body for d in await restarted.receive("G", "T")] == [b"4"]
        await restarted.stop()

    _across_a_crash(harness, before_crash, after_crash)


def test_a_timer_file_written_before_a_cut_is_not_trusted_after_a_crash(harness, tmp_path_factory):
    """The timer's side: the file says timer offset 0 was delivered (this master's message,
    then cut); the new master's delay message at timer offset 0 is delivered after the crash."""
    async def before_crash():
        broker = await _with_topic(harness, kind="DELAY")
        store = harness.store
        cut = store.commit_log_max_offset
        await harness.send("T", b"cut", kind=MessageType.DELAY, due=harness.clock.now_ms() + 1000)
        harness.clock.advance(1000)
        assert await broker.run_timer() == 1
        broker.persist()                      # the file: both timer cursors past offset 0
        store.truncate(cut)
        draft = MessageDraft("T", 0, b"new master's", harness.clock.now_ms(), properties={Prop.MESSAGE_ID: "ID-NEW"})
        await broker.timer.schedule(draft, harness.clock.now_ms() + 1000)
        return _crash_copy(harness, tmp_path_factory)

    async def after_crash(restarted):
        restarted.clock.advance(harness.clock.now_ms() + 1000 - restarted.clock.now_ms())
        broker = await restarted.start()
        assert await broker.run_timer() == 1
        assert [d.message.body for d in await restarted.receive("G", "T")] == [b"new master's"]
        await restarted.stop()

    _across_a_crash(harness, before_crash, after_crash)


def test_a_transaction_file_written_before_a_cut_is_not_trusted_after_a_crash(harness, tmp_path_factory):
    """The transactions' side: the file says half 0 was rolled back (this master's half, then
    cut); the new master's half at offset 0 commits after the crash and is delivered."""
    async def before_crash():
        broker = await _with_topic(harness, kind="TRANSACTION")
        store = harness.store
        cut = store.commit_log_max_offset
        cut_half = await harness.send("T", b"cut", kind=MessageType.TRANSACTION)
        await broker.end_transaction("T", cut_half.message_id, cut_half.transaction_id, False, False)
        broker.persist()                      # the file: half 0 resolved, both cursors past it
        store.truncate(cut)
        return _crash_copy(harness, tmp_path_factory)

    async def after_crash(restarted):
        broker = await restarted.start()
        new_half = await restarted.send("T", b"new master's", kind=MessageType.TRANSACTION)
        await broker.end_transaction("T", new_half.message_id, new_half.transaction_id, True, False)
        assert [d.message.body for d in await restarted.receive("G", "T")] == [b"new master's"]
        await restarted.stop()

    _across_a_crash(harness, before_crash, after_crash)


async def _consumed(harness, sent: int, leave: int):
    """``sent`` messages on T; all but the last ``leave`` received and acked one by one (one
    pop record per ack: more than one read of the pop log)."""
    broker = await _with_topic(harness, queues=1)
    for start in range(0, sent, 100):
        await broker.send([SendItem.of(MessageDraft("T", -1, b"%d" % n, harness.clock.now_ms(),
                                                 properties={Prop.MESSAGE_ID: f"M{n}"}), MessageType.NORMAL)
                           for n in range(start, min(sent, start + 100))])
    acked = 0
    while acked < sent - leave:
        for delivery in await harness.receive("G", "T", batch=min(32, sent - leave - acked)):
            await broker.ack("G", "T", "", delivery.receipt_handle)
            acked += 1
    return broker


def test_a_rebuild_in_steps_lets_the_loop_run_between_reads_and_ends_in_the_same_state(harness):
    """A slave that stepped down rebuilt its pop table from the whole pop log in one go, and
    stalled every broker of its container (bench/chaos.py: 2.4 s for ~220,000 records).  In
    steps, other coroutines run between reads, and the table ends as the log says."""
    async def scenario():
        broker = await _consumed(harness, 2200, leave=0)
        broker.pop.catch_up()
        before = (broker.pop.table.to_document(), broker.pop.committed_offset("G", "T", 0), broker.pop.log_offset)
        assert before[2] > 2 * 1024                           # three reads of the pop log at least
        broker.pop.serving = lambda: False                    # as a slave: it serves no pop call
        harness.store.invalidate_derived()
        rebuild = asyncio.ensure_future(broker.catch_up_in_steps())
        turns = 0
        while not rebuild.done():
            turns += 1
            await asyncio.sleep(0)
        await rebuild
        assert turns >= 3
        assert (broker.pop.table.to_document(), broker.pop.committed_offset("G", "T", 0), broker.pop.log_offset) == before
        await harness.stop()
    run(scenario())


def test_a_pop_call_during_a_rebuild_in_steps_sees_the_whole_log(harness):
    """Promoted while a rebuild in steps is half way: the next pop call finishes it first, so
    it delivers only what was never acked (a partial table would deliver acked ones again)."""
    async def scenario():
        broker = await _consumed(harness, 2200, leave=3)
        serving = broker.pop.serving
        broker.pop.serving = lambda: False
        harness.store.invalidate_derived()
        assert not broker.pop.catch_up_some(1)                # one read of three: a partial table
        assert broker.pop.rebuilding
        broker.pop.serving = serving                          # promoted
        got = await harness.receive("G", "T")
        assert sorted(d.message.body for d in got) == [b"2197", b"2198", b"2199"]
        assert not broker.pop.rebuilding
        await harness.stop()
    run(scenario())


def test_a_snapshot_between_an_acks_write_and_its_application_keeps_the_ack(harness, tmp_path_factory):
    """tests/integration/test_broker_crash.py, about one run in twenty: the pop-log cursor moved
    past an ack as its put returned, before its caller applied it; a snapshot in between held a
    cursor past an ack its table lacked, and after a kill the acked message came again."""
    async def before_crash():
        broker = await _with_topic(harness, queues=1)
        await harness.send("T", b"acked")
        got = await harness.receive("G", "T", batch=1)
        real_apply = broker.pop._apply_all

        def snapshot_first(records):   # the periodic snapshot runs before the ack's caller resumes
            broker.pop.persist()
            real_apply(records)
        broker.pop._apply_all = snapshot_first
        await broker.ack("G", "T", "", got[0].receipt_handle)
        broker.pop._apply_all = real_apply
        return _crash_copy(harness, tmp_path_factory)

    async def after_crash(restarted):
        restarted.clock.advance(harness.clock.now_ms() + 3_600_000 - restarted.clock.now_ms())
        broker = await restarted.start()
        await broker.run_revive()
        assert broker.pop.committed_offset("G", "T", 0) == 1
        assert await restarted.receive("G", "T") == []
        await restarted.stop()

    _across_a_crash(harness, before_crash, after_crash)


def test_a_send_remembered_before_a_cut_is_stored_again_when_retried(harness):
    """bench/chaos.py finding (partition of a master: 1 acknowledged message lost): a send
    written during the partition failed waiting for its slave; rejoining, the broker's log was
    cut below the record; promoted again, it answered the client's retry OK from its send
    de-duplication memory, and nothing held the message.  A cut (or a step-down) makes the
    broker forget the outcomes it remembered, so the retry is stored again."""
    async def scenario():
        broker = await _with_topic(harness, queues=1)
        store = harness.store
        await harness.send("T", b"before")
        cut = store.commit_log_max_offset
        item = SendItem.of(MessageDraft("T", -1, b"retried", 0, properties={Prop.MESSAGE_ID: "RETRIED"}), MessageType.NORMAL)
        [first] = await broker.send([item])
        [again] = await broker.send([item])  # a retry while the record is there: answered, not stored twice
        assert again == first
        assert [m.body for m in store.get("T", 0, 0, 10).messages] == [b"before", b"retried"]
        store.truncate(cut)  # rejoining as a slave: the consistent point is below the record
        [retried] = await broker.send([item])
        assert [m.body for m in store.get("T", 0, 0, 10).messages] == [b"before", b"retried"]
        assert retried.queue_offset == 1
        await harness.stop()
    run(scenario())
