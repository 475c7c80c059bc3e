"""bench_broker's cases on the deployment users run (issue 27): conf/controller-mode as shipped.

Two containers, two replicas of each group, SYNC_FLUSH and allAckInSyncStateSet on every
broker (bench/deployment.py starts the shipped files, on their shipped ports), so a send is
answered once both of broker-a's replicas have fdatasynced it. The same client as
bench/bench_broker.py (1 KiB messages, requests spliced from one template, the official
clients' metadata) runs, on broker-a, against:

- ``direct``: 127.0.0.1:8091, broker-a's master's own endpoint (where it serves);
- ``relayed``: 127.0.0.1:8092, broker-a's slave's endpoint: every call is passed on to the
  master, bytes unchanged (services/messaging/broker_port.py), as a client that reached the
  replica sees it;

the cases: single sends with 16 in flight (what the official clients do), batches of 32 with
16 in flight, and receive (batch 32) + ack of ``--e2e-count`` messages sent first; and, in
the same round, the bare grpc.aio echo (bench_broker's). Server CPU is both containers'
(user + system, /proc) per 1000 messages: a relay costs the replica's container and the
master's. Printed: msg/s, the ratio to the echo, relayed/direct (issue 27: a relayed call
costs at most 1.3x a direct one) and the replicated batch figure against NATS JetStream R3
measured on this machine in the same way (16.0k msg/s; issue 27's goal is twice that).
Each round uses fresh topics; ``--rounds`` repeats (echo, direct, relayed) and prints medians,
ratios within their round (this VM's speed moves 2x between minutes).

    .venv/bin/python bench/bench_replicated_sends.py --seconds 3 --rounds 3
    .venv/bin/python bench/bench_replicated_sends.py --json > replicated.json

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from bench.bench_broker import bench_echo, closed_loop, end_to_end, send_call, senders  # noqa: E402
from bench.bench_replicated_consume import wait_in_sync  # noqa: E402
from bench.deployment import Deployment  # noqa: E402
from proto import messaging_service_pb2_grpc as g  # noqa: E402

TARGETS = {"direct": "127.0.0.1:8091", "relayed": "127.0.0.1:8092"}  # broker-a's master's and slave's endpoints
CASES = ("send c=16", "batch32 c=16", "receive+ack")
NATS_R3_BATCH = 16_000  # msg/s, NATS JetStream R3, batches, measured on this machine (issue 27)


async def cases(endpoint: str, topic: str, seconds: float, e2e_count: int, consumers: int, pids: tuple) -> dict:
    results = {}
    async with grpc.aio.insecure_channel(endpoint, options=[("grpc.max_receive_message_length", -1)]) as channel:
        send, send_one, send_batch = send_call(channel), senders(channel, topic, 1), senders(channel, topic, 32)

        await closed_loop(send_one, 16, min(0.5, seconds))  # warm: the connection, the relay's channel
        results["send c=16"] = await closed_loop(send_one, 16, seconds, pid=pids)
        results["batch32 c=16"] = await closed_loop(send_batch, 16, seconds, per_request=32, pid=pids)
        e2e = await end_to_end(g.MessagingServiceStub(channel), send, endpoint, topic, e2e_count, consumers, pids)
        results["receive+ack"] = {"msg_s": e2e["receive_ack_msg_s"], "cpu_ms_1k": e2e["receive_ack_cpu_ms_1k"]}
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each send case")
    parser.add_argument("--e2e-count", type=int, default=4000, help="messages sent, then received and acked")
    parser.add_argument("--consumers", type=int, default=4, help="receive-and-ack loops in flight")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON document last (stable keys)")
    args = parser.parse_args()
    if args.rounds < 1 or args.seconds <= 0 or args.e2e_count < 1 or args.consumers < 1:
        parser.error("--rounds, --seconds, --e2e-count and --consumers must be positive")
    progress = sys.stderr if args.json else sys.stdout
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-replicated-") as work:
        deployment = Deployment("controller-mode", Path(work)).start()
        try:
            pids = tuple(process.pid for process in deployment.containers)
            for number in range(1, args.rounds + 1):  # interleaved: a drift of the machine hits all alike
                figures = {"echo": asyncio.run(bench_echo(args.seconds, args.consumers))}
                for target, endpoint in TARGETS.items():
                    topic = f"bench-r{number}-{target}"
                    deployment.admin_retrying("update-topic", "-t", topic, "--queues", "8", "-b", "broker-a")
                    wait_in_sync(deployment)
                    figures[target] = asyncio.run(cases(endpoint, topic, args.seconds, args.e2e_count,
                                                        args.consumers, pids))
                rounds.append(figures)
                print(f"round {number}/{args.rounds}: " + "; ".join(
                    f"{target} " + ", ".join(f"{case} {figures[target][case]['msg_s']:.0f}" for case in CASES)
                    for target in ("echo", *TARGETS)), file=progress, flush=True)
        finally:
            deployment.stop()
    table = summarize(rounds)
    if args.json:
        print(json.dumps({"args": vars(args), "medians": table, "rounds": rounds}, sort_keys=True))
    else:
        report(table, args)
    return 0


def summarize(rounds: list[dict]) -> dict:
    """target -> case -> medians of msg/s, CPU per 1000 and, per round, the ratios to the echo
    and (relayed) to direct."""
    table: dict = {}
    for target in ("echo", *TARGETS):
        for case in CASES:
            row = {"msg_s": statistics.median(r[target][case]["msg_s"] for r in rounds),
                   "cpu_ms_1k": statistics.median(r[target][case]["cpu_ms_1k"] for r in rounds)}
            if target != "echo":
                row["vs_echo"] = statistics.median(r[target][case]["msg_s"] / r["echo"][case]["msg_s"] for r in rounds)
            if target == "relayed":
                row["relayed_cpu_x"] = statistics.median(r["relayed"][case]["cpu_ms_1k"] / r["direct"][case]["cpu_ms_1k"]
                                                         for r in rounds)
                row["relayed_msg_s_x"] = statistics.median(r["relayed"][case]["msg_s"] / r["direct"][case]["msg_s"]
                                                           for r in rounds)
            table.setdefault(target, {})[case] = row
    return table


def report(table: dict, args) -> None:
    print(f"\n# bench_replicated_sends: {' '.join(sys.argv)}; conf/controller-mode as shipped (SYNC_FLUSH, "
          f"allAckInSyncStateSet, 2 replicas), broker-a; {args.seconds} s per send case, {args.e2e_count} received, "
          f"{args.rounds} round(s), medians; cpu: both containers' (echo: the echo server's) per 1000 messages")
    print(f"{'case':<14}{'target':<9}{'msg/s':>9}{'vs echo':>9}{'cpu ms/1k':>11}{'relayed/direct cpu':>20}")
    for case in CASES:
        for target in ("echo", *TARGETS):
            row = table[target][case]
            vs = f"{row['vs_echo']:.2f}" if "vs_echo" in row else "-"
            relay = f"{row['relayed_cpu_x']:.2f}x" if "relayed_cpu_x" in row else ""
            print(f"{case:<14}{target:<9}{row['msg_s']:>9.0f}{vs:>9}{row['cpu_ms_1k']:>11.0f}{relay:>20}")
    batch = table["direct"]["batch32 c=16"]["msg_s"]
    print(f"replicated batches of 32 (direct): {batch:.0f} msg/s = {batch / NATS_R3_BATCH:.2f}x NATS JetStream R3's "
          f"{NATS_R3_BATCH} msg/s on this machine (issue 27's goal: 2x)")


if __name__ == "__main__":
    sys.exit(main())
