"""Keep Python's full garbage collections short while the controller's tables grow.

A full (generation 2) collection walks every tracked object and holds the event loop
meanwhile: 0.14 s at 50k broker sets, 0.9 s at 200k on an idle 2-core machine, 2.5-3.6 s
measured under the saturating bench at 70k, long enough for followers to miss the
leader's heartbeats (and snapshot encoding, which allocates a lot, triggers them).
``collect_and_freeze`` (the driver calls it every ``FREEZE_EVERY_ENTRIES`` applied entries,
after each compaction and after restoring a snapshot) runs a full collection, which only
walks what was allocated since the last call, then moves every survivor out of the
collector's reach with ``gc.freeze()``.  The tables' values are frozen dataclasses that live
until replaced and are freed by reference counting when they are; the cost is that a
reference cycle which was alive at a freeze and dies later is never collected.

``watch_collections`` logs collections slower than ``SLOW_COLLECTION_MS`` (wall clock, for
the log only), so a pause is visible next to the Raft loop's stall warnings.
"""
from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger(__name__)
SLOW_COLLECTION_MS = 100
FREEZE_EVERY_ENTRIES = 5_000
_started: list[float] = []


def collect_and_freeze() -> None:
    gc.collect()
    gc.freeze()


def watch_collections() -> None:
    if _on_collection not in gc.callbacks:
        gc.callbacks.append(_on_collection)


def _on_collection(phase: str, info: dict) -> None:
    if phase == "start":
        _started[:] = [time.perf_counter()]
        return
    if not _started:
        return
    took_ms = (time.perf_counter() - _started.pop()) * 1000
    if took_ms >= SLOW_COLLECTION_MS:
        log.warning("garbage collection of generation %s took %.0f ms (%s objects frozen)", info.get("generation"),
                    took_ms, gc.get_freeze_count())
