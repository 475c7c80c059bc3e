"""store.replica_run: the slave's one-pass check of a replicated run against store.record."""
from __future__ import annotations

import pytest

from metadata.message import MessageDraft, Prop, tag_hash
from store import record
from store.cq_entry import encode_entry
from store.replica_run import check_run

SEGMENT = 8192


def drafts():
    """Two producers (hosts) on one queue, tagged and untagged, a non-ASCII topic and tag, user properties."""
    for i in range(40):
        props = {Prop.MESSAGE_ID: f"id-{i}"}
        if i % 3:
            props[Prop.TAG] = "tag-é" if i % 2 else "a"
        if i % 5 == 0:
            props[Prop.KEYS] = "k\x00\x04TAGS"  # a value that looks like a TAGS key
        topic = "tópico" if i % 4 == 0 else "T"
        yield MessageDraft(topic, i % 2, b"b" * (100 + 37 * i), 7, f"10.0.0.{i % 2}:1", props,
                           {"u": str(i)} if i % 7 == 0 else {})


def same_shape_drafts():
    """Runs of records whose properties differ only in the first value (the shape cache's case), and its near misses."""
    for i in range(60):
        props = {Prop.MESSAGE_ID: f"{i:032X}" if i % 9 else f"id{i}", Prop.TAG: "TagA" if i % 13 else "TagB",
                 Prop.MESSAGE_TYPE: "NORMAL"}
        if i % 17 == 0:
            props = {Prop.TAG: "TagA", Prop.MESSAGE_ID: f"{i:032X}"}  # TAGS first
        if i % 19 == 0:
            props = {"x": "1", Prop.MESSAGE_ID: "m", Prop.TAG: "TagA"}  # TAGS third: walked
        yield MessageDraft("T", i % 3, b"body", 7, "h:1", props, {})


def build_log(start: int = 0, make=drafts) -> tuple[bytes, dict]:
    """Records laid out as the commit log does (a BLANK where one does not fit), and the expected index."""
    out, offset, next_queue, expected = bytearray(), start, {}, {}
    for draft in make():
        key = (draft.topic, draft.queue_id)
        data = record.encode_record(draft, next_queue.get(key, 0), offset, 9)
        room = SEGMENT - offset % SEGMENT
        if len(data) + record.BLANK_SIZE > room:
            out += record.encode_blank(room)
            offset += room
            data = record.encode_record(draft, next_queue.get(key, 0), offset, 9)
        first, entries = expected.setdefault(key, (next_queue.get(key, 0), []))
        entries.append(encode_entry(offset, len(data), tag_hash(draft.properties.get(Prop.TAG))))
        next_queue[key] = next_queue.get(key, 0) + 1
        out += data
        offset += len(data)
    return bytes(out), expected


def test_a_valid_run_gives_the_index_decode_would():
    data, expected = build_log()
    checked = check_run(data, 0, SEGMENT)
    assert not isinstance(checked, str), checked
    assert checked.size == len(data) and len(data) > SEGMENT  # crossed a segment through a blank
    assert {key: (run.first, run.entries) for key, run in checked.queues.items()} == expected


def test_records_of_one_shape_get_each_its_own_tag_code():
    data, expected = build_log(make=same_shape_drafts)
    checked = check_run(data, 0, SEGMENT)
    assert not isinstance(checked, str), checked
    assert {key: (run.first, run.entries) for key, run in checked.queues.items()} == expected


@pytest.mark.parametrize("make", [drafts, same_shape_drafts])
def test_every_single_byte_change_outside_blank_padding_is_refused(make):
    data, _ = build_log(make=make)
    blank_padding = set()
    pos = 0
    while pos < len(data):
        info = record.check(data, pos, pos, SEGMENT - pos % SEGMENT)
        if info.kind is record.Kind.BLANK:
            blank_padding.update(range(pos + record.BLANK_SIZE, pos + info.size))
        pos += info.size
    for index in range(0, len(data), 7):
        if index in blank_padding:
            continue
        broken = bytearray(data)
        broken[index] ^= 0x41
        assert isinstance(check_run(bytes(broken), 0, SEGMENT), str), index


@pytest.mark.parametrize("cut", [1, 11, 51, 60])
def test_a_truncated_run_is_refused(cut):
    data, _ = build_log()
    assert isinstance(check_run(data[:-cut], 0, SEGMENT), str)


def test_a_run_at_the_wrong_offset_is_refused():
    data, _ = build_log()
    reason = check_run(data, SEGMENT, SEGMENT)
    assert isinstance(reason, str) and "BAD_OFFSET" in reason


def test_queue_offsets_must_be_consecutive():
    first = record.encode_record(MessageDraft("T", 0, b"x", 1, "h", {}, {}), 0, 0, 1)
    second = record.encode_record(MessageDraft("T", 0, b"x", 1, "h", {}, {}), 2, len(first), 1)
    reason = check_run(first + second, 0, SEGMENT)
    assert isinstance(reason, str) and "not consecutive" in reason


def test_sections_that_do_not_add_up_are_refused_even_with_a_good_crc():
    good = record.encode_record(MessageDraft("T", 0, b"xyz", 1, "h", {Prop.TAG: "a"}, {}), 0, 0, 1)
    tail = bytearray(good[record.HEADER_SIZE:])
    tail[1] = 200  # topic length runs past the record
    size = record.HEADER_SIZE + len(tail)
    bad = record.seal(bytes(tail), 0, 0, 0, 1, 1)
    assert len(bad) == size and record.check(bad, 0, 0, SEGMENT).kind is record.Kind.MESSAGE
    assert "BAD_LAYOUT" in check_run(bad, 0, SEGMENT)


def test_an_empty_run_is_fine():
    checked = check_run(b"", 4096, SEGMENT)
    assert checked.size == 0 and checked.queues == {}


def test_master_read_raw_returns_whole_records_whatever_the_limit(tmp_path):
    """Every cut of CommitLog.read_raw is a run check_run accepts, a BLANK included whole."""
    from store.commit_log import CommitLog

    data, _ = build_log()
    log = CommitLog(tmp_path, SEGMENT)
    for start in range(0, len(data), SEGMENT):
        log.files.write(start, data[start:start + SEGMENT])
    log.write_offset = len(data)
    for max_bytes in (1, 100, 700, 1500, 3000, SEGMENT, 1 << 20):
        offset, copied = 0, []
        while offset < len(data):
            chunk = log.read_raw(offset, max_bytes)
            checked = check_run(chunk, offset, SEGMENT)
            assert not isinstance(checked, str), (max_bytes, offset, checked)
            assert chunk and checked.size == len(chunk)
            copied.append(chunk)
            offset += len(chunk)
        assert b"".join(copied) == data
    log.files.close()
