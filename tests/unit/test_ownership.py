"""store.ownership: the fence that holds against a hung owner on shared storage (issue 26).

The proof is the interleaving test: every order of a woken old owner's writes, ledger reads
and acknowledgements against the new owner's two ledger writes and its scan, checked for the
one property that matters: every acknowledged byte counts after the takeover, and nothing the
old owner wrote afterwards does."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.ownership import (Ledger, LedgerError, Ownership, Plan, SegmentRead, begin_takeover, decode, encode,
                             may_acknowledge, owner_of, plan, seal)

SEG = 1000


def test_a_store_without_a_ledger_is_one_open_epoch_from_zero():
    fresh = Ledger.fresh()
    assert may_acknowledge(0, fresh) and owner_of(fresh, 0) == 0 and owner_of(fresh, 10**12) == 0
    assert plan(fresh, frozenset({(0, 0), (SEG, 0)}), SEG) == Plan((SegmentRead(0, 0, 0, None), SegmentRead(SEG, 0, SEG, None)), ())


def test_a_takeover_fences_at_its_first_write_and_starts_at_the_next_boundary():
    begun = begin_takeover(Ledger.fresh(), 5, "10.0.0.2:10912")
    assert not may_acknowledge(0, begun) and not may_acknowledge(5, begun)  # nobody until sealed
    sealed = seal(begun, 1250, SEG)
    assert sealed.entries == (Ownership(0, "", 0, 1250), Ownership(5, "10.0.0.2:10912", 2000, None))
    assert may_acknowledge(5, sealed) and not may_acknowledge(0, sealed)
    assert [owner_of(sealed, o) for o in (0, 1249, 1250, 1999, 2000, 5000)] == [0, 0, None, None, 5, 5]


def test_a_scan_ending_on_a_boundary_starts_the_new_epoch_there():
    assert seal(begin_takeover(Ledger.fresh(), 1, "b"), 2000, SEG).newest.start == 2000


@pytest.mark.parametrize("files, reads, ignored", [
    # the old owner woke and wrote into its segment past the seal and rolled into a new file
    ({(0, 0), (1000, 0), (2000, 0), (2000, 5)},
     [SegmentRead(0, 0, 0, 1000), SegmentRead(1000, 0, 1000, 1250), SegmentRead(2000, 5, 2000, None)], [(2000, 0)]),
    # a file of an epoch the ledger never started (an interrupted takeover's) counts for nothing
    ({(0, 0), (1000, 0), (2000, 4), (2000, 5)},
     [SegmentRead(0, 0, 0, 1000), SegmentRead(1000, 0, 1000, 1250), SegmentRead(2000, 5, 2000, None)], [(2000, 4)]),
])
def test_bytes_count_only_in_their_epochs_range(files, reads, ignored):
    ledger = seal(begin_takeover(Ledger.fresh(), 5, "b"), 1250, SEG)
    assert plan(ledger, frozenset(files), SEG) == Plan(tuple(reads), tuple(ignored))


def test_an_interrupted_takeover_owns_nothing_and_the_next_seals_the_last_owner():
    """The target died between its two writes; the source takes the broker back at a newer epoch."""
    interrupted = begin_takeover(Ledger.fresh(), 5, "target")
    back = seal(begin_takeover(interrupted, 6, "source"), 1250, SEG)
    assert back.entries == (Ownership(0, "", 0, 1250), Ownership(5, "target", None, None), Ownership(6, "source", 2000, None))
    assert decode(encode(back)) == back


def test_takeovers_chain():
    ledger = Ledger.fresh()
    for epoch, end in ((1, 1250), (2, 2100), (3, 3000)):
        ledger = seal(begin_takeover(ledger, epoch, f"c{epoch}"), end, SEG)
    assert [(e.epoch, e.start, e.end) for e in ledger.entries] == [(0, 0, 1250), (1, 2000, 2100), (2, 3000, 3000), (3, 3000, None)]
    assert owner_of(ledger, 2050) == 1 and owner_of(ledger, 2100) is None and owner_of(ledger, 3000) == 3


@pytest.mark.parametrize("bad, why", [
    (lambda l: begin_takeover(l, 0, "b"), "not newer"),
    (lambda l: begin_takeover(l, 1, "has space"), "without spaces"),
    (lambda l: seal(l, 10, SEG), "already started"),
])
def test_takeover_refusals(bad, why):
    with pytest.raises(LedgerError, match=why):
        bad(Ledger.fresh())


# --- the proof: every interleaving of a woken old owner against a takeover --------------------------
def _run(order: tuple[str, ...], puts: int, sync: bool) -> tuple[list[tuple[int, int]], Ledger]:
    """Old owner (epoch 0) puts: W (write its record, fsynced under SYNC_FLUSH), R (read the
    ledger), A (acknowledge if the read allowed).  New owner: B (begin), S (scan: the end of
    what the old owner's writes made durable, or visible without sync), L (seal)."""
    ledger, written_end, durable_end, scanned = Ledger.fresh(), 0, 0, None
    seen: list[Ledger | None] = [None] * puts
    spans, acked, put = [], [], {"W": 0, "R": 0, "A": 0}
    for step in order:
        if step in "WRA":
            index = put[step]
            put[step] += 1
            if step == "W":
                spans.append((written_end, written_end + 100))
                written_end += 100
                durable_end = written_end if sync else durable_end
            elif step == "R":
                seen[index] = ledger
            elif may_acknowledge(0, seen[index]):
                acked.append(spans[index])
        elif step == "B":
            ledger = begin_takeover(ledger, 1, "new")
        elif step == "S":
            scanned = durable_end if sync else written_end
        else:
            ledger = seal(ledger, scanned, SEG)
    return acked, ledger


def _orders(puts: int):
    """Every interleaving of the old owner's W R A per put (in order) with B S L."""
    old = [s for _ in range(puts) for s in "WRA"]
    new = list("BSL")
    for positions in itertools.combinations(range(len(old) + len(new)), len(new)):
        order, o, n = [], iter(old), iter(new)
        for i in range(len(old) + len(new)):
            order.append(next(n) if i in positions else next(o))
        yield tuple(order)


@pytest.mark.parametrize("sync", [True, False])
def test_no_interleaving_acknowledges_a_byte_the_takeover_does_not_count(sync):
    checked = 0
    for order in _orders(3):
        acked, ledger = _run(order, 3, sync)
        for low, high in acked:
            assert owner_of(ledger, low) == 0 and owner_of(ledger, high - 1) == 0, (order, acked, ledger)
        checked += 1
    assert checked == 220  # C(12, 3): all of them


# --- the file ----------------------------------------------------------------------------------------
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=6))
def test_the_file_round_trips(ends):
    ledger = Ledger.fresh()
    for epoch, (gap, length) in enumerate(ends, start=1):
        end = ledger.owning().start + gap
        ledger = seal(begin_takeover(ledger, epoch, f"10.0.0.{epoch}:10912"), end, SEG)
    assert decode(encode(ledger)) == ledger


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_any_bytes_decode_or_name_what_is_wrong(data):
    try:
        decode(data, "store/ownership")
    except LedgerError as error:
        assert str(error).startswith("store/ownership: ")


@settings(max_examples=300)
@given(st.integers(0, 200), st.integers(0, 255))
def test_a_flipped_byte_is_caught(position, value):
    data = bytearray(encode(seal(begin_takeover(Ledger.fresh(), 3, "b:1"), 1250, SEG)))
    position %= len(data)
    if data[position] == value:
        return
    data[position] = value
    try:
        decoded = decode(bytes(data))
    except LedgerError:
        return
    assert decoded == decode(encode(decoded))  # accepted only when still whole (e.g. a count digit that still matches)


@pytest.mark.parametrize("text, message", [
    (b"1\n0\n", "line 1 says 1 entries, the file has 0"),
    (b"x\n0\n0 - 0 -\n", "line 1: count 'x'"),
    (b"1\n1\n0 - 0 -\n", "line 2: CRC"),
])
def test_bad_files_name_the_line(text, message):
    with pytest.raises(LedgerError, match=message):
        decode(text)
