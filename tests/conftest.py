"""Test ordering by layer of determinism: the fast layers run first (STYLE.md)."""
from __future__ import annotations

from pathlib import Path

LAYER_ORDER = ("unit", "scenario", "simulation", "spark", "integration", "conformance")


def _layer(item) -> int:
    parts = Path(str(item.fspath)).parts
    for index, layer in enumerate(LAYER_ORDER):
        if layer in parts:
            return index
    return len(LAYER_ORDER)


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=_layer)  # stable: keeps file order within a layer
