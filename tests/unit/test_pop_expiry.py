"""The revive's index of in-flight entries by deadline (scheduler/pop/expiry.py).

A model test: any sequence of deliveries, changes, acks, skips, resets, dropped groups and
snapshot round trips, with revives that move some of what they found, gives the same expired
entries as walking every in-flight entry (the index's whole job), earliest deadline first,
and the index stays bounded by its rebuilds."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from scheduler.pop import expiry
from scheduler.pop.records import AckRecord, ChangeRecord, InFlight, PopRecord, QueueKey, ResetRecord, SkipRecord
from scheduler.pop.table import PopTable

KEYS = [QueueKey("G", "T", 0), QueueKey("G", "T", 1), QueueKey("H", "T", 0)]


def walked(table: PopTable, now_ms: int) -> set[tuple[QueueKey, int, int]]:
    """Expired by visiting every entry: what the revive found before the index."""
    return {(key, e.offset, e.seq) for key, state in table.queues.items() for e in state.inflight.values()
            if not e.fifo and e.deadline_ms <= now_ms}


def found(pairs) -> list[tuple[QueueKey, int, int]]:
    return [(key, e.offset, e.seq) for key, e in pairs]


step = st.one_of(
    st.tuples(st.just("pop"), st.integers(0, 2), st.integers(1, 4), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("change"), st.integers(0, 2), st.integers(0, 30), st.integers(0, 50)),
    st.tuples(st.just("ack"), st.integers(0, 2), st.integers(0, 30)),
    st.tuples(st.just("skip"), st.integers(0, 2), st.integers(0, 30)),
    st.tuples(st.just("reset"), st.integers(0, 2), st.integers(0, 30)),
    st.tuples(st.just("drop"), st.sampled_from(["G", "H"])),
    st.tuples(st.just("snapshot"),),
    st.tuples(st.just("revive"), st.integers(1, 5), st.booleans()),
    st.tuples(st.just("tick"), st.integers(0, 20)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=60))
def test_the_index_finds_what_a_walk_of_every_entry_finds(steps):
    table, now, seq = PopTable(), 0, 0
    for action, *args in steps:
        if action == "pop":
            index, count, visible, fifo = args
            key = KEYS[index]
            state = table.ensure(key, 0)
            start = state.pop_offset
            entries = []
            for offset in range(start, start + count):
                seq += 1
                entries.append(InFlight(offset, seq, 1, now + visible, 3, offset * 100, fifo, "g" if fifo else ""))
            table.apply(PopRecord(key, start, start + count, tuple(entries)))
        elif action == "change":
            index, offset, visible = args
            seq += 1
            table.apply(ChangeRecord(KEYS[index], offset, seq, now + visible))
        elif action == "ack":
            table.apply(AckRecord(KEYS[args[0]], args[1]))
        elif action == "skip":
            table.apply(SkipRecord(KEYS[args[0]], args[1]))
        elif action == "reset":
            seq += 1
            table.apply(ResetRecord(KEYS[args[0]], args[1], seq))
        elif action == "drop":
            table.drop_group(args[0])
        elif action == "snapshot":
            table = PopTable.from_document(table.to_document())
        elif action == "revive":  # the revive acks some of what it found, or none (a full disk)
            limit, moves = args
            due = table.expired(now, limit)
            everything = walked(table, now)
            assert len(due) == min(limit, len(everything)) and set(found(due)) <= everything
            deadlines = [e.deadline_ms for _, e in due]
            assert deadlines == sorted(deadlines)
            if moves:
                for key, entry in due:
                    table.apply(AckRecord(key, entry.offset))
        else:
            now += args[0]
        everything = walked(table, now)
        assert set(found(table.expired(now, 10_000))) == everything


def test_acked_entries_far_from_their_deadline_do_not_pile_up(monkeypatch):
    """Invisible for an hour, acked at once: the heap is rebuilt from what is in flight."""
    monkeypatch.setattr(expiry, "REBUILD_FLOOR", 64)
    table = PopTable()
    table.expiry.rebuild()  # takes the smaller floor
    key, seq = KEYS[0], 0
    for offset in range(0, 5000, 4):
        entries = []
        for o in range(offset, offset + 4):
            seq += 1
            entries.append(InFlight(o, seq, 1, 3_600_000, 3, o, False, ""))
        table.apply(PopRecord(key, offset, offset + 4, tuple(entries)))
        for o in range(offset, offset + 4):
            table.apply(AckRecord(key, o))
        assert len(table.expiry) <= 2 * 64 + 1
    assert table.expired(3_600_000, 100) == []


def test_a_change_of_invisible_duration_moves_the_entry_and_an_older_delivery_never_counts():
    table, key = PopTable(), KEYS[0]
    table.apply(PopRecord(key, 0, 2, (InFlight(0, 1, 1, 100, 3, 0, False, ""), InFlight(1, 2, 1, 100, 3, 1, False, ""))))
    table.apply(ChangeRecord(key, 0, 3, 500))  # offset 0 invisible until 500 now
    assert found(table.expired(100, 10)) == [(key, 1, 2)]
    table.apply(AckRecord(key, 1))
    assert table.expired(499, 10) == []
    assert found(table.expired(500, 10)) == [(key, 0, 3)]
