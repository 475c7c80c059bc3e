"""ResetRecord in the pop table: an operator's reset, forward or back, and its replay."""
from __future__ import annotations

from scheduler.pop.records import (AckRecord, InFlight, PopRecord, QueueKey, ResetRecord, decode_records,
                                   encode_records)
from scheduler.pop.table import PopTable

KEY = QueueKey("G", "T", 0)


def entry(offset: int, seq: int) -> InFlight:
    return InFlight(offset, seq, 1, 10_000, 16, offset * 100)


def consumed_to(table: PopTable, offset: int) -> None:
    table.apply(PopRecord(KEY, 0, offset, tuple(entry(o, 10 + o) for o in range(offset))))
    table.apply_all([AckRecord(KEY, o) for o in range(offset)])


def test_reset_back_rewinds_and_forgets_what_was_in_flight():
    table = PopTable()
    consumed_to(table, 5)
    table.apply(PopRecord(KEY, 5, 8, (entry(5, 20), entry(6, 21), entry(7, 22))))
    commits = table.apply(ResetRecord(KEY, 2, 100))
    state = table.get(KEY)
    assert (state.commit, state.pop_offset, state.inflight, state.acked) == (2, 2, {}, set())
    assert [c.offset for c in commits] == [2]
    assert table.last_seq >= 100


def test_reset_forward_skips():
    table = PopTable()
    consumed_to(table, 3)
    table.apply(ResetRecord(KEY, 50, 100))
    assert (table.get(KEY).commit, table.get(KEY).pop_offset) == (50, 50)


def test_replaying_a_reset_is_idempotent_and_ignores_what_was_decided_before_it():
    live = PopTable()
    consumed_to(live, 5)
    reset = ResetRecord(KEY, 2, 100)
    live.apply(reset)
    after = PopRecord(KEY, 2, 4, (entry(2, 101), entry(3, 102)))
    live.apply(after)
    before = PopRecord(KEY, 5, 7, (entry(5, 40), entry(6, 41)))  # reserved before the reset, logged after it
    replayed = PopTable()
    consumed_to(replayed, 5)
    replayed.apply_all([reset, before, after, reset])  # log order, with the reset replayed twice
    assert replayed.to_document()["queues"] == live.to_document()["queues"]
    assert set(replayed.get(KEY).inflight) == {2, 3}


def test_reset_round_trips_through_the_log_and_the_snapshot():
    records = (ResetRecord(KEY, 7, 123),)
    assert decode_records(encode_records(records)[0]) == records
    table = PopTable()
    table.apply(ResetRecord(KEY, 7, 123))
    again = PopTable.from_document(table.to_document())
    assert again.get(KEY).reset_seq == 123
    assert not again.apply(ResetRecord(KEY, 0, 123))  # the same reset again: nothing moves
