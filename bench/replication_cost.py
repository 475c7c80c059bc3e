"""What replication costs the master, measured in the same minutes (issue 27).

This VM's speed moves up to 2x between minutes, so a replicated figure taken now and a
standalone one taken later say little about what replication adds.  This runs, at once:

- ``standalone``: one container with broker-a alone, SYNC_FLUSH (bench_broker's);
- ``conf/controller-mode`` as shipped (bench/deployment.py: SYNC_FLUSH, allAckInSyncStateSet,
  two replicas), driven at broker-a's master (127.0.0.1:8091);

and drives them in turn with bench_broker's client (1 KiB messages, ``--per-request`` per
SendMessage, 16 in flight): standalone, replicated, standalone, replicated...  Then it kills
the slave's container (SIGKILL), waits until the master's set is itself alone and sends succeed,
and alternates standalone with ``master alone``: the same container, config and topic,
without the slave.  Printed per case and round: msg/s, the container's CPU per message (user
+ system, /proc) and its event loop's (the MainThread's; the busiest thread).  The difference
between ``replicated`` and ``master alone`` is what replication costs the master; the slave's
own container is printed too (while it lives).

    .venv/bin/python bench/replication_cost.py                      # single sends
    .venv/bin/python bench/replication_cost.py --per-request 32     # batches of 32

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

import bench.bench_broker as bb  # noqa: E402
from bench.bench_replicated_consume import wait_in_sync  # noqa: E402
from bench.deployment import Deployment  # noqa: E402
from bench.thread_split import threads  # noqa: E402

MASTER = "127.0.0.1:8091"   # broker-a's master's endpoint in conf/controller-mode (container-1 at first start)
TOPIC = "replication-cost"


def drive(endpoint: str, pids: dict[str, int], per_request: int, seconds: float) -> dict:
    """One closed loop against ``endpoint``: msg/s and, per process, CPU and loop us a message."""
    before = {label: threads(pid) for label, pid in pids.items()}

    async def run():
        async with grpc.aio.insecure_channel(endpoint) as channel:
            send = bb.senders(channel, TOPIC, per_request)
            await bb.closed_loop(send, 16, min(0.5, seconds))
            return await bb.closed_loop(send, 16, seconds, per_request=per_request)

    result = asyncio.run(run())
    messages = result["msg_s"] * (seconds + min(0.5, seconds))   # the warm-up's CPU is counted: at the same rate
    after = {label: threads(pid) for label, pid in pids.items()}
    out = {"msg_s": result["msg_s"]}
    for label in pids:
        spent = {key: after[label][key] - before[label].get(key, 0.0) for key in after[label]}
        out[label] = (1e6 * sum(spent.values()) / messages, 1e6 * max(spent.values(), default=0.0) / messages)
    return out


def until_alone(pid: int, per_request: int, limit_s: float = 60.0) -> None:
    """Sends to the master fail while its SyncStateSet still names the dead slave; wait."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            drive(MASTER, {"master": pid}, per_request, 0.3)
            return
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def report(name: str, rows: list[dict], label: str) -> None:
    cells = " | ".join(f"{r['msg_s']:.0f} msg/s, {r[label][0]:.1f} us ({r[label][1]:.1f} loop)" for r in rows)
    median = statistics.median(r[label][1] for r in rows)
    print(f"{name:<19} {cells}   median loop {median:.1f} us")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-request", type=int, default=1, help="messages per SendMessage")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each closed loop")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of each pair")
    args = parser.parse_args()
    if args.per_request < 1 or args.seconds <= 0 or args.rounds < 1:
        parser.error("--per-request, --seconds and --rounds must be positive")
    print(f"# replication_cost: {' '.join(sys.argv)}; {args.per_request} message(s) of 1 KiB per send, 16 in "
          f"flight, {args.seconds} s per loop, {args.rounds} alternations; us per message: the container's "
          f"CPU (its event loop's)")
    with tempfile.TemporaryDirectory(prefix="replication-cost-") as work:
        standalone, endpoint = bb.start_container(TOPIC, "SYNC_FLUSH", Path(work) / "standalone")
        deployment = Deployment("controller-mode", Path(work) / "deployment")
        try:
            deployment.start()
            deployment.admin_retrying("update-topic", "-t", TOPIC, "--queues", "8", "-b", "broker-a")
            wait_in_sync(deployment)
            master, slave = (p.pid for p in deployment.containers)
            own = {"c": standalone.process.pid}
            rows: dict[str, list[dict]] = {"standalone": [], "replicated": [], "standalone, later": [], "master alone": []}
            for _ in range(args.rounds):
                rows["standalone"].append(drive(endpoint, own, args.per_request, args.seconds))
                rows["replicated"].append(drive(MASTER, {"c": master, "slave": slave}, args.per_request, args.seconds))
            os.kill(slave, signal.SIGKILL)
            until_alone(master, args.per_request)
            for _ in range(args.rounds):
                rows["standalone, later"].append(drive(endpoint, own, args.per_request, args.seconds))
                rows["master alone"].append(drive(MASTER, {"c": master}, args.per_request, args.seconds))
            for name, found in rows.items():
                report(name, found, "c")
            report("(the slave's)", rows["replicated"], "slave")
            cost = (statistics.median(r["c"][1] for r in rows["replicated"])
                    - statistics.median(r["c"][1] for r in rows["master alone"]))
            print(f"replication costs the master's event loop {cost:.1f} us a message (medians: replicated - alone)")
        finally:
            deployment.stop()
            standalone.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
