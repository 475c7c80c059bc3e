"""popState.json made in the snapshot's worker thread (services.broker.pop_state_file) is the text the
loop made before, byte for byte, of the table as it was when captured, whatever the table did since."""
from pathlib import Path

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.pop import table as table_module
from scheduler.pop.records import AckRecord, InFlight, PopRecord, QueueKey, ResetRecord
from scheduler.pop.table import PopTable
from services.broker.config_files import Deferred, document_text, snapshot_document
from services.broker.pop_state_file import deferred_document

FIELDS = {"reviveOffset": 42, "dataVersion": {"counter": 3, "stateVersion": 0, "timestamp": 7}, "anchors": {}}


def _table(queues: int, per_queue: int, acked_every: int) -> PopTable:
    table = PopTable()
    for queue in range(queues):
        key = QueueKey("G", "T", queue)
        entries = tuple(InFlight(o, 1_000 + o, 1, 5_000 + o, 16, o, bool(o % 2), "g" if o % 3 else "")
                        for o in range(0, per_queue, 2))
        table.apply(PopRecord(key, 0, per_queue, entries))
        for offset in range(0, per_queue, 2 * acked_every):
            table.apply(AckRecord(key, offset))
    if queues:
        table.apply(ResetRecord(QueueKey("G", "T", queues), 5, 9_999))
    return table


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 4), st.integers(0, 60), st.integers(1, 5), st.integers(1, 7))
def test_the_deferred_text_is_the_loops_text_of_the_table_when_captured(queues, per_queue, acked_every, row_slice):
    table = _table(queues, per_queue, acked_every)
    expected = orjson.dumps({**table.to_document(), **FIELDS}, option=orjson.OPT_NON_STR_KEYS).decode()
    original = table_module.ROW_SLICE
    table_module.ROW_SLICE = row_slice
    try:
        deferred = deferred_document(table.capture(), FIELDS)
        for queue in range(queues):           # the table moves on before the text is made
            table.apply(AckRecord(QueueKey("G", "T", queue), 1))
        table.drop_group("G")
        assert document_text(Path("popState.json"), deferred) == expected
    finally:
        table_module.ROW_SLICE = original


def test_a_deferred_document_is_made_in_the_write_and_written_in_the_order_it_was_handed_in(tmp_path):
    path = tmp_path / "popState.json"
    made = []
    older = snapshot_document(path, Deferred(lambda: made.append("older") or {"n": 1}))
    newer = snapshot_document(path, {"n": 2})
    assert made == []                          # nothing made on the caller's thread
    newer()
    older()                                    # taken first, so skipped: the file keeps the newer
    assert orjson.loads(path.read_bytes()) == {"n": 2} and made == []
