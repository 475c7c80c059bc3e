"""Receipt handles: the token a consumer must present to ack or change one delivery.

Rules:
- A handle names where the delivered record is stored (topic, which may be a retry topic,
  queue id, queue offset) and a ``seq`` unique to that delivery or ChangeInvisibleDuration.
  Only the handle whose seq is the current one of the in-flight entry is valid.
- Text form: ``v1.<base64url(fields)>.<crc32 hex>``.  :func:`decode` never raises on garbage:
  it returns None, which the broker answers with INVALID_RECEIPT_HANDLE.
"""
from __future__ import annotations

import binascii
import zlib
from dataclasses import dataclass

from metadata.frozen_values import quick_init
from metadata.names import is_valid_topic_name

MAX_HANDLE_LENGTH = 1024
_SEP = "|"


@quick_init
@dataclass(frozen=True)
class ReceiptHandle:
    topic: str
    queue_id: int
    offset: int
    seq: int

    def encode(self) -> str:
        fields = (self.topic, self.queue_id, self.offset, self.seq)
        raw = f"{self.topic}{_SEP}{self.queue_id}{_SEP}{self.offset}{_SEP}{self.seq}".encode()
        # binascii directly, as decode: base64.urlsafe_b64encode's wrappers cost more than the encoding
        body = binascii.b2a_base64(raw, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode("ascii")
        text = f"v1.{body}.{zlib.crc32(raw):08x}"
        if _decodable(fields):
            if len(_issued) >= ISSUED_MAX:
                _issued.clear()
            _issued[text] = fields
        return text


# Handles encoded lately, text -> fields: an ack presents the text a receive made moments
# before, and a lookup is a tenth of decoding it again (base64, CRC, the canonical check: 2.8
# us a handle, 6% of a receive and its ack).  decode is a function of the text alone, so what
# is found here is what decoding would give.  Plain tuples of str and int: the collector stops
# tracking them.  Bounded: emptied when full, which only makes the next acks decode.
ISSUED_MAX = 16384
_issued: dict[str, tuple[str, int, int, int]] = {}


_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")


def decode(text: object) -> ReceiptHandle | None:
    if not isinstance(text, str) or len(text) > MAX_HANDLE_LENGTH:
        return None
    issued = _issued.get(text)
    if issued is not None:
        return ReceiptHandle(*issued)
    parts = text.split(".")
    if len(parts) != 3 or parts[0] != "v1":
        return None
    body = parts[1]
    try:  # binascii directly: base64.urlsafe_b64decode's wrappers cost more than the decoding
        encoded = body.encode("ascii")
        raw = binascii.a2b_base64(encoded.translate(_FROM_URLSAFE) + b"=" * (-len(body) % 4))
        fields = raw.decode().split(_SEP)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    if f"{zlib.crc32(raw):08x}" != parts[2] or len(fields) != 4:
        return None
    if binascii.b2a_base64(raw, newline=False).translate(_TO_URLSAFE).rstrip(b"=") != encoded:
        return None  # non-canonical base64 (stray padding bits): one handle has one spelling
    topic, queue_id, offset, seq = fields
    if not is_valid_topic_name(topic) or not (_is_int(queue_id) and _is_int(offset) and _is_int(seq)):
        return None
    return ReceiptHandle(topic, int(queue_id), int(offset), int(seq))


_DIGITS_LIMIT = 10 ** 19  # decode takes at most 19 digits a number
_TOPICS_MAX = 4096
_decodable_topics: set[str] = set()  # topics found valid for a handle (a handful repeat)


def _decodable(fields: tuple[str, int, int, int]) -> bool:
    """Whether :func:`decode` of these fields' text gives them back (else it is not kept)."""
    topic, queue_id, offset, seq = fields
    if topic not in _decodable_topics:
        if _SEP in topic or not is_valid_topic_name(topic):
            return False
        if len(_decodable_topics) >= _TOPICS_MAX:
            _decodable_topics.clear()
        _decodable_topics.add(topic)
    return (type(queue_id) is int and type(offset) is int and type(seq) is int
            and 0 <= queue_id < _DIGITS_LIMIT and 0 <= offset < _DIGITS_LIMIT and 0 <= seq < _DIGITS_LIMIT)


def _is_int(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 19
