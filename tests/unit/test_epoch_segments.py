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
