"""A run of records copied from the master (slave side): check them all and collect their index, in one pass.

Rules:

* A run is accepted whole or not at all: :func:`check_run` returns a reason (a string) for
  the first record that is not acceptable, and the caller writes nothing.
* Every record gets the checks of :func:`store.record.check`: size and magic, the CRC over
  every byte but the CRC field, and its own commit offset; a BLANK runs exactly to its
  segment's end and must be present whole.  A message's sections (topic, born host,
  properties, user properties, body) must add up to its size, and its topic and tag must be
  UTF-8.  The other texts are not decoded: the CRC already proves the bytes are the ones
  the master encoded from text.
* What indexing needs (topic, queue id, queue offset, size, tag code) is read straight from
  the bytes, without building a StoredMessage: this is the slave's hot path (a catch-up of
  1 GiB of 1 KiB messages is a million records), so per-record work is a few struct reads
  and two ``zlib.crc32`` calls.
* Queue offsets of one queue must be consecutive within the run.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from metadata.message import Prop
from store.cq_entry import ENTRY
from store.record import BLANK_MAGIC, BLANK_SIZE, HEADER, HEADER_SIZE, MESSAGE_MAGIC

_SIZE_MAGIC = struct.Struct(">II")
# the header fields a check needs, plus the topic's length: size, magic, crc, queue id, (flags),
# queue offset, commit offset, (timestamps), topic length; see store.record
_HEAD = struct.Struct(">IIIi4xqq16xH")
assert _HEAD.size == HEADER_SIZE + 2
_SHORT = (0, None, 0, 0, 0, 0, 0)  # fewer bytes left than a message header: a blank, or truncated
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_TAG_KEY = Prop.TAG.encode()
_TAG_FIELD = _U16.pack(len(_TAG_KEY)) + _TAG_KEY


@dataclass
class QueueRun:
    """The encoded consume-queue entries of one queue, from queue offset ``first``."""

    first: int
    entries: list[bytes]


@dataclass(frozen=True)
class CheckedRun:
    size: int                                 # bytes of whole records (the run's length)
    queues: dict[tuple[str, int], QueueRun]   # in order of first appearance


def check_run(data: bytes, offset: int, segment_size: int) -> CheckedRun | str:
    """Every record of ``data``, which should sit at commit ``offset``, checked; or why not.

    Caches keep per-record work small: the CRC of a record's first 8 bytes (size and magic)
    per size; the last topic-and-host section seen (records of one producer repeat it, and
    its topic is decoded once); and the last properties shape (see :func:`_tag_shape`).
    """
    view, head, u32, crc32 = memoryview(data), _HEAD.unpack_from, _U32.unpack_from, zlib.crc32
    queues: dict[tuple[str, int], QueueRun] = {}
    seeds: dict[int, int] = {}
    prefix: bytes | None = None
    topic: str | None = None
    shape = _NO_SHAPE
    pos, length = 0, len(data)
    while pos < length:
        at = offset + pos
        room = segment_size - at % segment_size
        size, magic, crc, queue_id, queue_offset, commit_offset, topic_length = (
            head(data, pos) if length - pos >= _HEAD.size else _SHORT)
        if magic != MESSAGE_MAGIC:
            reason = _check_other(data, pos, room)
            if isinstance(reason, str):
                return f"record at {at} is invalid ({reason})"
            pos += reason
            continue
        end = pos + size
        if size < HEADER_SIZE or size > room - BLANK_SIZE or end > length:
            return f"record at {at} is invalid (BAD_SIZE {size} or TRUNCATED)"
        seed = seeds.get(size)
        if seed is None:
            seed = seeds[size] = crc32(view[pos:pos + 8])
        if crc32(view[pos + 12:end], seed) != crc:
            return f"record at {at} is invalid (BAD_CRC)"
        if commit_offset != at:
            return f"record at {at} is invalid (BAD_OFFSET: it belongs at {commit_offset})"
        section = pos + HEADER_SIZE
        if prefix is None or not data.startswith(prefix, section):
            prefix, topic = _topic_and_host(data, section, topic_length, end)
        properties = section + len(prefix) + 4
        properties_end = properties + (u32(data, properties - 4)[0] if properties <= end else end)
        body = properties_end + 4 + (u32(data, properties_end)[0] if properties_end + 4 <= end else end)
        if topic is None or body + 4 > end or body + 4 + u32(data, body)[0] != end:
            return f"record at {at} is invalid (BAD_LAYOUT)"
        if data.find(_TAG_FIELD, properties, properties_end) < 0:
            tag_code = 0  # no key TAGS can be there
        elif shape.fits(data, properties, properties_end):
            tag_code = shape.tag_code
        else:
            shape = _tag_shape(data, properties, properties_end)
            tag_code = shape.tag_code
        if tag_code is None:
            return f"record at {at} is invalid (BAD_LAYOUT in properties)"
        run = queues.get((topic, queue_id))
        if run is None:
            run = queues[(topic, queue_id)] = QueueRun(queue_offset, [])
        elif run.first + len(run.entries) != queue_offset:
            return f"record at {at}: queue offset {queue_offset} of {topic}/{queue_id} is not consecutive"
        run.entries.append(ENTRY.pack(at, size, tag_code))
        pos = end
    return CheckedRun(pos, queues)


def _check_other(data: bytes, pos: int, room: int) -> int | str:
    """A record that is not a whole message header: a valid BLANK's size, or why not."""
    if len(data) - pos < BLANK_SIZE:
        return "TRUNCATED"
    size, magic = _SIZE_MAGIC.unpack_from(data, pos)
    if magic != BLANK_MAGIC:
        return "BAD_MAGIC" if magic != MESSAGE_MAGIC else "TRUNCATED"
    (crc,) = _U32.unpack_from(data, pos + 8)
    if zlib.crc32(data[pos:pos + 8]) != crc:
        return "BAD_CRC"
    if size != room:
        return "BAD_SIZE"
    if pos + size > len(data):
        return "TRUNCATED"
    return size


def _topic_and_host(data: bytes, at: int, topic_length: int, end: int) -> tuple[bytes, str | None]:
    """The raw topic-and-born-host section at ``at`` (with both u16 lengths), and the topic (None: not UTF-8)."""
    host_at = at + 2 + topic_length
    (host_length,) = _U16.unpack_from(data, host_at) if host_at + 2 <= end else (end,)
    try:
        topic = data[at + 2:host_at].decode("utf-8")
    except UnicodeDecodeError:
        topic = None
    return data[at:min(end, host_at + 2 + host_length)], topic


def _tag_code(data: bytes, at: int, end: int) -> int | None:
    """:func:`metadata.message.tag_hash` of the TAGS property in ``data[at:end]`` (0 without one)."""
    while at + 6 <= end:
        (key_length,) = _U16.unpack_from(data, at)
        key = data[at + 2:at + 2 + key_length]
        at += 2 + key_length
        if at + 4 > end:
            return None
        (value_length,) = _U32.unpack_from(data, at)
        value_end = at + 4 + value_length
        if value_end > end:
            return None
        if key == _TAG_KEY:  # keys are unique: the record was encoded from a dict
            value = data[at + 4:value_end]
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                return None
            return zlib.crc32(value)
        at = value_end
    return 0 if at == end else None


@dataclass(frozen=True)
class _TagShape:
    """A properties section whose TAGS entry is first or second: the header (key length, key,
    value length) of the entry before it (empty if none), where TAGS starts, and the bytes
    from TAGS to the section's end.  A section that starts with the same header and holds the
    same bytes from the same place on has the same tag code (its value is among those bytes),
    whatever the first entry's value (the message id, different in every record)."""

    first: bytes
    tags_at: int
    rest: bytes
    tag_code: int | None

    def fits(self, data: bytes, at: int, end: int) -> bool:
        return (end - at == self.tags_at + len(self.rest) and data.startswith(self.first, at)
                and data.startswith(self.rest, at + self.tags_at))


_NO_SHAPE = _TagShape(b"", -1, b"", None)  # fits nothing: no section has length -1


def _tag_shape(data: bytes, at: int, end: int) -> _TagShape:
    """The tag code of ``data[at:end]`` (walked), as a shape if TAGS is its first or second entry."""
    code = _tag_code(data, at, end)
    if code is None:
        return _TagShape(b"", -1, b"", None)
    if data.startswith(_TAG_FIELD, at):
        return _TagShape(b"", 0, data[at:end], code)
    header_end = at + 6 + _U16.unpack_from(data, at)[0]
    tags_at = header_end + _U32.unpack_from(data, header_end - 4)[0]
    if not data.startswith(_TAG_FIELD, tags_at):
        return _TagShape(b"", -1, b"", code)
    return _TagShape(data[at:header_end], tags_at - at, data[tags_at:end], code)
