"""What waking another thread costs the waker on this machine (issue 27: hand-offs per message).

A SYNC_FLUSH put hands its fdatasync to the store's flush thread (store.flush) and gets the
result back through the event loop (``call_soon_threadsafe``); gRPC's poller thread wakes the
loop the same way.  On a VM, waking a thread that sleeps can cost the waker far more than
the Python around it.  This prints, per call, the waker's wall time of:

- ``event.set(), nobody waiting``: the reference, a ``threading.Event`` already set (the flag test
  and the condition's Python, no wake);
- ``event.set(), a thread waiting``: the same call when a thread sleeps in ``wait()`` (a futex
  wake of another thread);
- ``call_soon_threadsafe, loop idle``: an event loop's (uvloop's) thread-safe call while the
  loop sleeps in its poll (a write to its wake-up descriptor);

each the median of ``--rounds`` rounds of ``--count`` calls, with a short sleep before each
call so that the other thread is asleep again.

    .venv/bin/python bench/bench_thread_wake.py --count 3000 --rounds 3

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import threading
import time

import uvloop

PAUSE_S = 0.0002  # before each call: the woken thread is waiting again


def _event_set(count: int, waiting: bool) -> float:
    event, stop = threading.Event(), threading.Event()
    if not waiting:
        event.set()

    def waiter() -> None:
        while not stop.is_set():
            event.wait(1.0)
            event.clear()

    thread = threading.Thread(target=waiter, daemon=True)
    if waiting:
        thread.start()
    total = 0
    for _ in range(count):
        time.sleep(PAUSE_S)
        began = time.perf_counter_ns()
        event.set()
        total += time.perf_counter_ns() - began
    stop.set()
    event.set()
    if waiting:
        thread.join()
    return total / count / 1000


def _call_soon_threadsafe(count: int) -> float:
    loop = uvloop.new_event_loop()
    ready = threading.Event()
    thread = threading.Thread(target=lambda: (loop.call_soon(ready.set), loop.run_forever()), daemon=True)
    thread.start()
    ready.wait()
    total = 0
    for _ in range(count):
        time.sleep(PAUSE_S)
        began = time.perf_counter_ns()
        loop.call_soon_threadsafe(int)
        total += time.perf_counter_ns() - began
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()
    return total / count / 1000


CASES = {
    "event.set(), nobody waiting": lambda count: _event_set(count, waiting=False),
    "event.set(), a thread waiting": lambda count: _event_set(count, waiting=True),
    "call_soon_threadsafe, loop idle": _call_soon_threadsafe,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=3000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.count < 1 or args.rounds < 1:
        parser.error("--count and --rounds must be positive")
    figures: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.rounds):  # interleaved: a drift of the machine hits every case alike
        for name, case in CASES.items():
            figures[name].append(case(args.count))
    print(f"# bench_thread_wake: {' '.join(sys.argv)}; {platform.machine()}, python {platform.python_version()}; "
          f"the waker's wall time per call, us, {args.count} calls x {args.rounds} rounds")
    print(f"{'case':<34}{'median':>8}{'min':>8}{'max':>8}")
    for name, values in figures.items():
        print(f"{name:<34}{statistics.median(values):>8.1f}{min(values):>8.1f}{max(values):>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
