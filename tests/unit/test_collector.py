"""The container's garbage-collector settings (container.collector)."""
from __future__ import annotations

import gc

from container.collector import GEN0_THRESHOLD, freeze_startup_heap, tune_collector


def test_tune_raises_generation_0_only_and_freeze_moves_survivors_out_of_reach():
    before = gc.get_threshold()
    try:
        assert tune_collector() == (GEN0_THRESHOLD, before[1], before[2])
        survivor = [object()]
        assert freeze_startup_heap() >= 1 and gc.get_freeze_count() >= 1
        assert survivor
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
