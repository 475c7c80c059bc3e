"""metadata.compact_json: orjson's bytes where they equal the standard library's, its fallback where
orjson refuses, and every body either wrote reads back the same."""
import json
import math

from hypothesis import example, given
from hypothesis import strategies as st

from metadata import compact_json

# what pop records and op bodies hold: str keys, ints (past 64 bits too), bools, str, lists, None
scalars = st.none() | st.booleans() | st.integers() | st.text()
PRINTABLE = st.characters(min_codepoint=32, max_codepoint=126)  # names: topics, groups
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=5), max_leaves=20)


def _stdlib(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@given(values)
@example(-2**63 - 1)  # orjson reads an int past 64 bits as a float: found here
@example({"o": [2**64, -2**70]})
def test_every_value_reads_back_the_same_with_either_parser(value):
    body = compact_json.dumps(value)
    assert json.loads(body) == value
    assert compact_json.loads(body) == value
    assert compact_json.loads(_stdlib(value)) == value   # bodies earlier versions wrote


@given(st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.text(PRINTABLE),
                    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(PRINTABLE, max_size=8),
                                                                                inner, max_size=5), max_leaves=20))
def test_printable_ascii_values_are_written_byte_for_byte_as_before(value):
    assert compact_json.dumps(value) == _stdlib(value)


def test_what_orjson_refuses_is_written_by_json():
    assert compact_json.dumps({"o": 2**70}) == b'{"o":1180591620717411303424}'
    assert compact_json.dumps({"g": "\udc80"}) == b'{"g":"\\udc80"}'
    assert compact_json.dumps({0: 1}) == b'{"0":1}'


def test_what_only_json_parses_still_reads_and_garbage_is_a_value_error():
    assert math.isnan(compact_json.loads(b'{"x":NaN}')["x"])
    for garbage in (b"", b"{", b"\xff\xfe", b'{"a":1}x'):
        try:
            compact_json.loads(garbage)
        except ValueError:
            continue
        raise AssertionError(f"{garbage!r} parsed")
