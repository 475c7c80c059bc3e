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

from store.ownership import (Claim, Ledger, LedgerError, Ownership, Plan, SegmentRead, assemble, begin_takeover,
                             claim_of, decode_claim, encode_claim, may_acknowledge, owner_of, plan, seal)

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
    assert _reread(back) == back


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


# --- the files ---------------------------------------------------------------------------------------
def _reread(ledger: Ledger) -> Ledger:
    """Each epoch's claim written and read back, and the ledger assembled from them."""
    claims = [decode_claim(encode_claim(claim_of(ledger, e.epoch)), f"ownership/{e.epoch}")
              for e in ledger.entries if e.epoch]
    return assemble(claims)


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=6), st.sets(st.integers(1, 6)))
def test_the_claims_make_the_ledger_again(gaps, interrupted):
    ledger = Ledger.fresh()
    for epoch, gap in enumerate(gaps, start=1):
        ledger = begin_takeover(ledger, epoch, f"10.0.0.{epoch}:10912")
        if epoch not in interrupted or epoch == len(gaps):
            ledger = seal(ledger, ledger.owning().start + gap, SEG)
    assert _reread(ledger) == ledger


def test_two_takeovers_racing_to_seal_the_same_owner_the_newer_wins():
    """The target began 2, the source (rolling back) began 3 before the target's seal was
    written; both sealed epoch 0.  The target could never acknowledge (3 was newest before its
    seal), so its start is void and its files count for nothing."""
    target = Claim(2, "target", 2000, 0, 1250)
    source = Claim(3, "source", 2000, 0, 1300)
    ledger = assemble([target, source])
    assert ledger.entries == (Ownership(0, "", 0, 1300), Ownership(2, "target", None, None), Ownership(3, "source", 2000, None))
    assert may_acknowledge(3, ledger) and not may_acknowledge(2, ledger)
    assert plan(ledger, frozenset({(0, 0), (1000, 0), (2000, 2), (2000, 3)}), SEG).ignored == ((2000, 2),)


@settings(max_examples=300)
@given(st.binary(max_size=120))
def test_any_bytes_decode_as_a_claim_or_name_what_is_wrong(data):
    try:
        decode_claim(data, "ownership/7")
    except LedgerError as error:
        assert str(error).startswith("ownership/7: ")


@settings(max_examples=300)
@given(st.integers(0, 80), st.integers(0, 255))
def test_a_flipped_byte_in_a_claim_is_caught(position, value):
    data = bytearray(encode_claim(Claim(3, "10.0.0.2:10912", 2000, 1, 1250)))
    position %= len(data)
    if data[position] == value:
        return
    data[position] = value
    with pytest.raises(LedgerError):
        decode_claim(bytes(data), "ownership/3")


@pytest.mark.parametrize("text, message", [
    (b"0\n", "expected a CRC line and one claim line"),
    (b"x\n1 a - - -\n", "line 1: CRC 'x'"),
    (b"1\n1 a - - -\n", "line 1: CRC does not match"),
])
def test_bad_claims_name_the_line(text, message):
    with pytest.raises(LedgerError, match=message):
        decode_claim(text, "ownership/1")


def test_a_claim_sealing_an_unknown_epoch_is_refused():
    with pytest.raises(LedgerError, match="without sealing a known epoch"):
        assemble([Claim(2, "b", 2000, 1, 100)])
