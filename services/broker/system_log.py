"""Reading a broker system topic (queue 0) in order from a cursor: the one scan every
tail-following service (timer, transactions) uses.  Skips a range trimmed by retention."""
from __future__ import annotations

import json
from typing import Callable

from metadata.message import StoredMessage
from store.results import GetStatus

READ_BATCH = 1024


def scan(store, topic: str, offset: int, apply: Callable[[StoredMessage], None]) -> int:
    """Apply every record of ``topic`` queue 0 from ``offset``; returns the next offset."""
    while True:
        result = store.get(topic, 0, offset, READ_BATCH)
        if result.status is GetStatus.OFFSET_TOO_SMALL:
            offset = result.next_offset
            continue
        if not result.messages:
            return offset
        for message in result.messages:
            apply(message)
        offset = result.next_offset


def op_body(**fields) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode()


def parse_op(body: bytes) -> dict | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
