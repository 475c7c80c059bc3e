"""Acting-master figures: delay messages of a group whose master died, delivered through escape.

Runs the conf/acting-master deployment on free loopback ports (tests/support/acting_cluster.py:
a standalone nameserver with supportActingMaster and notifyMinBrokerIdChanged; two containers,
broker-a's master and broker-b's slave in one, the reverse in the other; SYNC_MASTER,
SYNC_FLUSH, totalReplicas 2, inSyncReplicas 2, minInSyncReplicas 1, enableAutoInSyncReplicas;
brokerNotActiveTimeoutMillis 2000, scanNotActiveBrokerInterval 200) with the official Python
client: a PushConsumer, and a producer that sends --messages DELAY messages to a topic on both
groups, due from 1 s to --window-s seconds after the moment the container holding broker-a's
master is then killed with SIGKILL.  Per run it prints:
- death -> first escaped: from the SIGKILL to the first message of broker-a's queues consumed
  from broker-b (the escape target), as the consumer saw it;
- lateness of every due message (consume time minus due time), p50 / p99 / max, for broker-a's
  (escaped) and broker-b's (its own master) separately, and the share within 1 s and 4 s
  (upstream's ScheduleSlaveActingMasterIT accepts 95% within 4 s);
- lost (sent, never consumed; must be 0) and duplicated.
Then p50 / max over runs.  The client sets whole epoch seconds as due times.

    .venv/bin/python bench/bench_acting_master.py --runs 3 --messages 120 --window-s 20

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.acting_cluster import ActingCluster  # noqa: E402
from tests.support.failover_load import ACTING, Client, wait_started  # noqa: E402

SEND_LEAD_S = 6  # seconds from the producer's start to the kill: sending --messages fits in it


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def one_run(workdir: Path, messages: int, window_s: int) -> dict:
    cluster = ActingCluster(workdir).start()
    try:
        cluster.admin("update-topic", "--topic", "delay", "--type", "DELAY", "--queues", "4")
        cluster.admin("update-group", "--group", "bench")
        endpoint = f"{cluster.endpoint(0)};{cluster.endpoint(1)}"
        consumer = Client("push", "--endpoint", endpoint, "--topic", "delay", "--group", "bench",
                          log_path=workdir / "consumer.log", script=ACTING)
        wait_started(consumer)
        started = time.time()
        producer = Client("delay", "--endpoint", endpoint, "--topic", "delay", "--count", str(messages),
                          "--due-from", str(SEND_LEAD_S + 1), "--due-to", str(SEND_LEAD_S + window_s),
                          log_path=workdir / "producer.log", script=ACTING)
        producer.process.wait(SEND_LEAD_S + 60)
        producer.stop()
        cluster.wait_for(lambda: time.time() >= started + SEND_LEAD_S, SEND_LEAD_S + 1, "the kill's moment")
        killed_ms = int(time.time() * 1000)
        cluster.kill(0)
        sent = [e for e in producer.snapshot() if e["event"] == "sent"]
        last_due = max(e["due"] for e in sent)
        cluster.wait_for(lambda: time.time() * 1000 > last_due + 5000, window_s + 30, "every message due, and then some")
        consumer.stop()
        return figures(sent, [e for e in consumer.snapshot() if e["event"] == "recv"], killed_ms)
    finally:
        cluster.close()


def figures(sent: list[dict], got: list[dict], killed_ms: int) -> dict:
    due = {e["body"]: e["due"] for e in sent}
    origin = {e["body"]: e["broker"] for e in sent}
    first = {}
    for event in sorted(got, key=lambda e: e["t"]):
        first.setdefault(event["body"], event)
    escaped = [e for e in first.values() if origin.get(e["body"]) == "broker-a" and e["broker"] == "broker-b"]
    late = {side: [first[b]["t"] - due[b] for b in first if origin.get(b) == side and due[b] > killed_ms]
            for side in ("broker-a", "broker-b")}
    every = late["broker-a"] + late["broker-b"]
    return {"sent": len(sent), "on_a": sum(1 for e in sent if e["broker"] == "broker-a"),
            "first_escaped_ms": min((e["t"] - killed_ms for e in escaped), default=float("nan")),
            "late_a": late["broker-a"], "late_b": late["broker-b"],
            "within_1s": sum(1 for x in every if x <= 1000) / max(1, len(every)),
            "within_4s": sum(1 for x in every if x <= 4000) / max(1, len(every)),
            "lost": len(set(due) - set(first)), "duplicated": len(got) - len(first)}


def show(index: int, run: dict) -> None:
    def spread(values):
        return (f"p50 {percentile(values, 50):6.0f}  p99 {percentile(values, 99):6.0f}  max {max(values, default=0):6.0f} ms"
                if values else "none")
    print(f"run {index}: {run['sent']} sent ({run['on_a']} on broker-a), death -> first escaped "
          f"{run['first_escaped_ms']:.0f} ms, lost {run['lost']}, duplicated {run['duplicated']}")
    print(f"  lateness, broker-a's (escaped): {spread(run['late_a'])}")
    print(f"  lateness, broker-b's (own master): {spread(run['late_b'])}")
    print(f"  within 1 s {run['within_1s']:.1%}, within 4 s {run['within_4s']:.1%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=120, help="delay messages per run (default 120)")
    parser.add_argument("--window-s", type=int, default=20, help="messages come due 1..N s after the kill (default 20)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the runs' logs and data here")
    args = parser.parse_args()
    root = args.workdir or Path(tempfile.mkdtemp(prefix="bench-acting-"))
    print(f"acting master: {args.runs} run(s), {args.messages} delay messages due 1..{args.window_s} s after SIGKILL "
          f"of broker-a's master's container; workdir {root}")
    runs = []
    for index in range(args.runs):
        runs.append(one_run(root / f"run-{index}", args.messages, args.window_s))
        show(index, runs[-1])
    firsts = [r["first_escaped_ms"] for r in runs]
    p99s = [percentile(r["late_a"], 99) for r in runs]
    print(f"over {len(runs)} runs: death -> first escaped p50 {statistics.median(firsts):.0f} ms, max {max(firsts):.0f} ms; "
          f"escaped lateness p50 {statistics.median(percentile(r['late_a'], 50) for r in runs):.0f} ms, "
          f"p99 (worst run) {max(p99s):.0f} ms; within 1 s {min(r['within_1s'] for r in runs):.1%} (worst run); "
          f"lost {sum(r['lost'] for r in runs)}, duplicated {sum(r['duplicated'] for r in runs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
