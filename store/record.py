"""Commit-log record format: encode, check and decode, with no file I/O.

Rules:

* A record is self-describing and self-checking.  Big-endian, fixed 52-byte header::

      0  total_size   u32   bytes of the whole record, header included
      4  magic        u32   MESSAGE_MAGIC or BLANK_MAGIC
      8  crc32        u32   zlib.crc32 of bytes [0, 8) followed by [12, total_size)
      12 queue_id     i32
      16 flags        u32   reserved, 0
      20 queue_offset i64   logical offset in (topic, queue_id)
      28 commit_offset i64  physical offset of this record in the commit log
      36 store_ts     i64   ms
      44 born_ts      i64   ms

  then ``topic`` (u16 length + UTF-8), ``born_host`` (u16 + UTF-8), system properties and
  user properties (each u32 byte length + entries of u16 key length, key, u32 value length,
  value, all UTF-8), and ``body`` (u32 length + bytes).  The sections must add up to
  ``total_size`` exactly.
* The CRC covers every byte but itself (size and magic included), so any single-byte change
  and any truncation is detected; the ``commit_offset`` field makes a record valid only at
  its own position, so stale bytes from elsewhere are never taken for a record.
* A segment ends with a BLANK record (12-byte header: size, magic, CRC of the first 8
  bytes) whose size runs to the segment's end; the rest of it is zero padding.  A writer
  therefore always keeps ``BLANK_SIZE`` bytes free at the end of a segment.
* Checking never raises: it returns a :class:`Invalid` reason, so garbage cannot crash a
  reader.  Decoding a record that checked valid cannot fail.
"""
from __future__ import annotations

import struct
from enum import Enum
from typing import Mapping, NamedTuple

from metadata.checksum import crc32
from metadata.message import MessageDraft, Prop, SendItem, StoredMessage

MESSAGE_MAGIC = 0xDA7A5EED
BLANK_MAGIC = 0xB1A4CEED
HEADER = struct.Struct(">IIIiIqqqq")
HEADER_SIZE = HEADER.size  # 52
BLANK = struct.Struct(">III")
BLANK_SIZE = BLANK.size  # 12
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
STORE_TS_POSITION = 36
MAX_SHORT = 0xFFFF


class Invalid(str, Enum):
    """Why the bytes at a position are not a valid record."""

    TRUNCATED = "TRUNCATED"  # fewer bytes than the record claims (a torn tail)
    EMPTY = "EMPTY"  # zeros: nothing was ever written here
    BAD_MAGIC = "BAD_MAGIC"
    BAD_SIZE = "BAD_SIZE"
    BAD_CRC = "BAD_CRC"
    BAD_OFFSET = "BAD_OFFSET"  # a valid record, but it belongs at another position
    BAD_LAYOUT = "BAD_LAYOUT"  # sections do not add up, or text is not UTF-8


class Kind(str, Enum):
    MESSAGE = "MESSAGE"
    BLANK = "BLANK"


class RecordInfo(NamedTuple):
    """What a cheap check learns about a valid record (no body decoding); a named tuple, as
    one is made per record read."""

    kind: Kind
    size: int
    queue_id: int = 0
    queue_offset: int = 0
    store_timestamp_ms: int = 0


def _text(value: str, limit_bytes: int, what: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > limit_bytes:
        raise ValueError(f"{what} is {len(data)} bytes, more than {limit_bytes}")
    return data


_SHORT_TEXT_CACHE_MAX = 4096
_short_texts: dict[str, bytes] = {}  # text -> u16 length + UTF-8: topics, hosts and property keys repeat


def _short_text(value: str, what: str) -> bytes:
    """``value`` as u16 length + UTF-8, from a bounded cache (every record repeats its topic,
    host and property keys; encoding them again was a third of the encoder's time)."""
    encoded = _short_texts.get(value)
    if encoded is None:
        data = _text(value, MAX_SHORT, what)
        encoded = _U16.pack(len(data)) + data
        if len(_short_texts) < _SHORT_TEXT_CACHE_MAX:
            _short_texts[value] = encoded
    return encoded


_EMPTY_SECTION = _U32.pack(0)


def _properties_section(props: Mapping[str, str]) -> bytes:
    """A properties section: u32 byte length, then the entries (one join and one length for
    the section, not three lengths and a sum per entry: a third of the encoder's time)."""
    if not props:
        return _EMPTY_SECTION
    entries: list[bytes] = []
    pack_u32, texts = _U32.pack, _short_texts
    for key, value in props.items():
        v = value.encode("utf-8")
        entries += (texts.get(key) or _short_text(key, "property key"), pack_u32(len(v)), v)
    section = b"".join(entries)
    return pack_u32(len(section)) + section


def encode_properties(props: Mapping[str, str]) -> bytes:
    return _properties_section(props)


def _entry(key: str, value: str) -> bytes:
    data = value.encode("utf-8")
    return _short_text(key, "property key") + _U32.pack(len(data)) + data


_MESSAGE_ID_KEY, _TAG_KEY, _KEYS_KEY, _GROUP_KEY = (_short_text(key, "property key") for key in (
    Prop.MESSAGE_ID, Prop.TAG, Prop.KEYS, Prop.MESSAGE_GROUP))
_type_entries: dict[str, bytes] = {}  # message type name -> its whole entry (a handful of names)


def encode_item_tail(item: SendItem) -> bytes:
    """:func:`encode_tail` of ``item.draft``, without the draft or its properties dict: the
    system properties are encoded from the item's fields, in the order ``SendItem.properties``
    gives them (message id, tag, keys, type, group, delivery time, the others; empty ones left
    out).  A batch's message spent about 3 us making that dict
    and encoding it again.  ValueError for a text past its u16 length."""
    (topic, body, _, host, message_id, tag, keys, message_type, group, delivery_ms, user, _,
     other) = item
    pack = _U32.pack
    if message_id:
        data = message_id.encode("utf-8")
        section = [_MESSAGE_ID_KEY, pack(len(data)), data]
    else:
        section = []
    if tag:
        data = tag.encode("utf-8")
        section += (_TAG_KEY, pack(len(data)), data)
    if keys:
        data = keys.encode("utf-8")
        section += (_KEYS_KEY, pack(len(data)), data)
    type_name = message_type._value_
    entry = _type_entries.get(type_name)
    if entry is None:
        entry = _entry(Prop.MESSAGE_TYPE, type_name)
        if len(_type_entries) < 64:
            _type_entries[type_name] = entry
    section.append(entry)
    if group:
        data = group.encode("utf-8")
        section += (_GROUP_KEY, pack(len(data)), data)
    if delivery_ms is not None:
        section.append(_entry(Prop.DELIVERY_TIME_MS, str(delivery_ms)))
    if other:
        for key, value in other.items():
            section.append(_entry(key, value))
    properties = b"".join(section)  # joined twice, but a section is tens of bytes: cheaper than summing lengths
    texts = _short_texts
    return b"".join((texts.get(topic) or _short_text(topic, "topic"), texts.get(host) or _short_text(host, "born host"),
                     pack(len(properties)), properties, _properties_section(user) if user else _EMPTY_SECTION,
                     pack(len(body)), body))


def encode_tail(draft: MessageDraft) -> bytes:
    """Everything after the header; its length fixes the record size before placement."""
    texts = _short_texts
    return b"".join((texts.get(draft.topic) or _short_text(draft.topic, "topic"),
                     texts.get(draft.born_host) or _short_text(draft.born_host, "born host"),
                     _properties_section(draft.properties), _properties_section(draft.user_properties),
                     _U32.pack(len(draft.body)), draft.body))


_HEAD_FRONT = struct.Struct(">II")  # size, magic: the bytes before the CRC
_HEAD_BACK = struct.Struct(">iIqqqq")  # queue id .. born timestamp: the bytes after it


def seal_parts(tail: bytes, queue_id: int, queue_offset: int, commit_offset: int,
               store_timestamp_ms: int, born_timestamp_ms: int) -> tuple[bytes, bytes, bytes, bytes]:
    """:func:`seal`'s bytes in four parts, for a writer that joins many records at once (one
    copy of each body into the write, not two)."""
    front = _HEAD_FRONT.pack(HEADER_SIZE + len(tail), MESSAGE_MAGIC)
    back = _HEAD_BACK.pack(queue_id, 0, queue_offset, commit_offset, store_timestamp_ms, born_timestamp_ms)
    return front, _U32.pack(crc32(tail, crc32(back, crc32(front)))), back, tail


def seal(tail: bytes, queue_id: int, queue_offset: int, commit_offset: int,
         store_timestamp_ms: int, born_timestamp_ms: int) -> bytes:
    """Header + tail with its CRC: the bytes written to the commit log."""
    return b"".join(seal_parts(tail, queue_id, queue_offset, commit_offset, store_timestamp_ms, born_timestamp_ms))


def encode_record(draft: MessageDraft, queue_offset: int, commit_offset: int, store_timestamp_ms: int) -> bytes:
    return seal(encode_tail(draft), draft.queue_id, queue_offset, commit_offset,
                store_timestamp_ms, draft.born_timestamp_ms)


def encode_blank(size: int) -> bytes:
    """The end-of-segment marker of ``size`` bytes (header plus zero padding)."""
    assert size >= BLANK_SIZE, size
    head = struct.pack(">II", size, BLANK_MAGIC)
    return head + _U32.pack(crc32(head)) + bytes(size - BLANK_SIZE)


def check(buf: bytes | memoryview, pos: int, commit_offset: int, room: int) -> RecordInfo | Invalid:
    """Validate the record at ``buf[pos:]`` that should sit at ``commit_offset``.

    ``room`` is how many bytes remain until the segment's end; a record never crosses it and
    a blank runs exactly to it.  Only CRC and header are examined (no decoding).
    """
    available = len(buf) - pos
    if available < 8:
        return Invalid.EMPTY if not any(buf[pos:]) else Invalid.TRUNCATED
    size, magic = struct.unpack_from(">II", buf, pos)
    if size == 0 and magic == 0:
        return Invalid.EMPTY
    if magic == BLANK_MAGIC:
        return _check_blank(buf, pos, size, room)
    if magic != MESSAGE_MAGIC:
        return Invalid.BAD_MAGIC
    if size < HEADER_SIZE or size > room - BLANK_SIZE:
        return Invalid.BAD_SIZE
    if available < size:
        return Invalid.TRUNCATED
    view = memoryview(buf)[pos:pos + size]
    (crc,) = _U32.unpack_from(view, 8)
    if crc32(view[12:], crc32(view[:8])) != crc:
        return Invalid.BAD_CRC
    _, _, _, queue_id, _, queue_offset, at, store_ts, _ = HEADER.unpack_from(view)
    if at != commit_offset:
        return Invalid.BAD_OFFSET
    return RecordInfo(Kind.MESSAGE, size, queue_id, queue_offset, store_ts)


def _check_blank(buf, pos: int, size: int, room: int) -> RecordInfo | Invalid:
    if len(buf) - pos < BLANK_SIZE:
        return Invalid.TRUNCATED
    (crc,) = _U32.unpack_from(buf, pos + 8)
    if crc32(bytes(buf[pos:pos + 8])) != crc:
        return Invalid.BAD_CRC
    if size != room or size < BLANK_SIZE:
        return Invalid.BAD_SIZE
    return RecordInfo(Kind.BLANK, size)


def _utf8_at(data: bytes, pos: int, length: int, end: int) -> tuple[str, int]:
    """The UTF-8 text of ``length`` bytes at ``pos``, and the position after it."""
    stop = pos + length
    if stop > end:
        raise ValueError("section runs past the record")
    return data[pos:stop].decode("utf-8"), stop


_unpack_u16 = _U16.unpack_from
_unpack_u32 = _U32.unpack_from


def _properties(data: bytes, pos: int, end: int) -> tuple[dict[str, str], int]:
    (length,) = _unpack_u32(data, pos)
    pos += 4
    stop = pos + length
    if stop > end:
        raise ValueError("section runs past the record")
    props = {}
    while pos < stop:
        (key_length,) = _unpack_u16(data, pos)
        pos += 2
        at = pos + key_length
        if at + 4 > stop:  # the key, or the value's length field, runs past the section
            raise ValueError("property runs past its section")
        key = data[pos:at].decode("utf-8")
        (value_length,) = _unpack_u32(data, at)
        pos = at + 4 + value_length
        if pos > stop:
            raise ValueError("section runs past the record")
        props[key] = data[at + 4:pos].decode("utf-8")
    return props, pos


_EMPTY_U32 = bytes(4)


def decode(buf: bytes | memoryview, pos: int, commit_offset: int, room: int) -> StoredMessage | Invalid:
    """Check then decode the message record at ``buf[pos:]``; a blank is ``Invalid.BAD_MAGIC``.

    A valid record is checked here with one header unpack and one CRC (a receive decodes
    every message it delivers); anything that is not goes to :func:`check`, which names why
    in its own order."""
    if len(buf) - pos < HEADER_SIZE:
        return _invalid(buf, pos, commit_offset, room)
    size, magic, crc, queue_id, _, queue_offset, at, store_ts, born_ts = HEADER.unpack_from(buf, pos)
    if (magic != MESSAGE_MAGIC or size < HEADER_SIZE or size > room - BLANK_SIZE or len(buf) - pos < size
            or at != commit_offset):
        return _invalid(buf, pos, commit_offset, room)
    if pos == 0 and len(buf) == size and type(buf) is bytes:
        data = buf  # the usual read: exactly this record
    else:
        data = bytes(memoryview(buf)[pos:pos + size])  # one copy, then offsets (no per-field views)
    if crc32(memoryview(data)[12:], crc32(data[:8])) != crc:
        return Invalid.BAD_CRC
    try:
        (length,) = _unpack_u16(data, HEADER_SIZE)
        topic, at = _utf8_at(data, HEADER_SIZE + 2, length, size)
        (length,) = _unpack_u16(data, at)
        host, at = _utf8_at(data, at + 2, length, size)
        props, at = _properties(data, at, size)
        if data[at:at + 4] == _EMPTY_U32:  # most messages have no user property
            user_props, at = {}, at + 4
        else:
            user_props, at = _properties(data, at, size)
        (length,) = _unpack_u32(data, at)
        if at + 4 + length != size:
            return Invalid.BAD_LAYOUT
        body = data[at + 4:]
    except (ValueError, struct.error, UnicodeDecodeError):
        return Invalid.BAD_LAYOUT
    draft = MessageDraft.owned(topic, queue_id, body, born_ts, host, props, user_props)
    return StoredMessage.trusted(draft, commit_offset, size, queue_offset, store_ts)


def _invalid(buf: bytes | memoryview, pos: int, commit_offset: int, room: int) -> Invalid:
    """Why the record at ``buf[pos:]`` cannot be decoded (it failed decode's quick test)."""
    info = check(buf, pos, commit_offset, room)
    if isinstance(info, Invalid):
        return info
    assert info.kind is Kind.BLANK, "decode's test refuses only what check refuses, and blanks"
    return Invalid.BAD_MAGIC


def declared_size(buf: bytes | memoryview, pos: int = 0) -> int:
    """The size field of the record at ``pos`` (unchecked), or 0 if too few bytes."""
    return _U32.unpack_from(buf, pos)[0] if len(buf) - pos >= 4 else 0
