"""What the backlog probe costs idle consumers: CPU of conf/controller-mode with idle SimpleConsumers.

The deployment exactly as shipped (bench/deployment.py), twice per round: with the backlog probe
(receiveBacklogProbeIntervalMillis 500, the default) and without (0), each with ``--consumers``
official SimpleConsumers (one consumer group each, await_duration 20 s, the client's default)
polling an empty topic on both broker groups for ``--seconds``.  Printed per round: both
containers' CPU (user + system, /proc) per second of each setting, the probes the containers
asked (relaymq_backlog_probes_total) and the receives the consumers made.  With nothing to
receive anywhere the probe never ends a wait; what it costs is its questions.

    .venv/bin/python bench/bench_idle_consumers.py --rounds 3 --consumers 8 --seconds 60

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_broker import cpu_seconds  # noqa: E402
from bench.deployment import Deployment  # noqa: E402
from tests.support.failover_load import Client, wait_started  # noqa: E402

METRICS_PORTS = (5557, 5558)  # conf/controller-mode's metricsPromExporterPort


def scrape(name: str) -> float:
    total = 0.0
    for port in METRICS_PORTS:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        total += sum(float(m.group(1)) for m in re.finditer(rf"{name}\{{[^}}]*\}} (\S+)", text))
    return total


def one(interval_ms: int, args, workdir: Path) -> dict:
    deployment = Deployment("controller-mode", workdir, {"receiveBacklogProbeIntervalMillis": interval_ms}).start()
    consumers = []
    try:
        deployment.admin_retrying("update-topic", "-t", "idle", "--queues", "4")
        for index in range(args.consumers):
            deployment.admin_retrying("update-group", "-g", f"idle-{index}")
        consumers = [Client("consume", "--endpoint", deployment.endpoints[-1], "--topic", "idle", "--group", f"idle-{index}",
                            "--await-s", "20", "--seconds", "100000", log_path=workdir / f"consumer-{index}.log")
                     for index in range(args.consumers)]
        wait_started(*consumers, timeout_s=60)
        time.sleep(5)
        pids = [process.pid for process in deployment.containers]
        cpu, probes, began = sum(cpu_seconds(p) for p in pids), scrape("relaymq_backlog_probes_total"), time.monotonic()
        batches = sum(1 for c in consumers for e in c.snapshot() if e["event"] == "batch")
        time.sleep(args.seconds)
        elapsed = time.monotonic() - began
        return {"cpu_ms_per_s": 1000 * (sum(cpu_seconds(p) for p in pids) - cpu) / elapsed,
                "probes_per_s": (scrape("relaymq_backlog_probes_total") - probes) / elapsed,
                "receives_per_s": (sum(1 for c in consumers for e in c.snapshot() if e["event"] == "batch") - batches) / elapsed}
    finally:
        for consumer in consumers:
            consumer.stop()
        deployment.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--consumers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    if args.rounds < 1 or args.consumers < 1 or args.seconds < 10:
        parser.error("--rounds and --consumers must be positive, --seconds at least 10")
    print(f"# bench_idle_consumers: conf/controller-mode, {args.consumers} idle SimpleConsumers (await 20 s), "
          f"{args.seconds:g} s per setting, {args.rounds} rounds")
    rows = {500: [], 0: []}
    with tempfile.TemporaryDirectory() as tmp:
        for round_no in range(args.rounds):
            for interval in (500, 0):
                rows[interval].append(one(interval, args, Path(tmp) / f"r{round_no}-{interval}"))
                row = rows[interval][-1]
                print(f"round {round_no + 1} probe {'on ' if interval else 'off'}: containers {row['cpu_ms_per_s']:.1f} ms "
                      f"CPU/s, {row['probes_per_s']:.2f} probes/s, {row['receives_per_s']:.2f} receives/s", flush=True)
    for interval, label in ((500, "on (500 ms)"), (0, "off")):
        print(f"probe {label}: median {statistics.median(r['cpu_ms_per_s'] for r in rows[interval]):.1f} ms of CPU per "
              f"second in both containers, {statistics.median(r['probes_per_s'] for r in rows[interval]):.2f} probes/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
