"""The pending entries' text of a timer checkpoint (scheduler.timer_text): written in slices,
byte for byte what one orjson call writes, once per checkpoint object."""
import orjson
import pytest
from hypothesis import given, strategies as st

from metadata.data_version import DataVersion
from metadata.replica_metadata import VersionedDocument
from scheduler import timer_text
from scheduler.timer import TimerIndex
from scheduler.timer_text import LISTS, OBJECT, pending_json, pending_text, with_pending_text

entries = st.dictionaries(st.integers(0, 2**62), st.integers(0, 2**62), max_size=40)


@given(entries, st.integers(1, 7))
def test_sliced_text_is_the_one_call_text_in_either_form(pending, size):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timer_text, "SLICE", size)  # slices of 1..7 entries: every boundary case
        assert pending_json(pending, OBJECT) == orjson.dumps(pending, option=orjson.OPT_NON_STR_KEYS)
        assert pending_json(pending, LISTS) == orjson.dumps([list(pending), list(pending.values())])
        for form in (OBJECT, LISTS):
            again = TimerIndex.from_document({"pending": orjson.loads(pending_json(pending, form))})
            assert again.pending == pending
            assert again.due(2**63, 100) == [(o, d) for d, o in sorted((d, o) for o, d in pending.items())]


def test_the_text_is_written_once_per_checkpoint_and_fits_in_its_document():
    first = VersionedDocument(DataVersion(0, 1, 1), {"scanOffset": 3, "opOffset": 1, "pending": {2: 20, 1: 10}})
    same = VersionedDocument(DataVersion(0, 1, 1), {"scanOffset": 3, "opOffset": 1, "pending": {2: 20, 1: 10}})
    assert pending_text(first) is pending_text(first) and pending_text(first, LISTS) is pending_text(first, LISTS)
    assert pending_text(same) is not pending_text(first) and pending_text(same) == pending_text(first)
    text = orjson.dumps(with_pending_text(first, dataVersion=first.data_version.to_json()), option=orjson.OPT_NON_STR_KEYS)
    assert orjson.loads(text) == {"scanOffset": 3, "opOffset": 1, "pending": {"2": 20, "1": 10},
                                  "dataVersion": first.data_version.to_json()}  # what every version reads
    assert orjson.loads(orjson.dumps(with_pending_text(first, LISTS)))["pending"] == [[2, 1], [20, 10]]


def test_a_file_written_before_the_list_form_still_loads():
    old = TimerIndex.from_document({"scanOffset": 5, "opOffset": 2, "pending": {"7": 700, "3": 300}})
    assert old.pending == {7: 700, 3: 300} and old.due(1_000, 10) == [(3, 300), (7, 700)] and old.changes == 2


@pytest.mark.parametrize("pending", [[[1, 2], [10]], [[1, 2]], [1, 2], [[1], 10]])
def test_a_malformed_list_form_is_refused(pending):
    with pytest.raises((ValueError, TypeError)):
        TimerIndex.from_document({"pending": pending})


def test_an_offset_listed_twice_counts_once_with_its_last_due_time():
    index = TimerIndex.from_document({"pending": [[1, 2, 1], [10, 15, 20]]})
    assert index.pending == {1: 20, 2: 15} and index.due(100, 10) == [(2, 15), (1, 20)]
