"""Anchors of a state file's cursors (services.broker.system_log): a file written before a cut
is known stale, one written after is trusted, and whatever a file says is read without a
traceback (it is read back from disk)."""
from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.message import MessageDraft
from services.broker.system_log import anchors, cut_below
from tests.support.fake_store import FakeStore


def _store_with(*bodies: bytes) -> FakeStore:
    store = FakeStore()
    asyncio.run(store.put([MessageDraft("LOG", 0, body, 0) for body in bodies]))
    return store


def test_anchors_hold_while_the_log_keeps_its_records_and_tell_the_cursors_a_cut_went_below():
    store = _store_with(b"a", b"b", b"c")
    written = anchors(store, {"LOG": 2, "EMPTY": 0})
    assert set(written) == {"LOG"} and written["LOG"]["offset"] == 1
    assert cut_below(store, {"LOG": 2}, written) == []
    asyncio.run(store.put([MessageDraft("LOG", 0, b"d", 0)]))       # appends above do not matter
    assert cut_below(store, {"LOG": 2}, written) == []

    other = _store_with(b"a", b"B", b"c")                            # another record at offset 1
    assert cut_below(other, {"LOG": 2}, written) == ["LOG"]
    short = _store_with(b"a")                                        # cut below the cursor
    assert cut_below(short, {"LOG": 2}, written) == ["LOG"]
    assert cut_below(store, {"LOG": 3}, written) == ["LOG"]          # the anchor is not this cursor's


def test_no_anchor_is_trusted_as_before():
    store = _store_with(b"a")
    assert cut_below(store, {"LOG": 5}, None) == []                  # a file from before anchors
    assert cut_below(store, {"LOG": 5}, anchors(store, {"LOG": 5})) == []   # adopted ahead of this log


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=12),
       st.integers(min_value=0, max_value=6))
def test_whatever_a_file_says_its_anchors_are_read_without_an_error(anchored, cursor):
    store = _store_with(b"a", b"b", b"c")
    assert set(cut_below(store, {"LOG": cursor}, anchored)) <= {"LOG"}
    assert set(cut_below(store, {"LOG": cursor}, {"LOG": anchored})) <= {"LOG"}
