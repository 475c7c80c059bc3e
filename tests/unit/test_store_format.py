"""Pure format code: record, consume-queue entry and checkpoint codecs."""
from hypothesis import given, settings, strategies as st

from metadata.message import MessageDraft
from store import record
from store.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from store.cq_entry import decode_entries, encode_entry, first_index
from store.record import BLANK_SIZE, Invalid, Kind

ROOM = 1 << 20
text = st.text(max_size=20)
drafts = st.builds(
    MessageDraft, topic=st.text(min_size=1, max_size=30), queue_id=st.integers(0, 2**31 - 1),
    body=st.binary(max_size=300), born_timestamp_ms=st.integers(0, 2**62), born_host=text,
    properties=st.dictionaries(text, text, max_size=4), user_properties=st.dictionaries(text, text, max_size=4))


@given(drafts, st.integers(0, 2**40), st.integers(0, 2**40), st.integers(0, 2**62))
def test_record_round_trip(draft, queue_offset, commit_offset, store_ts):
    data = record.encode_record(draft, queue_offset, commit_offset, store_ts)
    decoded = record.decode(data, 0, commit_offset, ROOM)
    assert decoded.draft == draft
    assert (decoded.queue_offset, decoded.commit_offset, decoded.size, decoded.store_timestamp_ms) == (
        queue_offset, commit_offset, len(data), store_ts)


@settings(max_examples=30)
@given(drafts)
def test_every_single_byte_corruption_is_detected(draft):
    data = record.encode_record(draft, 7, 1000, 5)
    for index in range(len(data)):
        for flip in (0x01, 0x80, 0xFF):
            broken = bytearray(data)
            broken[index] ^= flip
            assert isinstance(record.check(bytes(broken), 0, 1000, ROOM), Invalid), (index, flip)


@settings(max_examples=30)
@given(drafts)
def test_every_truncation_is_detected(draft):
    data = record.encode_record(draft, 7, 1000, 5)
    for length in range(len(data)):
        assert isinstance(record.check(data[:length], 0, 1000, ROOM), Invalid)
        assert isinstance(record.decode(data[:length], 0, 1000, ROOM), Invalid)


def test_record_is_valid_only_at_its_own_position():
    data = record.encode_record(MessageDraft("T", 0, b"x", 1), 0, 100, 5)
    assert record.check(data, 0, 100, ROOM).kind is Kind.MESSAGE
    assert record.check(data, 0, 200, ROOM) is Invalid.BAD_OFFSET


def test_record_must_leave_room_for_a_blank():
    data = record.encode_record(MessageDraft("T", 0, b"x", 1), 0, 0, 5)
    assert record.check(data, 0, 0, len(data) + BLANK_SIZE).kind is Kind.MESSAGE
    assert record.check(data, 0, 0, len(data) + BLANK_SIZE - 1) is Invalid.BAD_SIZE


def test_blank_runs_to_the_segment_end():
    blank = record.encode_blank(100)
    assert record.check(blank, 0, 0, 100).kind is Kind.BLANK
    assert record.check(blank, 0, 0, 101) is Invalid.BAD_SIZE
    assert record.check(bytes(100), 0, 0, 100) is Invalid.EMPTY
    assert record.decode(blank, 0, 0, 100) is Invalid.BAD_MAGIC


@given(st.binary(max_size=400), st.integers(0, 1000))
def test_garbage_never_crashes(data, offset):
    assert record.check(data, 0, offset, ROOM) is not None
    record.decode(data, 0, offset, ROOM)


def _decode_as_check_says(buf, pos, commit_offset, room):
    """What decode must answer: check's reason, BAD_MAGIC for a blank, else the record."""
    info = record.check(buf, pos, commit_offset, room)
    if isinstance(info, Invalid):
        return info
    return Invalid.BAD_MAGIC if info.kind is Kind.BLANK else "record"


@settings(max_examples=60)
@given(drafts, st.integers(0, 2**20), st.data())
def test_decode_refuses_exactly_what_check_refuses_for_the_same_reason(draft, commit_offset, data):
    """decode checks a valid record its own quicker way; whatever is wrong, it names the reason
    check names (a flipped byte, a cut, another position, a blank, a smaller room)."""
    encoded = record.encode_record(draft, 3, commit_offset, 9)
    variants = [encoded, encoded[:data.draw(st.integers(0, len(encoded)))], record.encode_blank(64)]
    broken = bytearray(encoded)
    broken[data.draw(st.integers(0, len(encoded) - 1))] ^= data.draw(st.integers(1, 255))
    variants.append(bytes(broken))
    positions = [commit_offset, commit_offset + 1]
    rooms = [ROOM, len(encoded) + BLANK_SIZE - 1, 64]
    for buf in variants:
        for at in positions:
            for room in rooms:
                expected = _decode_as_check_says(buf, 0, at, room)
                got = record.decode(buf, 0, at, room)
                assert (got if isinstance(got, Invalid) else "record") == expected or (
                    expected == "record" and got is Invalid.BAD_LAYOUT), (expected, got)


@given(st.lists(st.tuples(st.integers(0, 2**62), st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1))))
def test_cq_entries_round_trip(entries):
    data = b"".join(encode_entry(*entry) for entry in entries)
    assert [(e.commit_offset, e.size, e.tag_code) for e in decode_entries(data + b"\x01\x02")] == entries


@given(st.integers(0, 50), st.integers(0, 60))
def test_first_index(count, threshold):
    assert first_index(count, lambda i: i >= threshold) == min(count, threshold)


@given(st.builds(Checkpoint, *[st.integers(0, 2**62)] * 7, clean_shutdown=st.booleans()))
def test_checkpoint_round_trip_and_corruption(point):
    data = encode_checkpoint(point)
    assert len(data) == 4096 and decode_checkpoint(data) == point
    for index in range(0, 68):
        broken = bytearray(data)
        broken[index] ^= 0x10
        assert decode_checkpoint(bytes(broken)) is None
    assert decode_checkpoint(data[:40]) is None


def test_record_bytes_are_the_documented_format():
    """Golden bytes: the on-disk format is a contract with recovery, replication and older data
    directories, so an encoder rewritten for speed must produce exactly these."""
    draft = MessageDraft("TopicA", 3, b"hello body", 1700000000123, "10.0.0.1:4000",
                         {"UNIQ_KEY": "AB01", "TAGS": "tag-\u00e9"}, {"color": "blue"})
    assert record.encode_record(draft, 42, 4096, 1700000000456).hex() == (
        "00000092da7a5eedfad7f85a0000000300000000000000000000002a00000000000010000000018bcfe569c8"
        "0000018bcfe5687b0006546f70696341000d31302e302e302e313a34303030000000220008554e49515f4b45"
        "590000000441423031000454414753000000067461672dc3a90000000f0005636f6c6f7200000004626c7565"
        "0000000a68656c6c6f20626f6479")
