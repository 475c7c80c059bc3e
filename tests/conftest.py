"""Test ordering by layer of determinism: the fast layers run first (STYLE.md)."""
from __future__ import annotations

import gc
from pathlib import Path

import pytest

LAYER_ORDER = ("unit", "scenario", "simulation", "spark", "integration", "conformance")


def _layer(item) -> int:
    parts = Path(str(item.fspath)).parts
    for index, layer in enumerate(LAYER_ORDER):
        if layer in parts:
            return index
    return len(LAYER_ORDER)


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=_layer)  # stable: keeps file order within a layer


@pytest.fixture(autouse=True, scope="session")
def _stop_watching_collections():
    """Controllers started in this process log slow collections; the ones at the interpreter's
    exit are not ours to report."""
    yield
    from services.controller import heap

    while heap._on_collection in gc.callbacks:
        gc.callbacks.remove(heap._on_collection)


@pytest.fixture(autouse=True)
def _stop_load_clients():
    """Official-client processes a test started and did not stop (it failed midway) end with it:
    left running, they loaded every later test of the session."""
    yield
    import sys

    failover_load = sys.modules.get("tests.support.failover_load")
    if failover_load is not None:
        failover_load.Client.stop_all()
