"""What a broker's transaction check scan costs the event loop, by the number of half messages pending.

Every ``transactionScanInterval`` (1 s) the transaction check service asks its table which
halves are due for a check (``TransactionTable.decide_checks``) on the event loop.  This
prints, for tables of growing size, the thread's CPU of one scan when none is due and when
256 are (``timerBatchMax``, the most one scan takes), best of ``--rounds``.  The script uses
only calls every version of the table has, so a worktree of an older commit gives the before
figures.

    .venv/bin/python bench/bench_transaction_checks.py
    .venv/bin/python bench/bench_transaction_checks.py --pending 1000 100000 1000000

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.transaction_check import TransactionTable  # noqa: E402

TIMEOUT_MS = 6_000


def _table(pending: int) -> TransactionTable:
    table = TransactionTable()
    for offset in range(pending):  # stored 1 ms apart: due 1 ms apart from TIMEOUT_MS on
        table.add_half(offset, "bench-topic", f"tx-{offset}", store_ms=offset, timeout_ms=TIMEOUT_MS)
    return table


def _best_us(action, rounds: int) -> float:
    spent = []
    for _ in range(rounds):
        began = time.thread_time()
        action()
        spent.append(time.thread_time() - began)
    return min(spent) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.rounds < 1 or min(args.pending) < 256:
        parser.error("--rounds must be positive and every --pending at least 256")
    print(f"# bench_transaction_checks: {' '.join(sys.argv)}; python {sys.version.split()[0]}")
    print(f"{'pending':>10} {'scan, none due':>16} {'scan, 256 due':>15}  (us of the thread's CPU)")
    for pending in args.pending:
        table = _table(pending)
        none_due = _best_us(lambda: table.decide_checks(TIMEOUT_MS - 1, 15, 256), args.rounds)
        some_due = _best_us(lambda: table.decide_checks(TIMEOUT_MS + 255, 15, 256), args.rounds)
        print(f"{pending:>10,} {none_due:>16.1f} {some_due:>15.1f}", flush=True)


if __name__ == "__main__":
    main()
