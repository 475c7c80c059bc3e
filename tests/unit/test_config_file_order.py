"""Writes of one config file land in the order their documents were taken (config_files): a
periodic snapshot written late by a worker thread never overwrites a newer document."""
from __future__ import annotations

import threading

from hypothesis import given, settings, strategies as st

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
