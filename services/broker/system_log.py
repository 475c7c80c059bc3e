"""Reading a broker system topic (queue 0) in order from a cursor: the one scan every
tail-following service (timer, transactions) uses.  Skips a range trimmed by retention.

And the anchors a state file keeps beside its cursors, so that a file written before the log
was cut is known stale when it is read again.  A rejoining master's log is cut to the
consistent point and the new master's records are copied in at the same offsets; in memory,
``MessageStore.invalidate_derived`` makes the services rebuild, but a process killed between
the cut and its next state file starts again from the older file, whose cursors are past the
cut: they would skip the new master's records (PopService.catch_up tells what that cost).
"""
from __future__ import annotations

import zlib
from typing import Callable, Mapping

from metadata import compact_json
from metadata.message import StoredMessage
from store.results import GetStatus

READ_BATCH = 1024


def scan(store, topic: str, offset: int, apply: Callable[[StoredMessage], None],
         batches: int | None = None) -> tuple[int, bool]:
    """Apply the records of ``topic`` queue 0 from ``offset``, all of them or at most
    ``batches`` reads of READ_BATCH; the next offset, and whether it reached the end."""
    read = 0
    while batches is None or read < batches:
        result = store.get(topic, 0, offset, READ_BATCH)
        if result.status is GetStatus.OFFSET_TOO_SMALL:
            offset = result.next_offset
            continue
        if not result.messages:
            return offset, True
        for message in result.messages:
            apply(message)
        offset, read = result.next_offset, read + 1
    return offset, False


def op_body(**fields) -> bytes:
    return compact_json.dumps(fields)


def parse_op(body: bytes) -> dict | None:
    try:
        value = compact_json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def anchors(store, cursors: Mapping[str, int]) -> dict[str, dict]:
    """For each ``topic: cursor``, the record just below the cursor as this log holds it (its
    offset, commit offset and body CRC).  A cursor at 0, or ahead of this log (a slave that
    adopted its master's state), has none."""
    found = {}
    for topic, cursor in cursors.items():
        record = _record_at(store, topic, cursor - 1) if cursor > 0 else None
        if record is not None:
            found[topic] = {"offset": record.queue_offset, "commitOffset": record.commit_offset,
                            "crc": zlib.crc32(record.body)}
    return found


def cut_below(store, cursors: Mapping[str, int], anchored) -> list[str]:
    """The topics whose cursor a cut went below since ``anchored`` (:func:`anchors`, read back
    from a file) was taken: its record is gone, or another stands at its offset.  A cursor with
    no anchor (a file from before anchors, or adopted ahead of this log) is trusted, and one
    whose record retention trimmed was not cut (a cut never goes below the log's start)."""
    anchored = anchored if isinstance(anchored, dict) else {}
    cut = []
    for topic, cursor in cursors.items():
        anchor = anchored.get(topic)
        if not isinstance(anchor, dict) or cursor <= 0:
            continue
        if anchor.get("offset") != cursor - 1:
            cut.append(topic)   # not this cursor's anchor: nothing vouches for it
            continue
        if store.get(topic, 0, cursor - 1, 1).status is GetStatus.OFFSET_TOO_SMALL:
            continue
        record = _record_at(store, topic, cursor - 1)
        if record is None or (record.commit_offset, zlib.crc32(record.body)) != (anchor.get("commitOffset"),
                                                                                 anchor.get("crc")):
            cut.append(topic)
    return cut


def _record_at(store, topic: str, offset: int) -> StoredMessage | None:
    messages = store.get(topic, 0, offset, 1).messages
    return messages[0] if messages and messages[0].queue_offset == offset else None
