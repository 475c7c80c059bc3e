"""A backlog written at load, then drained: how long the drain takes against the write.

The load of issue 23, on a deployment exactly as shipped (bench/deployment.py runs
``conf/<deployment>``): a FIFO topic and a NORMAL topic, 4 queues per broker; 8 FIFO
message groups and one NORMAL sender, each a thread of the official Python client sending
1 KiB messages synchronously, at most ``--rate`` a second each, for ``--seconds``; then one
SimpleConsumer per consumer group (the FIFO group created with ``--fifo``) drains the
backlog with ``receive(32, 30)``, handling and acking each message in order, until 40 s pass
with nothing new or 200 s in all (tests/support/official_client/backlog.py): ``--ack async``
(default) waits for a batch's acks before the next receive, ``--ack sync`` for each ack
before the next message (then one replicated write's round trip per message bounds it).

Per run it prints the write time (first to last acknowledged send), the drain time (from
the consumers' start to the last message received) and their ratio, what was acknowledged,
lost (acknowledged, never received), duplicated, reordered within a FIFO message group,
and the lag ``relaymq admin consumer-progress`` shows at the end.  ``--one-broker`` makes
broker-a's queues read-only (perm 4) for both topics, so the whole backlog sits on broker-b
while the consumers poll both brokers (an operator draining broker-a for maintenance).
``--kill`` SIGKILLs container-1 halfway through the write and restarts it 5 s later.

    .venv/bin/python bench/bench_backlog.py --deployment controller-mode --runs 10
    .venv/bin/python bench/bench_backlog.py --deployment controller-mode --runs 10 --one-broker

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.deployment import Deployment  # noqa: E402
from tests.support.failover_load import Client  # noqa: E402

BACKLOG = ROOT / "tests" / "support" / "official_client" / "backlog.py"
TOPIC, FIFO_TOPIC, GROUP, FIFO_GROUP = "backlog-normal", "backlog-fifo", "backlog-group", "backlog-fifo-group"


def prepare(deployment: Deployment, one_broker: bool) -> None:
    for topic, kind in ((TOPIC, "NORMAL"), (FIFO_TOPIC, "FIFO")):
        if one_broker:
            deployment.admin_retrying("update-topic", "-t", topic, "--type", kind, "--queues", "4", "-b", "broker-a", "--perm", "4")
            deployment.admin_retrying("update-topic", "-t", topic, "--type", kind, "--queues", "4", "-b", "broker-b")
        else:
            deployment.admin_retrying("update-topic", "-t", topic, "--type", kind, "--queues", "4")
    deployment.admin_retrying("update-group", "-g", GROUP)
    deployment.admin_retrying("update-group", "-g", FIFO_GROUP, "--fifo")


def reorders(bodies: list[str]) -> int:
    """FIFO messages received after a later message of their group (redeliveries excepted)."""
    highest: dict[str, int] = defaultdict(int)
    seen, late = set(), 0
    for body in bodies:
        kind, group, seq = body.split(":")
        if kind != "fifo" or body in seen:
            continue
        seen.add(body)
        late += int(seq) < highest[group]
        highest[group] = max(highest[group], int(seq))
    return late


def lag_left(deployment: Deployment) -> int | None:
    total = 0
    for group, topic in ((GROUP, TOPIC), (FIFO_GROUP, FIFO_TOPIC)):
        done = deployment.admin("consumer-progress", "-g", group, "-t", topic, "--json", check=False)
        if done.returncode != 0:
            return None
        total += sum(max(0, row["lag"]) for row in json.loads(done.stdout)["queues"] if row.get("source") != "slave")
    return total


def one_run(index: int, args, root: Path) -> dict:
    workdir = root / f"run-{index}"
    deployment = Deployment(args.deployment, workdir).start()
    try:
        prepare(deployment, args.one_broker)
        endpoint = deployment.endpoints[-1]
        producer = Client("produce", "--endpoint", endpoint, "--topic", TOPIC, "--fifo-topic", FIFO_TOPIC,
                          "--groups", str(args.groups), "--rate", str(args.rate), "--seconds", str(args.seconds),
                          log_path=workdir / "producer.log", script=BACKLOG)
        if args.kill:
            killer = threading.Timer(args.seconds / 2, lambda: (deployment.kill_container(0), time.sleep(5),
                                                                deployment.start_container(0)))
            killer.start()
        producer.process.wait(args.seconds + 120)
        if args.kill:
            killer.join()
        producer.stop()
        drain_start = time.monotonic()
        consumer = Client("drain", "--endpoint", endpoint, "--topic", TOPIC, "--fifo-topic", FIFO_TOPIC,
                          "--group", GROUP, "--fifo-group", FIFO_GROUP, "--idle-s", str(args.idle_s),
                          "--max-s", str(args.max_s), "--ack", args.ack, log_path=workdir / "consumer.log", script=BACKLOG)
        consumer.process.wait(args.max_s + 60)
        consumer.stop()
        acks = [e for e in producer.snapshot() if e["event"] == "ack"]
        received = [e for e in consumer.snapshot() if e["event"] == "recv"]
        acked = {e["body"] for e in acks}
        bodies = [e["body"] for e in received]
        write_s = max(e["t"] for e in acks) - min(e["sent"] for e in acks) if acks else 0.0
        drain_s = (max(e["t"] for e in received) - drain_start) if received else float("nan")
        fifo_acked = sum(1 for b in acked if b.startswith("fifo:"))
        return {"run": index, "acked": len(acked), "fifoAcked": fifo_acked, "received": len(bodies),
                "lost": len(acked - set(bodies)), "duplicated": len(bodies) - len(set(bodies)),
                "reordered": reorders(bodies), "writeS": round(write_s, 2), "drainS": round(drain_s, 2),
                "ratio": round(drain_s / write_s, 3) if write_s else None, "lagLeft": lag_left(deployment),
                "sendFails": sum(1 for e in producer.snapshot() if e["event"] == "fail")}
    finally:
        Client.stop_all()
        deployment.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deployment", default="controller-mode", choices=("controller-mode", "2container", "acting-master", "quickstart"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--rate", type=float, default=50.0, help="sends per second per thread, at most")
    parser.add_argument("--seconds", type=float, default=25.0)
    parser.add_argument("--idle-s", type=float, default=40.0)
    parser.add_argument("--max-s", type=float, default=200.0)
    parser.add_argument("--one-broker", action="store_true", help="the backlog on broker-b alone (broker-a read-only)")
    parser.add_argument("--kill", action="store_true", help="SIGKILL container-1 halfway through the write, restart it 5 s later")
    parser.add_argument("--ack", choices=("async", "sync"), default="async",
                        help="the consumers ack each message and wait for it (sync), or wait for a batch's acks (async)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", help="keep the work directories here")
    args = parser.parse_args()
    if args.runs < 1 or args.rate <= 0 or args.seconds <= 0:
        parser.error("--runs, --rate and --seconds must be positive")
    if args.one_broker and args.deployment == "quickstart":
        parser.error("--one-broker needs two broker groups (not quickstart)")
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-backlog-"))
    print(f"# bench_backlog: {args.deployment}{' one-broker' if args.one_broker else ''}{' kill' if args.kill else ''}, "
          f"{args.ack} acks, "
          f"{args.groups} FIFO groups + 1 NORMAL sender at <= {args.rate:g}/s each for {args.seconds:g} s, "
          f"{args.runs} runs, in {root}", file=sys.stderr)
    rows = []
    for index in range(args.runs):
        row = one_run(index, args, root)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    summary = {"deployment": args.deployment, "oneBroker": args.one_broker, "kill": args.kill, "ack": args.ack, "runs": rows,
               "ratioMedian": statistics.median(ratios) if ratios else None, "ratioMax": max(ratios) if ratios else None,
               "lost": sum(r["lost"] for r in rows), "lagLeft": sum(r["lagLeft"] or 0 for r in rows),
               "reordered": sum(r["reordered"] for r in rows)}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{'run':>4} {'acked':>7} {'recv':>7} {'lost':>5} {'dup':>5} {'reord':>5} {'write s':>8} {'drain s':>8} "
              f"{'ratio':>6} {'lag':>5}")
        for r in rows:
            print(f"{r['run']:>4} {r['acked']:>7} {r['received']:>7} {r['lost']:>5} {r['duplicated']:>5} {r['reordered']:>5} "
                  f"{r['writeS']:>8} {r['drainS']:>8} {r['ratio']!s:>6} {r['lagLeft']!s:>5}")
        print(f"drain/write ratio median {summary['ratioMedian']}, max {summary['ratioMax']}; lost {summary['lost']}, "
              f"lag left {summary['lagLeft']}, reordered {summary['reordered']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
