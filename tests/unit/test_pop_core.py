"""Unit tests of the pure pop core: receipt handles, the table's rules, delivery decisions."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from metadata.message import MessageDraft, Prop, StoredMessage
from metadata.message_filter import MessageFilter
from scheduler.pop.decisions import PopContext, PopRejection, decide_ack, decide_change, plan_fifo_redelivery, plan_new
from scheduler.pop import receipt
from scheduler.pop.receipt import ReceiptHandle, decode
from scheduler.pop.records import (AckRecord, ChangeRecord, QueueKey, ResetRecord, SkipRecord, decode_record,
                                   decode_records, encode_record, encode_records)
from scheduler.pop.table import HandleCheck, PopTable, QueueState

topics = st.from_regex(r"[%a-zA-Z0-9_-]{1,40}", fullmatch=True)


@given(topics, st.integers(0, 1023), st.integers(0, 2**62), st.integers(0, 2**62))
def test_receipt_handle_round_trips(topic, queue_id, offset, seq):
    handle = ReceiptHandle(topic, queue_id, offset, seq)
    text = handle.encode()
    assert decode(text) == handle
    receipt._issued.clear()
    assert decode(text) == handle  # from the text alone


@given(st.one_of(topics, st.text(min_size=1, max_size=40)), st.integers(-3, 2**64), st.integers(-3, 2**64),
       st.integers(-3, 2**64))
def test_a_handle_issued_here_decodes_as_its_text_alone_would(topic, queue_id, offset, seq):
    text = ReceiptHandle(topic, queue_id, offset, seq).encode()
    remembered = decode(text)  # found among the handles issued lately, when decoding would find it
    receipt._issued.clear()
    assert decode(text) == remembered


def test_the_handles_issued_lately_are_bounded_and_looked_up():
    receipt._issued.clear()
    texts = [ReceiptHandle("t", 0, offset, 1).encode() for offset in range(receipt.ISSUED_MAX + 10)]
    assert len(receipt._issued) <= receipt.ISSUED_MAX
    assert receipt._issued[texts[-1]] == ("t", 0, receipt.ISSUED_MAX + 9, 1)
    assert decode(texts[-1]) == ReceiptHandle("t", 0, receipt.ISSUED_MAX + 9, 1)
    assert decode(texts[0]) == ReceiptHandle("t", 0, 0, 1)  # forgotten: decoded from its text


@given(st.one_of(st.text(max_size=200), st.binary(max_size=50), st.none(), st.integers()))
def test_garbage_handles_never_crash(garbage):
    assert decode(garbage) is None or isinstance(decode(garbage), ReceiptHandle)


@given(topics, st.integers(0, 100), st.integers(0, 1000), st.integers(0, 10**9), st.integers(0, 40))
def test_tampered_handle_is_refused(topic, queue_id, offset, seq, position):
    text = ReceiptHandle(topic, queue_id, offset, seq).encode()
    index = position % len(text)
    flipped = text[:index] + ("A" if text[index] != "A" else "B") + text[index + 1:]
    assert decode(flipped) != ReceiptHandle(topic, queue_id, offset, seq)


def message(offset, group="", tag=None, reconsume=None):
    props = {Prop.MESSAGE_ID: f"M{offset}"}
    if group:
        props[Prop.MESSAGE_GROUP] = group
    if tag:
        props[Prop.TAG] = tag
    if reconsume is not None:
        props[Prop.RECONSUME_TIMES] = str(reconsume)
    return StoredMessage(MessageDraft("T", 0, b"b", 0, properties=props), 1000 + offset * 10, 10, offset, 0)


KEY = QueueKey("G", "T", 0)


def ctx(now=0, batch=32, fifo=False, tags=None, max_attempts=3):
    return PopContext(now, 1000, max_attempts, batch, 100, fifo, MessageFilter(tags=tags))


def seqs():
    counter = iter(range(1, 10**6))
    return lambda: next(counter)


def test_plan_new_skips_tag_mismatches_and_attempt_comes_from_reconsume_times():
    table = PopTable()
    state = table.ensure(KEY, 0)
    plan = plan_new(KEY, state, [message(0, tag="a"), message(1, tag="b"), message(2, tag="a", reconsume=1)],
                    ctx(tags=frozenset({"a"})), seqs())
    assert [d.entry.offset for d in plan.deliveries] == [0, 2]
    assert [d.entry.attempt for d in plan.deliveries] == [1, 2]
    table.apply(plan.record)
    assert state.pop_offset == 3 and state.commit == 0 and 1 in state.acked


def test_attempt_beyond_max_is_dead_lettered():
    table = PopTable()
    plan = plan_new(KEY, table.ensure(KEY, 0), [message(0, reconsume=3)], ctx(max_attempts=3), seqs())
    assert plan.deliveries[0].dead_letter


def test_fifo_batch_is_consecutive_messages_of_the_queue_and_locks_it():
    """RocketMQ's orderly pop: a batch of consecutive messages, whatever their message groups;
    nothing more leaves the queue until all of it is acked."""
    table = PopTable()
    state = table.ensure(KEY, 0)
    msgs = [message(0, "a"), message(1, "a"), message(2, "b"), message(3, "a"), message(4, "c")]
    plan = plan_new(KEY, state, msgs, ctx(fifo=True, batch=4), seqs())
    assert [d.entry.offset for d in plan.deliveries] == [0, 1, 2, 3]
    table.apply(plan.record)
    assert plan_new(KEY, state, msgs[4:], ctx(fifo=True), seqs()).deliveries == ()
    for offset in (0, 1, 2):
        table.apply(AckRecord(KEY, offset))
    assert plan_new(KEY, state, msgs[4:], ctx(fifo=True), seqs()).deliveries == ()  # 3 is still unacked
    table.apply(AckRecord(KEY, 3))
    assert [d.entry.offset for d in plan_new(KEY, state, msgs[4:], ctx(fifo=True), seqs()).deliveries] == [4]


def test_fifo_redelivers_the_unacked_rest_of_a_batch_in_order_once_all_of_it_is_visible():
    table = PopTable()
    state = table.ensure(KEY, 0)
    msgs = {o: message(o, "a") for o in range(5)}
    next_seq = seqs()  # one sequence, as the table's: a later delivery has a larger seq
    table.apply(plan_new(KEY, state, list(msgs.values()), ctx(fifo=True), next_seq).record)
    table.apply(AckRecord(KEY, 0))
    table.apply(AckRecord(KEY, 2))
    assert plan_fifo_redelivery(KEY, state, msgs, ctx(now=999, fifo=True), next_seq).deliveries == ()
    redelivered = plan_fifo_redelivery(KEY, state, msgs, ctx(now=1000, fifo=True, batch=2), next_seq)
    assert [(d.entry.offset, d.entry.attempt) for d in redelivered.deliveries] == [(1, 2), (3, 2)]
    table.apply(redelivered.record)
    # 4 is visible, but 1 and 3 are held again: 4 waits, or it would overtake them
    assert plan_fifo_redelivery(KEY, state, msgs, ctx(now=1500, fifo=True), next_seq).deliveries == ()
    again = plan_fifo_redelivery(KEY, state, msgs, ctx(now=2000, fifo=True), next_seq)
    assert [(d.entry.offset, d.entry.attempt) for d in again.deliveries] == [(1, 3), (3, 3), (4, 2)]


def test_fifo_message_held_longer_holds_the_whole_queue():
    """A consumer that extends one message (ChangeInvisibleDuration) keeps the rest of its batch
    from being redelivered to someone else meanwhile."""
    table = PopTable()
    state = table.ensure(KEY, 0)
    msgs = {o: message(o, "a") for o in range(3)}
    plan = plan_new(KEY, state, list(msgs.values()), ctx(fifo=True), seqs())
    table.apply(plan.record)
    first = plan.deliveries[0].entry
    record, _ = decide_change(table, "G", ReceiptHandle("T", 0, 0, first.seq), 5000, now_ms=900)
    table.apply(record)
    assert plan_fifo_redelivery(KEY, state, msgs, ctx(now=1000, fifo=True), seqs()).deliveries == ()
    assert [d.entry.offset for d in plan_fifo_redelivery(KEY, state, msgs, ctx(now=5900, fifo=True), seqs()).deliveries] == [0, 1, 2]


def test_fifo_past_max_attempts_dead_letters_only_that_message():
    table = PopTable()
    state = table.ensure(KEY, 0)
    msgs = {0: message(0, "a", reconsume=2), 1: message(1, "a")}
    table.apply(plan_new(KEY, state, list(msgs.values()), ctx(fifo=True, max_attempts=3), seqs()).record)
    redelivered = plan_fifo_redelivery(KEY, state, msgs, ctx(now=1000, fifo=True, max_attempts=3), seqs())
    assert [(d.entry.offset, d.dead_letter) for d in redelivered.deliveries] == [(0, True), (1, False)]


def test_ack_rules_current_stale_and_already_acked():
    table = PopTable()
    plan = plan_new(KEY, table.ensure(KEY, 0), [message(0)], ctx(), seqs())
    table.apply(plan.record)
    entry = plan.deliveries[0].entry
    current = ReceiptHandle("T", 0, 0, entry.seq)
    changed = decide_change(table, "G", current, 5000, now_ms=10)
    record, new_handle = changed
    table.apply(record)
    assert decide_ack(table, "G", current) is PopRejection.INVALID_RECEIPT_HANDLE
    assert decide_ack(table, "G", None) is PopRejection.INVALID_RECEIPT_HANDLE
    ack = decide_ack(table, "G", new_handle)
    assert isinstance(ack, AckRecord)
    commits = table.apply(ack)
    assert [c.offset for c in commits] == [1]
    assert decide_ack(table, "G", new_handle) is None
    assert table.check_handle("G", new_handle) is HandleCheck.ALREADY_ACKED


def test_apply_is_idempotent_so_replay_over_a_snapshot_is_harmless():
    table = PopTable()
    plan = plan_new(KEY, table.ensure(KEY, 0), [message(0), message(1)], ctx(), seqs())
    records = [plan.record, AckRecord(KEY, 0)]
    for record in records:
        table.apply(record)
    snapshot = PopTable.from_document(table.to_document())
    for record in records:  # replay everything again
        snapshot.apply(decode_record(encode_record(record)))
    state = snapshot.get(KEY)
    assert state.commit == 1 and set(state.inflight) == {1}


def test_a_run_of_acks_of_one_queue_is_one_body_and_decodes_back_in_order():
    other = QueueKey("G", "T", 1)
    plan = plan_new(KEY, PopTable().ensure(KEY, 0), [message(0)], ctx(), seqs())
    records = [plan.record, AckRecord(KEY, 2), AckRecord(KEY, 0), AckRecord(KEY, 1), AckRecord(other, 5), AckRecord(KEY, 3)]
    bodies = encode_records(records)
    assert len(bodies) == 4  # the pop record, three acks of KEY, the ack of another queue, the last ack
    assert [r for body in bodies for r in decode_records(body)] == records
    assert decode_records(bodies[0]) == (decode_record(bodies[0]),)
    assert decode_records(b"{not json") == () and decode_records(b'{"t":"acks","k":["G"]}') == ()


def test_apply_all_equals_applying_one_by_one():
    records = [plan_new(KEY, PopTable().ensure(KEY, 0), [message(i) for i in range(4)], ctx(), seqs()).record]
    records += [AckRecord(KEY, 1), AckRecord(KEY, 0), AckRecord(KEY, 0), AckRecord(KEY, 3)]
    one_by_one, at_once = PopTable(), PopTable()
    commits = [c for record in records for c in one_by_one.apply(record)]
    assert at_once.apply_all(records) == commits
    assert at_once.to_document() == one_by_one.to_document()


operations = st.lists(st.tuples(st.sampled_from(["pop", "ack", "change", "skip", "reset"]), st.integers(0, 40),
                                 st.integers(1, 8)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_every_invariant_holds_after_any_run_of_records(steps):
    """apply_all checks only what each record changed (O(changed), not O(in flight)); the full
    check over every entry must hold after any sequence of receives, acks, changes, skips and
    resets, so the cheap check loses nothing the transitions could break."""
    table, seq, now = PopTable(), iter(range(1, 10**6)), 0
    for kind, offset, count in steps:
        state = table.ensure(KEY, 0)
        if kind == "pop":
            plan = plan_new(KEY, state, [message(o) for o in range(state.pop_offset, state.pop_offset + count)],
                            ctx(now=now, batch=count), lambda: next(seq))
            records = [plan.record] if plan.record else []
        elif kind == "ack":
            records = [AckRecord(KEY, o) for o in range(offset, offset + count)]
        elif kind == "change":
            records = [ChangeRecord(KEY, offset, next(seq), now + 5000)]
        elif kind == "skip":
            records = [SkipRecord(KEY, offset)]
        else:
            records = [ResetRecord(KEY, offset, next(seq))]
        table.apply_all(records)
        table.get(KEY).check()
        now += 10


def test_the_changed_check_catches_a_broken_queue():
    state = QueueState(commit=5, pop_offset=10)
    state.inflight = {4: None, 6: None}  # an entry below the commit offset
    with pytest.raises(AssertionError):
        state.check_changed([])
    state = QueueState(commit=5, pop_offset=10, inflight={6: None, 7: None}, acked={7})
    with pytest.raises(AssertionError):
        state.check_changed([7])  # in flight and acked at once
    state = QueueState(commit=5, pop_offset=7, inflight={6: None, 8: None})
    with pytest.raises(AssertionError):
        state.check_changed([])  # past the pop cursor


def test_next_seq_grows_and_is_seeded_by_time():
    table = PopTable()
    first = table.next_seq(5)
    assert first >= 5000 and table.next_seq(0) == first + 1


def test_expired_lists_only_non_fifo_entries_past_their_deadline():
    table = PopTable()
    table.apply(plan_new(KEY, table.ensure(KEY, 0), [message(0)], ctx(now=0), seqs()).record)
    assert table.expired(999, 10) == []
    assert [e.offset for _, e in table.expired(1000, 10)] == [0]
