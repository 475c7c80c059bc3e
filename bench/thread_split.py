"""Each container's CPU per message, thread by thread, under one of bench_broker's send cases (issue 27).

Runs ``conf/controller-mode`` as shipped (bench/deployment.py) or, with ``--standalone``, one
container as bench_broker starts it (``--flush``), drives broker-a's master endpoint with
bench_broker's client (1 KiB messages, ``--per-request`` messages per SendMessage, 16 in flight)
and prints, per round, each process's CPU per message (user + system, /proc) split by thread,
busiest first, with the thread's name as the process gave it (Python threads: the name Python
gave them; gRPC's C threads: ``event_engine``). Read it to see which thread bounds a case: on
two cores a thread near one core per second is the bottleneck, and work moved off it counts.

    .venv/bin/python bench/thread_split.py --per-request 32
    .venv/bin/python bench/thread_split.py --standalone --flush SYNC_FLUSH --per-request 32

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

import bench.bench_broker as bb  # noqa: E402
from bench.bench_replicated_consume import wait_in_sync  # noqa: E402
from bench.deployment import Deployment  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _python_names(pid: int) -> dict[str, str]:
    """Thread id -> Python's name for it, from py-spy if it is installed (else empty)."""
    import shutil
    import subprocess
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        return {}
    out = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30).stdout
    names = {}
    for line in out.splitlines():
        if line.startswith("Thread ") and '"' in line:
            names[line.split()[1]] = line.split('"')[1]
    return names


def threads(pid: int) -> dict[tuple[str, str], float]:
    """(thread id, kernel name) -> CPU seconds so far."""
    found = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except FileNotFoundError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        found[(tid, name)] = (int(fields[11]) + int(fields[12])) / TICK
    return found


async def _drive(endpoint: str, per_request: int, seconds: float) -> dict:
    async with grpc.aio.insecure_channel(endpoint) as channel:
        send = bb.senders(channel, "split", per_request)
        await bb.closed_loop(send, 16, 0.5)
        return await bb.closed_loop(send, 16, seconds, per_request=per_request)


def measure(endpoint: str, pids: dict[str, int], args) -> None:
    names = {label: _python_names(pid) for label, pid in pids.items()}
    for number in range(1, args.rounds + 1):
        before = {label: threads(pid) for label, pid in pids.items()}
        result = asyncio.run(_drive(endpoint, args.per_request, args.seconds))
        after = {label: threads(pid) for label, pid in pids.items()}
        messages = result["msg_s"] * args.seconds
        print(f"round {number}: {result['msg_s']:.0f} msg/s")
        for label in pids:
            spent = sorted(((after[label][key] - before[label].get(key, 0.0), key) for key in after[label]), reverse=True)
            total = sum(cpu for cpu, _ in spent)
            shown = ", ".join(f"{names[label].get(tid, name)} {1e6 * cpu / messages:.1f}"
                              for cpu, (tid, name) in spent if cpu > 0.01)
            print(f"  {label}: {1e6 * total / messages:.1f} us/msg: {shown}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-request", type=int, default=32, help="messages per SendMessage")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--standalone", action="store_true", help="one container (bench_broker's), not controller-mode")
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="SYNC_FLUSH", help="with --standalone")
    args = parser.parse_args()
    if args.per_request < 1 or args.seconds <= 0 or args.rounds < 1:
        parser.error("--per-request, --seconds and --rounds must be positive")
    what = f"one container, {args.flush}" if args.standalone else "conf/controller-mode as shipped, broker-a's master"
    print(f"# thread_split: {' '.join(sys.argv)}; {what}; {args.per_request} message(s) of 1 KiB per send, "
          f"16 in flight, {args.seconds} s x {args.rounds} rounds; CPU per message by thread")
    with tempfile.TemporaryDirectory(prefix="thread-split-") as work:
        if args.standalone:
            container, endpoint = bb.start_container("split", args.flush, Path(work))
            try:
                measure(endpoint, {"container": container.process.pid}, args)
            finally:
                container.stop()
            return 0
        deployment = Deployment("controller-mode", Path(work)).start()
        try:
            deployment.admin_retrying("update-topic", "-t", "split", "--queues", "8", "-b", "broker-a")
            wait_in_sync(deployment)
            pids = {f"container-{n} (pid {p.pid})": p.pid for n, p in enumerate(deployment.containers, 1)}
            measure("127.0.0.1:8091", pids, args)
        finally:
            deployment.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
