"""popState.json as a periodic snapshot writes it: taken on the event loop in copies, made in the
snapshot's worker thread, and not written at all when the state is the one the file holds.

Why: with 160,000 messages in flight the pop table's document and its text held the event loop
128 ms at every snapshot (every ``flushConsumerOffsetInterval``), and an idle broker paid that
every 5 s for a file that did not change (bench/bench_idle_snapshot.py).

Rules:
- The loop copies what the document holds (``PopTable.capture``: C calls, no document) and the
  fields beside the table; the worker thread makes the rows (``document_of``, a slice at a time)
  and the text of each queue's row apart (``orjson.Fragment``), so it lets go of the GIL between
  them and the loop goes on serving.  The text is byte for byte what one ``orjson.dumps`` of the
  whole document writes.
- A state's signature is the table object, its change count (``PopTable.signature``), the log
  cursor and the DataVersion: two equal signatures have the same document.
"""
from __future__ import annotations

import orjson

from scheduler.pop.table import PopCapture, document_of
from services.broker.config_files import Deferred


def deferred_document(capture: PopCapture, fields: dict) -> Deferred:
    """popState.json of ``capture`` and ``fields`` (cursor, DataVersion, anchors), made when written."""
    def make() -> dict:
        rows = [orjson.Fragment(orjson.dumps(row)) for row in document_of(capture)["queues"]]
        return {"lastSeq": capture.last_seq, "queues": rows, **fields}
    return Deferred(make)


def same_state(a: tuple, b: tuple) -> bool:
    """Two state signatures (table, its change count, log cursor, DataVersion) of one table object."""
    return a[0] is b[0] and a[1:] == b[1:]
