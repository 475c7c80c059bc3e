"""fastjson's dialect (metadata/fastjson.py): the fast paths (orjson after quoting bare keys; one
join per map or list of scalars; strings written by orjson) give exactly what the scanner and
the plain writer (json.dumps for every scalar) give."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from metadata import fastjson

tricky_text = st.text(alphabet=st.sampled_from(list('ab,:{}[]"\\\n\t 0123456789-é/\x00\x1f\x7f\u2028😀\b\f\r')),
                      max_size=12)
scalars = st.one_of(st.integers(-2**63, 2**63 - 1), tricky_text, st.booleans(), st.none())
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(tricky_text, inner, max_size=4),
                            st.dictionaries(st.integers(-50, 10**6), inner, max_size=4)),
    max_leaves=25)


def reference_dumps(value, indent=0) -> str:
    """The writer without its fast paths: every value, key and string through json.dumps."""
    pad = "\t" * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = sorted(value.items(), key=lambda item: fastjson._sort_key(item[0]))
        body = ",\n".join(pad + (str(k) if type(k) is int else json.dumps(str(k), ensure_ascii=False)) + ":"
                           + reference_dumps(v, indent + 1) for k, v in items)
        return "{\n" + body + "\n" + "\t" * indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(pad + reference_dumps(v, indent + 1) for v in value) + "\n" + "\t" * indent + "]"
    return json.dumps(value, ensure_ascii=False)


def scanned(text: str):
    scanner = fastjson._Scanner(text)
    result = scanner.value(0)
    assert not scanner.peek()
    return result


@settings(max_examples=300, deadline=None)
@given(documents)
def test_writer_fast_path_is_byte_identical_and_reads_back_as_the_scanner_reads(document):
    text = fastjson.dumps(document)
    assert text == reference_dumps(document)
    assert fastjson.loads(text) == scanned(text)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_strict_json_reads_the_same_through_both_paths(document):
    text = json.dumps(document)
    assert fastjson.loads(text) == scanned(text) == json.loads(text)


@pytest.mark.parametrize("text, expected", [
    ('{"a,1:":{0:1,12:3}}', {"a,1:": {"0": 1, "12": 3}}),  # a bare-key look-alike inside a string stays
    ('{"x\\"{2:":[1,2],-3:{}}', {'x"{2:': [1, 2], "-3": {}}),
    ("{\n\t0:37960,\n\t1:12\n}", {"0": 37960, "1": 12}),
    ('{"big":123456789012345678901234567890}', {"big": 123456789012345678901234567890}),  # past orjson: the scanner
    ('{"é😀":[99999999999999999999]}', {"é😀": [99999999999999999999]}),  # found after multi-byte text
])
def test_known_shapes(text, expected):
    assert fastjson.loads(text) == expected


@pytest.mark.parametrize("text, message", [('{"a":1,}', "expected an object key"), ("{0:", "unexpected end of input"),
                                           ('{"a":1} x', "trailing data")])
def test_errors_still_name_the_position(text, message):
    with pytest.raises(fastjson.FastJsonError, match=message):
        fastjson.loads(text)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(tricky_text, documents, max_size=4), st.integers(0, 2))
def test_formatted_entries_write_exactly_what_the_plain_writer_writes(entries, depth_error):
    """A table's entries written once (fastjson.formatted) and placed in a document give the
    document's own text; one written for another depth is written again."""
    plain = {"table": entries, "n": 1}
    depth = 2 if depth_error == 0 else 2 + depth_error
    kept = {"table": {key: fastjson.formatted(value, depth) for key, value in entries.items()}, "n": 1}
    assert fastjson.dumps(kept) == fastjson.dumps(plain) == reference_dumps(plain)


def test_a_topic_table_writes_the_same_file_from_its_kept_entries_after_every_change():
    from metadata.data_version import DataVersion
    from metadata.topic_config import TopicConfig, TopicTable
    table = TopicTable(topics={f"t{n}": TopicConfig(f"t{n}", 1 + n % 3, 1 + n % 3) for n in range(20)})
    for step in range(1, 30):
        version = DataVersion(0, step, step)
        if step % 3:
            table = table.with_topic(TopicConfig(f"t{step % 7}", step % 5 + 1, step % 5 + 1, message_type="FIFO"), version)
        else:
            table = table.without_topic(f"t{step % 11}", version)
        assert fastjson.dumps(table.file_document()) == fastjson.dumps(table.to_document())


def test_a_group_table_writes_the_same_file_from_its_kept_entries_after_every_change():
    from metadata.data_version import DataVersion
    from metadata.subscription_group import SubscriptionGroupConfig, SubscriptionGroupTable
    table = SubscriptionGroupTable(groups={f"g{n}": SubscriptionGroupConfig(f"g{n}") for n in range(20)})
    for step in range(1, 30):
        version = DataVersion(0, step, step)
        if step % 3:
            table = table.with_group(SubscriptionGroupConfig(f"g{step % 7}", retry_max_times=step % 5), version)
        else:
            table = table.without_group(f"g{step % 11}", version)
        assert fastjson.dumps(table.file_document()) == fastjson.dumps(table.to_document())
