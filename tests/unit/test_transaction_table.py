from hypothesis import given, settings, strategies as st

from scheduler.transaction_check import CheckKind, EndRejection, Resolution, TransactionTable


def test_checks_start_after_timeout_repeat_by_interval_then_discard():
    table = TransactionTable()
    table.add_half(0, "T", "tx", store_ms=0, timeout_ms=6000)
    assert table.decide_checks(5999, check_max=2, limit=10) == []
    [first] = table.decide_checks(6000, 2, 10)
    assert first.kind is CheckKind.CHECK
    table.checked(0, 6000, 30_000)
    assert table.decide_checks(35_999, 2, 10) == []
    table.checked(0, 36_000, 30_000)
    [last] = table.decide_checks(66_000, 2, 10)
    assert last.kind is CheckKind.DISCARD


def test_end_decisions():
    table = TransactionTable(resolved_max=2)
    table.add_half(0, "T", "tx", 0, 0)
    assert table.decide_end(0, commit=True) is None
    table.resolve(0, Resolution.COMMIT)
    assert table.decide_end(0, True) is Resolution.COMMIT
    assert table.decide_end(0, False) is EndRejection.ALREADY_RESOLVED_OTHERWISE
    assert table.decide_end(9, True) is EndRejection.UNKNOWN_TRANSACTION
    table.add_half(0, "T", "tx", 0, 0)  # replayed half after its op: stays resolved
    assert 0 not in table.pending
    for offset in (1, 2, 3):
        table.resolve(offset, Resolution.ROLLBACK)
    assert len(table.resolved) == 2


def test_checkpoint_round_trip():
    table = TransactionTable()
    table.add_half(3, "T", "tx", 1, 2)
    table.resolve(1, Resolution.ROLLBACK)
    again = TransactionTable.from_document(table.to_document(), 10)
    assert again.pending == table.pending and again.resolved == table.resolved


def test_a_decided_resolution_is_never_checked_nor_discarded_and_survives_a_restart():
    """Upstream #7709: a commit whose write failed on a quorum shortfall was re-checked, then discarded."""
    table = TransactionTable()
    table.add_half(0, "T", "tx", store_ms=0, timeout_ms=0)
    table.checked(0, 0, 1)  # checked once, already at the limit of one check
    table.decide(0, Resolution.COMMIT)  # the producer said COMMIT; the write failed
    assert table.decide_checks(10**9, check_max=1, limit=10) == []  # no check, no DISCARD
    assert table.decide_end(0, commit=True) is None  # the client's retry commits again
    assert table.decide_end(0, commit=False) is EndRejection.ALREADY_RESOLVED_OTHERWISE
    again = TransactionTable.from_document(table.to_document(), 10)
    assert again.decided == {0: Resolution.COMMIT}
    again.resolve(0, Resolution.COMMIT)  # the retried write succeeded
    assert again.decided == {} and again.decide_end(0, True) is Resolution.COMMIT
    table.decide(7, Resolution.COMMIT)  # unknown halves are not decided
    assert 7 not in table.decided


def _by_sorting(table: TransactionTable, now_ms: int, check_max: int, limit: int) -> list:
    """The checks as every scan found them before the heap: all pending halves sorted."""
    actions = []
    for half in sorted(table.pending.values(), key=lambda h: h.next_check_ms):
        if half.next_check_ms > now_ms or len(actions) >= limit:
            break
        if half.offset not in table.decided:
            actions.append((CheckKind.DISCARD if half.checks >= check_max else CheckKind.CHECK, half))
    return actions


_steps = st.lists(st.tuples(st.sampled_from(["add", "checked", "resolve", "decide", "scan", "reload"]),
                            st.integers(0, 30), st.integers(0, 5)), max_size=120)


@settings(max_examples=300, deadline=None)
@given(_steps, st.integers(1, 6))
def test_the_heap_finds_what_sorting_every_half_found(steps, limit):
    """Adds, checks, resolutions, decisions, reloads and scans at growing times: every scan
    finds the same halves, in the same order of check time, as a sort of every pending half."""
    table, now = TransactionTable(resolved_max=8), 0
    for kind, offset, amount in steps:
        now += amount
        if kind == "add":
            table.add_half(offset, "T", f"tx{offset}", store_ms=now, timeout_ms=amount)
        elif kind == "checked":
            table.checked(offset, now, 1 + amount)
        elif kind == "resolve":
            table.resolve(offset, Resolution.COMMIT)
        elif kind == "decide":
            table.decide(offset, Resolution.ROLLBACK)
        elif kind == "reload":
            table = TransactionTable.from_document(table.to_document(), 8)
        else:
            found = [(a.kind, a.half) for a in table.decide_checks(now, check_max=2, limit=limit)]
            expected = _by_sorting(table, now, 2, limit)
            due = {h.offset for _, h in _by_sorting(table, now, 2, 10**9)}
            assert [h.next_check_ms for _, h in found] == [h.next_check_ms for _, h in expected]
            assert all(table.pending[h.offset] is h and h.offset in due for _, h in found)
            assert all(k is (CheckKind.DISCARD if h.checks >= 2 else CheckKind.CHECK) for k, h in found)
            if len(due) <= limit:  # nothing cut by the limit: exactly the same halves
                assert sorted(found, key=lambda a: a[1].offset) == sorted(expected, key=lambda a: a[1].offset)
