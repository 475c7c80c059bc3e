"""Run test files many times in a row while other processes keep cores busy: a flaky failover
test shows here, not in CI (issue 24: pre-online, controller-mode failover and acting master
must pass 20 runs in a row with one core busy).

Each run is one ``pytest`` of each file, in order; the first failure stops the whole thing
(its output is kept) unless ``--keep-going``.  ``--busy N`` starts N processes that spin on a
core each for the whole time (the contention the issue names: other processes on the same
two cores).  Printed: one line per run and file (pass/fail, seconds), then per file the
passes, failures and min/median/max seconds.

Usage: .venv/bin/python bench/repeat_tests.py --runs 20 --busy 1 \\
           tests/integration/test_pre_online.py tests/integration/test_failover_controller_mode.py \\
           tests/integration/test_acting_master.py
"""
from __future__ import annotations

import argparse
import multiprocessing
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _spin() -> None:
    while True:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=20, choices=range(1, 1001), metavar="N")
    parser.add_argument("--busy", type=int, default=1, choices=range(0, 9), metavar="N",
                        help="processes spinning on a core each (default 1)")
    parser.add_argument("--keep-going", action="store_true", help="do not stop at the first failure")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/repeat_tests"))
    args = parser.parse_args()
    for path in args.files:
        if not (ROOT / path).is_file() and not path.is_file():
            parser.error(f"{path}: no such test file")
    args.log_dir.mkdir(parents=True, exist_ok=True)
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for spinner in spinners:
        spinner.start()
    print(f"# {datetime.now().isoformat(timespec='seconds')} runs={args.runs} busy={args.busy} "
          f"cpus={multiprocessing.cpu_count()} files={[str(f) for f in args.files]}", flush=True)
    times: dict[Path, list[float]] = {f: [] for f in args.files}
    failures: dict[Path, int] = {f: 0 for f in args.files}
    stop = False
    try:
        for run in range(1, args.runs + 1):
            for path in args.files:
                log = args.log_dir / f"{path.stem}.run{run}.log"
                started = time.monotonic()
                with log.open("w") as out:
                    code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
                                           cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
                took = time.monotonic() - started
                times[path].append(took)
                verdict = "pass" if code == 0 else f"FAIL (exit {code}, output in {log})"
                print(f"run {run:3d}  {path.name:45s} {took:7.1f} s  {verdict}", flush=True)
                if code == 0:
                    log.unlink()
                else:
                    failures[path] += 1
                    stop = not args.keep_going
                if stop:
                    break
            if stop:
                break
    finally:
        for spinner in spinners:
            spinner.terminate()
    print("\nfile                                          passed  failed   min s  median s   max s")
    for path in args.files:
        took = times[path]
        if took:
            print(f"{path.name:45s} {len(took) - failures[path]:6d}  {failures[path]:6d} {min(took):7.1f} "
                  f"{statistics.median(took):9.1f} {max(took):7.1f}")
    return 1 if any(failures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
