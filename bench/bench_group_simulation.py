"""The broker-group simulation over many seeds (the figure: 10,000 seeds of 1,000 steps clean).

``python bench/bench_group_simulation.py --seeds 0-9999 --steps 1000 [--jobs 2] [--json]``
prints how many seeds ran, the failures per invariant with their first seeds, and the time.
A failing seed reproduces with ``BROKER_SIM_SEEDS=N pytest tests/simulation/test_broker_group_simulation.py``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.group_sim.invariants import InvariantViolation  # noqa: E402
from tests.support.group_sim.simulation import run  # noqa: E402


def chunk(bounds: tuple[int, int, int]) -> dict:
    low, high, steps = bounds
    failures: dict[str, list[int]] = {}
    acked = 0
    for seed in range(low, high):
        try:
            acked += len(run(seed, steps).acked)
        except InvariantViolation as violation:
            failures.setdefault(violation.name, []).append(seed)
    return {"failures": failures, "acked": acked}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0-999", help="LOW-HIGH, inclusive")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    low, _, high = args.seeds.partition("-")
    low, high = int(low), int(high or low) + 1
    size = max(1, (high - low) // (args.jobs * 8))
    parts = [(s, min(high, s + size), args.steps) for s in range(low, high, size)]
    started = time.monotonic()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(chunk, parts))
    failures: dict[str, list[int]] = {}
    for result in results:
        for name, seeds in result["failures"].items():
            failures.setdefault(name, []).extend(seeds)
    summary = {"seeds": high - low, "steps": args.steps, "failed_seeds": sum(map(len, failures.values())),
               "failures": {name: sorted(seeds)[:20] for name, seeds in failures.items()},
               "acknowledged": sum(r["acked"] for r in results), "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps(summary) if args.json else
          f"{summary['seeds']} seeds x {args.steps} steps: {summary['failed_seeds']} failed "
          f"{summary['failures']}; {summary['acknowledged']} messages acknowledged; {summary['seconds']} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
