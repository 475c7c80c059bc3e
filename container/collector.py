"""Garbage-collector settings for the container process: fewer, cheaper collections.

Why: a broker allocates a few dozen short-lived objects per message (protobuf wrappers,
drafts, records, responses), so with CPython's default generation-0 threshold (700
allocations) a young collection ran every ~20 messages, and whatever was alive at that
moment (a request's values waiting for fdatasync) was promoted, filling the older
generations with garbage that only full collections, which walk the whole heap (gRPC's
objects, topic and pop tables, the send de-duplication LRU), reclaim.  py-spy with native
frames put ``gc_collect_main`` at about 10% of the event-loop thread's samples during a
32-message batch send (bench/bench_broker.py).

Rules: once, in the process that runs the container, before the event loop starts
(:func:`tune_collector`): generation 0 is collected every ``GEN0_THRESHOLD`` allocations
(older generations keep the default ratios); after the container has started
(:func:`freeze_startup_heap`), everything startup allocated (modules, configs, tables) is
moved out of the collector's reach with ``gc.freeze()``: it lives as long as the process.
Reference counting frees almost everything anyway; the collector only finds cycles.
"""
from __future__ import annotations

import gc

GEN0_THRESHOLD = 20_000


def tune_collector() -> tuple[int, int, int]:
    """Raise the generation-0 threshold; returns the thresholds now in force."""
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
    return gc.get_threshold()


def freeze_startup_heap() -> int:
    """Collect once, then freeze the survivors; returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
