"""A commit log on shared storage after a takeover (issue 26): the new owner reads the old
owner's bytes up to where it sealed them, writes its own files named with its epoch, and
never reads what a fenced old owner, still holding its files open, writes afterwards."""
from __future__ import annotations

import pytest

from metadata.message import MessageDraft
from store.commit_log import CommitLog
from store.ownership import Ledger, LedgerError, begin_takeover, claim_of, may_acknowledge, plan, seal
from store.ownership_files import newer_claim, read_ledger, write_begin, write_seal
from store.record import encode_tail
from store.segmented_file import SegmentedFile, parse_segment_name, segment_name

SEG = 64 * 1024


def _append(log: CommitLog, body: bytes, count: int, first_queue_offset: int) -> list[int]:
    tail = encode_tail(MessageDraft("T", 0, body, 1))
    return log.append([(tail, 0, first_queue_offset + i, 1) for i in range(count)], 1)


def _bodies(log: CommitLog, offsets: list[int]) -> list[bytes | None]:
    return [(m.body if (m := log.read_message(o)) is not None else None) for o in offsets]


def _open(directory, epoch, ledger) -> CommitLog:
    files = {parse_segment_name(p.name) for p in directory.iterdir() if parse_segment_name(p.name)}
    log = CommitLog(directory, SEG, epoch, plan(ledger, frozenset(files), SEG))
    end = log.scan(log.min_offset, lambda *a: None)
    log.write_offset = end.offset
    return log


def test_names():
    assert segment_name(65536) == "00000000000000065536" and segment_name(65536, 7) == "00000000000000065536.e7"
    assert parse_segment_name("00000000000000065536.e7") == (65536, 7)
    assert [parse_segment_name(n) for n in ("00000000000000065536.e0", "00000000000000065536.e07", "x.e1", "lock")] == [None] * 4


def test_a_takeover_reads_the_old_owners_bytes_to_the_seal_and_none_of_what_it_writes_after(tmp_path):
    old = CommitLog(tmp_path, SEG)
    before = _append(old, b"before", 100, 0)
    old.files.sync_all()
    sealed_at = old.write_offset
    ledger = seal(begin_takeover(Ledger.fresh(), 5, "new"), sealed_at, SEG)
    # the old owner wakes (it kept its files open): it fills its segment and rolls into the next
    after = _append(old, b"x" * 900, 100, 100)
    assert old.files.segment_start(after[-1]) > 0, "the old owner rolled into a new segment"
    old.files.sync_all()

    new = _open(tmp_path, 5, ledger)
    assert new.write_offset == SEG and new.files.ignored == [segment_name(SEG)]
    assert _bodies(new, before) == [b"before"] * 100
    assert set(_bodies(new, after)) == {None}
    mine = _append(new, b"mine", 10, 100)
    assert mine[0] == SEG and (tmp_path / segment_name(SEG, 5)).exists()
    assert _bodies(new, mine) == [b"mine"] * 10
    # the old owner's next write lands in its own file, which the new owner never reads
    late = _append(old, b"late", 5, 200)
    assert _bodies(new, mine) == [b"mine"] * 10 and set(_bodies(new, late)) == {None}

    again = _open(tmp_path, 5, ledger)  # a restart of the new owner finds the same
    assert again.write_offset == new.write_offset and _bodies(again, before + mine) == [b"before"] * 100 + [b"mine"] * 10
    old.files.close(), new.files.close(), again.files.close()


def test_a_store_never_moved_refuses_an_epoch_file_without_its_ledger(tmp_path):
    (tmp_path / segment_name(0, 3)).write_bytes(b"")
    with pytest.raises(ValueError, match="ownership epoch 3"):
        SegmentedFile(tmp_path, SEG)


def test_a_sealed_segment_is_never_written(tmp_path):
    old = CommitLog(tmp_path, SEG)
    _append(old, b"a", 3, 0)
    ledger = seal(begin_takeover(Ledger.fresh(), 1, "new"), old.write_offset, SEG)
    new = CommitLog(tmp_path, SEG, 1, plan(ledger, frozenset({(0, 0)}), SEG))
    with pytest.raises(AssertionError, match="sealed"):
        new.files.write(10, b"zz")
    old.files.close(), new.files.close()


def test_the_claims_on_disk(tmp_path):
    ledger = begin_takeover(Ledger.fresh(), 4, "10.0.0.2:10912")
    write_begin(tmp_path, claim_of(ledger, 4))
    assert read_ledger(tmp_path) == ledger and newer_claim(tmp_path, 0) and not newer_claim(tmp_path, 4)
    with pytest.raises(LedgerError, match="begun by another owner"):
        write_begin(tmp_path, claim_of(begin_takeover(Ledger.fresh(), 4, "10.0.0.3:10912"), 4))
    sealed = seal(ledger, 1234, SEG)
    write_seal(tmp_path, claim_of(sealed, 4))
    assert read_ledger(tmp_path) == sealed and may_acknowledge(4, read_ledger(tmp_path))
    assert not [p for p in (tmp_path / "ownership").iterdir() if p.name.endswith(".tmp")]
    (tmp_path / "ownership" / "00000000000000000009").write_bytes(b"garbage")
    with pytest.raises(LedgerError, match="00000000000000000009"):
        read_ledger(tmp_path)


def test_a_store_with_no_claims_is_its_first_owners(tmp_path):
    assert read_ledger(tmp_path) == Ledger.fresh() and not newer_claim(tmp_path, 0)


# --- consume queues after a takeover: layered, nothing copied ----------------------------------------
from store.consume_queue import ConsumeQueue  # noqa: E402
from store.ownership import queue_layers  # noqa: E402

CQ_SEG = 20 * 64  # 64 entries per segment


def _commit_offsets(queue: ConsumeQueue, low: int, high: int) -> list[int]:
    found = []
    while low + len(found) < high:
        more = queue.entries(low + len(found), high - low - len(found))
        assert more, (low, len(found), high)
        found += [e.commit_offset for e in more]
    return found


def test_a_consume_queue_after_a_takeover_reads_old_entries_below_the_split_and_its_own_above(tmp_path):
    old = ConsumeQueue("T", 0, tmp_path, CQ_SEG)
    for q in range(100):  # 1.5 segments: the takeover splits a partial segment
        old.put_one(q, 1000 + q, 10, 0)
    ledger = seal(begin_takeover(Ledger.fresh(), 5, "new"), 5000, SEG)
    layers = queue_layers(ledger, {5: 100})
    assert layers == ((0, 0), (5, 100))
    new = ConsumeQueue("T", 0, tmp_path, CQ_SEG, layers)
    assert (new.min_offset, new.max_offset) == (0, 100)
    for q in range(100, 150):
        new.put_one(q, 9000 + q, 10, 0)
    for q in range(100, 130):  # the woken old owner's late entries, at the same queue offsets
        old.put_one(q, 66_000 + q, 10, 0)
    assert _commit_offsets(new, 0, 150) == [1000 + q for q in range(100)] + [9000 + q for q in range(100, 150)]
    again = ConsumeQueue("T", 0, tmp_path, CQ_SEG, layers)
    assert again.max_offset == 150 and _commit_offsets(again, 90, 150) == [1090 + i for i in range(10)] + [9000 + q for q in range(100, 150)]
    assert not any(p.stat().st_size > CQ_SEG for p in tmp_path.iterdir())
    assert {p.name for p in tmp_path.iterdir()} >= {segment_name(CQ_SEG, 5), segment_name(2 * CQ_SEG, 5)}  # sparse: written from the split
    old.close(), new.close(), again.close()


def test_a_queue_the_takeover_did_not_know_starts_again_in_the_new_epoch(tmp_path):
    """Files of a queue a fenced owner created after the takeover count for nothing."""
    fenced = ConsumeQueue("T", 1, tmp_path, CQ_SEG)
    fenced.put_one(0, 70_000, 10, 0)
    ledger = seal(begin_takeover(Ledger.fresh(), 5, "new"), 5000, SEG)
    new = ConsumeQueue("T", 1, tmp_path, CQ_SEG, queue_layers(ledger, {}))
    assert (new.min_offset, new.max_offset) == (0, 0)
    new.put_one(0, 9000, 10, 0)
    assert _commit_offsets(new, 0, 1) == [9000]
    fenced.close(), new.close()


def test_a_cut_never_goes_below_the_split(tmp_path):
    old = ConsumeQueue("T", 0, tmp_path, CQ_SEG)
    for q in range(10):
        old.put_one(q, 1000 + q * 10, 10, 0)
    layers = queue_layers(seal(begin_takeover(Ledger.fresh(), 2, "new"), 5000, SEG), {2: 10})
    new = ConsumeQueue("T", 0, tmp_path, CQ_SEG, layers)
    for q in range(10, 15):
        new.put_one(q, 6000 + q * 10, 10, 0)
    assert new.cut_beyond(6000 + 12 * 10) == 3 and new.max_offset == 12
    assert new.cut_beyond(0) == 2 and new.max_offset == 10  # the entries below the split stay
    assert _commit_offsets(new, 0, 10) == [1000 + q * 10 for q in range(10)]
    old.close(), new.close()


def test_queue_layers_skip_takeovers_that_never_sealed():
    ledger = begin_takeover(Ledger.fresh(), 2, "target")  # interrupted
    ledger = seal(begin_takeover(ledger, 3, "source"), 100, SEG)
    ledger = seal(begin_takeover(ledger, 4, "third"), SEG + 2000, SEG)
    assert queue_layers(ledger, {2: 5, 3: 7, 4: 9}) == ((0, 0), (3, 7), (4, 9))
    assert queue_layers(ledger, {2: 5, 4: 9}) == ((3, 0), (4, 9))
