"""Config files (config_files): writes of one file land in the order their documents were
taken, so a periodic snapshot written late by a worker thread never overwrites a newer
document; and each file is written in the dialect its readers need."""
from __future__ import annotations

import json
import threading

from hypothesis import given, settings, strategies as st

from scheduler.pop.records import InFlight, QueueKey
from scheduler.pop.table import PopTable
from services.broker.config_files import read_document, snapshot_document, write_document


def test_a_snapshot_written_after_a_newer_document_is_skipped(tmp_path):
    path = tmp_path / "consumerOffset.json"
    late = snapshot_document(path, {"offset": 1})
    write_document(path, {"offset": 2})
    late()
    assert read_document(path, lambda d: d) == {"offset": 2}


def test_a_snapshot_written_before_a_newer_one_is_replaced_by_it(tmp_path):
    path = tmp_path / "popState.json"
    first, second = snapshot_document(path, {"n": 1}), snapshot_document(path, {"n": 2})
    first()
    assert read_document(path, lambda d: d) == {"n": 1}
    second()
    assert read_document(path, lambda d: d) == {"n": 2}


@settings(max_examples=30, deadline=None)
@given(st.permutations(range(6)))
def test_whatever_order_the_threads_run_in_the_file_holds_the_newest_document(tmp_path_factory, order):
    path = tmp_path_factory.mktemp("order") / "timerCheckpoint.json"
    writes = [snapshot_document(path, {"n": n}) for n in range(6)]
    threads = [threading.Thread(target=writes[i]) for i in order]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert read_document(path, lambda d: d) == {"n": 5}


def test_rocketmq_files_keep_its_dialect_and_our_state_files_are_strict_json(tmp_path):
    """topics.json and the others Apache RocketMQ reads stay in fastjson's dialect (tabs, bare
    integer keys); popState.json and the other files only RelayMQ has are compact JSON that any
    parser reads (orjson: the dialect's Python printer stalled the loop for seconds on a large
    pop table).  Both read back the same document."""
    document = {"offsetTable": {"T@g": {0: 5, 1: 7}}}
    write_document(tmp_path / "consumerOffset.json", document)
    dialect = (tmp_path / "consumerOffset.json").read_text()
    assert "\t" in dialect and "0:5" in dialect
    write_document(tmp_path / "popState.json", document)
    strict = (tmp_path / "popState.json").read_text()
    assert json.loads(strict) == {"offsetTable": {"T@g": {"0": 5, "1": 7}}}
    for name in ("consumerOffset.json", "popState.json"):
        assert read_document(tmp_path / name, lambda d: d) == {"offsetTable": {"T@g": {"0": 5, "1": 7}}}


def test_a_pop_table_round_trips_through_its_state_file(tmp_path):
    table = PopTable()
    state = table.ensure(QueueKey("g", "T", 1), 10)
    state.inflight[10] = InFlight(10, 3, 2, 1_800_000_000_000, 16, 4096, True, "order-7")
    state.inflight[11] = InFlight(11, 4, 1, 1_800_000_000_500, 16, 5120)
    state.pop_offset = 12
    path = tmp_path / "popState.json"
    write_document(path, table.to_document())
    again = read_document(path, PopTable.from_document)
    assert again.to_document() == table.to_document()
    assert again.get(QueueKey("g", "T", 1)).inflight[10] == state.inflight[10]
