"""A put's messages as rows: encoded into commit-log records, and what each write gives back.

Why rows: the send path of a batch made per message a draft for its queue, the store a
``StoredMessage`` per record and the broker an outcome per message, to read three numbers of
each back (``bench/send_path.py --batch 32`` under py-spy: those objects were about a tenth
of a batched message's Python).  A :data:`Row` is one message for one queue, a
plain tuple made in C, with its record's tail (everything after the header) already encoded:
the send path encodes it from the message's fields, never making a draft or a properties dict
(``record.encode_item_tail``).  :meth:`store.message_store.MessageStore.put_rows` writes rows
and answers one :data:`Placed` tuple per row.  ``put`` (drafts in, stored messages out) is
built on the same rows, so there is one write path.

Rules: rows of one put are encoded in order; a queue's offsets follow on from the store's
next offset of that queue, consecutively; nothing is assigned if any row is refused
(too large, or a text that does not encode).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from metadata.message import MessageDraft, Prop
from store import record
from store.errors import MessageTooLarge

# (topic, queue id, born timestamp ms, tail, tag or None): the tail as record.encode_tail makes it
Row = tuple[str, int, int, bytes, "str | None"]
# (commit offset, size on disk, queue offset): where a row's record went
Placed = tuple[int, int, int]
# (tail, queue id, queue offset, born timestamp ms): a record for CommitLog.append
Record = tuple[bytes, int, int, int]


def row_of(draft: MessageDraft) -> Row:
    try:
        tail = record.encode_tail(draft)
    except ValueError as failure:
        raise MessageTooLarge(f"message to {draft.topic}: {failure}") from None
    return draft.topic, draft.queue_id, draft.born_timestamp_ms, tail, draft.properties.get(Prop.TAG)


def encode_rows(rows: Sequence[Row], limit: int,
                next_queue_offset: Mapping[tuple[str, int], int]) -> tuple[list[Record], dict[tuple[str, int], int]]:
    """The rows' records, and each touched queue's next offset after them (to apply once the
    records are written).  ``limit``: the largest tail allowed (MessageTooLarge beyond it)."""
    offsets: dict[tuple[str, int], int] = {}
    records: list[Record] = []
    for topic, queue_id, born_ms, tail, _ in rows:
        if len(tail) > limit:
            raise MessageTooLarge(f"message to {topic} is {record.HEADER_SIZE + len(tail)} bytes "
                                  f"encoded, more than {limit + record.HEADER_SIZE} (maxMessageSize / segment size)")
        key = (topic, queue_id)
        queue_offset = offsets.get(key)
        if queue_offset is None:
            queue_offset = next_queue_offset.get(key, 0)
        offsets[key] = queue_offset + 1
        records.append((tail, queue_id, queue_offset, born_ms))
    return records, offsets
