"""``ReplicasInfo.copy()`` is an O(1) overlay: the scratch sees its own changes, the base none."""
from __future__ import annotations

from ha.controller.overlay import Overlay


def test_reads_writes_and_deletions_stay_in_the_overlay():
    base = {"a": 1, "b": 2}
    scratch = Overlay(base)
    scratch["c"] = 3
    scratch["a"] = 10
    del scratch["b"]
    assert dict(scratch) == {"a": 10, "c": 3} and len(scratch) == 2
    assert "b" not in scratch and scratch.get("b") is None and scratch.pop("c") == 3
    assert base == {"a": 1, "b": 2}
    scratch["b"] = 20  # re-added after a deletion
    assert dict(scratch) == {"a": 10, "b": 20} and len(scratch) == 2


def test_pop_with_a_default_of_a_base_key_really_hides_it():
    scratch = Overlay({"a": 1})
    assert scratch.pop("a", None) == 1 and scratch.pop("a", None) is None
    assert "a" not in scratch and len(scratch) == 0 and list(scratch) == []


def test_an_overlay_over_an_overlay():
    inner = Overlay({"a": 1})
    inner["b"] = 2
    outer = Overlay(inner)
    del outer["a"]
    assert dict(outer) == {"b": 2} and dict(inner) == {"a": 1, "b": 2}
