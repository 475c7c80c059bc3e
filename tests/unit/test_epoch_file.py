"""store.epoch_file: upstream's epochFileCheckpoint format, CRC, and the .bak fallback."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from ha.epochs import EpochHistory
from store.epoch_file import (FILE_NAME, backup_path, decode_epoch_file, encode_epoch_file, epoch_crc,
                              read_epoch_file, write_epoch_file)


def test_crc_matches_the_upstream_javadoc_example():
    assert epoch_crc(b"7-7000\n8-8000\n") == 773307083


def test_encoding_is_count_crc_then_entry_lines():
    data = encode_epoch_file(((1, 0), (2, 1570)))
    assert data == b"2\n1190946436\n1-0\n2-1570\n"


def test_decode_checks_count_and_crc_and_accepts_zero_crc():
    assert decode_epoch_file(b"2\n1190946436\n1-0\n2-1570\n") == ((1, 0), (2, 1570))
    assert decode_epoch_file(b"3\n1190946436\n1-0\n2-1570\n") is None
    assert decode_epoch_file(b"2\n1190946437\n1-0\n2-1570\n") is None
    assert decode_epoch_file(b"2\n0\n1-0\n2-1570\n") == ((1, 0), (2, 1570))
    assert decode_epoch_file(b"") is None
    assert decode_epoch_file(b"2\n0\n2-0\n1-1570\n") is None  # epochs out of order


def test_write_keeps_the_previous_content_as_bak(tmp_path):
    path = tmp_path / FILE_NAME
    write_epoch_file(path, EpochHistory.from_pairs([(1, 0)]))
    write_epoch_file(path, EpochHistory.from_pairs([(1, 0), (2, 100)]))
    assert decode_epoch_file(backup_path(path).read_bytes()) == ((1, 0),)
    assert read_epoch_file(path).pairs() == ((1, 0), (2, 100))
    assert read_epoch_file(path).entries[0].end_offset == 100


def test_read_falls_back_to_bak_on_corruption_or_empty_file(tmp_path):
    path = tmp_path / FILE_NAME
    write_epoch_file(path, EpochHistory.from_pairs([(1, 0)]))
    write_epoch_file(path, EpochHistory.from_pairs([(1, 0), (2, 100)]))
    path.write_bytes(b"2\n123\n1-0\n2-100\n")
    assert read_epoch_file(path).pairs() == ((1, 0),)
    path.write_bytes(b"")
    assert read_epoch_file(path).pairs() == ((1, 0),)
    path.unlink()
    assert read_epoch_file(path).pairs() == ((1, 0),)


def test_a_corrupt_file_is_not_copied_over_a_good_backup(tmp_path):
    path = tmp_path / FILE_NAME
    write_epoch_file(path, EpochHistory.from_pairs([(1, 0)]))
    write_epoch_file(path, EpochHistory.from_pairs([(1, 0), (2, 5)]))
    path.write_bytes(b"garbage")
    write_epoch_file(path, EpochHistory.from_pairs([(1, 0), (3, 7)]))
    assert decode_epoch_file(backup_path(path).read_bytes()) == ((1, 0),)


def test_empty_history_is_never_written_but_removes_both_files(tmp_path):
    path = tmp_path / FILE_NAME
    write_epoch_file(path, EpochHistory.from_pairs([(1, 0)]))
    write_epoch_file(path, EpochHistory.from_pairs([(1, 0), (2, 5)]))
    write_epoch_file(path, EpochHistory())
    assert not path.exists() and not backup_path(path).exists()
    assert read_epoch_file(path).is_empty()


def test_missing_files_read_as_empty(tmp_path):
    assert read_epoch_file(tmp_path / FILE_NAME).is_empty()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 1000), st.integers(0, 10**12)), min_size=1, max_size=20))
def test_encode_decode_round_trip(raw):
    pairs, epoch, start = [], 0, 0
    for bump, grow in raw:
        epoch, start = epoch + bump, start + grow
        pairs.append((epoch, start))
    assert decode_epoch_file(encode_epoch_file(tuple(pairs))) == tuple(pairs)
