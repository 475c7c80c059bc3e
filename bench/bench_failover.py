"""Failover under the controller, measured with the official Python client (issue 13's figures).

Each run starts the controller-mode deployment (tests/support/controller_cluster.py: a
nameserver with the embedded controller, two containers each hosting a replica of broker-a
and broker-b, SYNC_FLUSH, allAckInSyncStateSet), the official client with default settings
sending 1 KiB NORMAL messages at ``--rate`` per second (send_async) and FIFO messages of one
message group whose queue is on broker-a (sync sends, one at a time, each retried until
acknowledged), and two SimpleConsumers; then kills broker-a's master container with SIGKILL
(``--fault kill``) or stops it with SIGSTOP for ``--stop-s`` seconds (``--fault stop``).

Printed per run, then p50/max over runs:
  phases (ms after the fault, read from the processes' logs): detection (the controller
  declares the master dead), election (committed), role switch (the new master serves),
  first acknowledged write on the new master, route convergence (the nameserver routes the
  new master as id 0; clients do not need it: routes name every replica's endpoint);
  gaps: the longest time with no acknowledged send at all, and for the FIFO group;
  lost (acknowledged, never consumed), duplicated, reordered within the FIFO group.
``--floor`` first measures the same client against two stand-in brokers where the second is
already listening when the first dies (bench/failover_floor_server.py): the gap there is the
client's and gRPC's own, the floor no broker can go below.

Usage: .venv/bin/python bench/bench_failover.py --runs 10 --fault kill --floor
       .venv/bin/python bench/bench_failover.py --runs 10 --fault stop --stop-s 5 --floor
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.container_process import free_ports  # noqa: E402
from tests.support.controller_cluster import ControllerModeCluster  # noqa: E402
from tests.support.failover_load import Client, drain, longest_gap, wait_started  # noqa: E402

LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be positive")
    return value


def first_after(path: Path, pattern: str, since_wall: float) -> float | None:
    """Seconds after ``since_wall`` of the first log line matching ``pattern`` at or after it."""
    regex = re.compile(pattern)
    for line in path.read_text(errors="replace").splitlines():
        stamp = LOG_TIME.match(line)
        if not stamp or not regex.search(line):
            continue
        at = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if at >= since_wall - 0.0005:
            return at - since_wall
    return None


def start_load(endpoint: str, workdir: Path, args) -> tuple[Client, list[Client]]:
    producer = Client("produce", "--endpoint", endpoint, "--topic", "normal", "--fifo-topic", "fifo", "--rate",
                      str(args.rate), "--groups", "1", "--fifo-rate", str(args.fifo_rate), "--seconds", "3600",
                      log_path=workdir / "producer.log")
    consumers = [Client("consume", "--endpoint", endpoint, "--topic", "normal", "--group", "normal-group",
                        "--seconds", "3600", log_path=workdir / "consumer-normal.log"),
                 Client("consume", "--endpoint", endpoint, "--fifo-topic", "fifo", "--group", "fifo-group",
                        "--seconds", "3600", log_path=workdir / "consumer-fifo.log")]
    wait_started(producer, *consumers)
    return producer, consumers


def settle(producer: Client, seconds: float) -> None:
    deadline = time.monotonic() + 30
    while sum(1 for e in producer.snapshot() if e["event"] == "ack") < 20:
        if time.monotonic() > deadline:
            raise RuntimeError("the load did not start")
        time.sleep(0.05)
    time.sleep(seconds)


def gaps(producer: Client, fault_at: float, window_s: float) -> dict:
    overall, _ = longest_gap([producer], None, fault_at - 0.5, fault_at + window_s)
    fifo, _ = longest_gap([producer], "fifo", fault_at - 0.5, fault_at + window_s)
    return {"gap_overall_ms": round(overall * 1000), "gap_fifo_ms": round(fifo * 1000)}


def phases(cluster: ControllerModeCluster, producer: Client, fault_wall: float, fault_at: float) -> dict:
    ns_log, new_master_log = cluster.workdir / "namesrv.log", cluster.containers[1].log_path
    first_write = min((e["t"] for e in producer.snapshot() if e["event"] == "ack" and e["t"] > fault_at
                       and e["queue"].startswith("broker-a")), default=None)

    def ms(value):
        return None if value is None else round(value * 1000)
    return {"detection_ms": ms(first_after(ns_log, r"broker-a id \d+ .*(session ended|is not alive)", fault_wall)),
            "election_ms": ms(first_after(ns_log, r"re-election for broker-a: SUCCESS", fault_wall)),
            "role_switch_ms": ms(first_after(new_master_log, r"broker-a: now master", fault_wall)),
            "first_write_ms": ms(None if first_write is None else first_write - fault_at),
            "route_ms": ms(first_after(ns_log, r"DefaultCluster_broker-a_0 left the route \(REPLACED\)", fault_wall))}


def one_run(index: int, args, root: Path) -> dict:
    workdir = root / f"run-{index}"
    cluster = ControllerModeCluster(workdir, heartbeat_timeout_ms=args.heartbeat_timeout_ms).start()
    try:
        cluster.create_load_topics()
        producer, consumers = start_load(cluster.endpoint(1), workdir, args)
        settle(producer, args.before_s)
        fault_wall, fault_at = time.time(), time.monotonic()
        if args.fault == "kill":
            cluster.kill(0)
        else:
            cluster.pause(0)
        deadline = time.monotonic() + args.after_s
        while time.monotonic() < deadline:
            if args.fault == "stop" and time.monotonic() >= fault_at + args.stop_s and cluster.containers[0].process:
                cluster.resume(0)
            time.sleep(0.05)
        if args.fault == "stop":
            cluster.resume(0)
        result = {"run": index, **phases(cluster, producer, fault_wall, fault_at),
                  **gaps(producer, fault_at, args.after_s)}
        producer.stop()
        counts = drain(consumers, [producer], timeout_s=60)
        for consumer in consumers:
            consumer.stop()
        result.update(acked=len(counts.acked), lost=len(counts.lost), duplicated=counts.duplicates,
                      reordered=counts.reorders(), send_failures=counts.fails)
        return result
    finally:
        cluster.close()


def floor_run(index: int, args, root: Path) -> dict:
    """The same client against two stand-ins, B already listening when A dies or stops."""
    workdir = root / f"floor-{index}"
    workdir.mkdir(parents=True)
    ports = free_ports(2)
    peers = ",".join(map(str, ports))
    servers = []
    for port in ports:
        log = open(workdir / f"floor-{port}.log", "ab")
        process = subprocess.Popen([sys.executable, str(ROOT / "bench" / "failover_floor_server.py"), "--port",
                                    str(port), "--peers", peers, "--topic", "normal=NORMAL", "--topic", "fifo=FIFO"],
                                   stdout=subprocess.PIPE, stderr=log, text=True)
        assert process.stdout.readline().startswith("READY"), "stand-in did not start"
        servers.append(process)
    producer = Client("produce", "--endpoint", f"127.0.0.1:{ports[0]}", "--topic", "normal", "--fifo-topic", "fifo",
                      "--rate", str(args.rate), "--groups", "1", "--fifo-rate", str(args.fifo_rate), "--seconds",
                      "3600", log_path=workdir / "producer.log")
    try:
        wait_started(producer)
        settle(producer, args.before_s)
        first = min(ports)  # the client's channel connects to the address that sorts first
        victim = servers[ports.index(first)]
        fault_at = time.monotonic()
        victim.send_signal(signal.SIGKILL if args.fault == "kill" else signal.SIGSTOP)
        time.sleep(args.stop_s if args.fault == "stop" else args.after_s)
        if args.fault == "stop":
            victim.send_signal(signal.SIGCONT)
            time.sleep(max(0.0, args.after_s - args.stop_s))
        return {"run": index, **gaps(producer, fault_at, args.after_s)}
    finally:
        producer.stop()
        for process in servers:
            process.send_signal(signal.SIGCONT)
            process.kill()
            process.wait()


def summary(rows: list[dict], keys: list[str]) -> dict:
    out = {}
    for key in keys:
        values = [r[key] for r in rows if r.get(key) is not None]
        out[key] = {"p50": statistics.median(values) if values else None, "max": max(values) if values else None}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, choices=range(1, 101), metavar="N")
    parser.add_argument("--fault", choices=("kill", "stop"), default="kill")
    parser.add_argument("--stop-s", type=_positive, default=5.0, help="SIGSTOP lasts this long (default 5)")
    parser.add_argument("--before-s", type=_positive, default=2.0, help="steady load before the fault")
    parser.add_argument("--after-s", type=_positive, default=8.0, help="measured window after the fault")
    parser.add_argument("--rate", type=_positive, default=100.0, help="NORMAL sends per second")
    parser.add_argument("--fifo-rate", type=_positive, default=50.0, help="FIFO sends per second")
    parser.add_argument("--heartbeat-timeout-ms", type=int, default=1500, help="controllerHeartBeatTimeoutMills")
    parser.add_argument("--floor", action="store_true", help="measure the client's own floor first")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the run directories (logs)")
    parser.add_argument("--keep-failed", action="store_true", help="keep the directories of runs that lost messages")
    args = parser.parse_args()
    if args.fault == "stop" and args.stop_s >= args.after_s:
        parser.error("--stop-s must be shorter than --after-s")
    root = Path(tempfile.mkdtemp(prefix="relaymq-failover-"))
    report = {"how": {k: v for k, v in vars(args).items()}, "floor": [], "runs": []}
    try:
        if args.floor:
            for index in range(args.runs):
                report["floor"].append(floor_run(index, args, root))
                print("floor", json.dumps(report["floor"][-1]), flush=True)
        for index in range(args.runs):
            report["runs"].append(one_run(index, args, root))
            print("run", json.dumps(report["runs"][-1]), flush=True)
            if args.keep_failed and not args.keep and not report["runs"][-1]["lost"]:
                shutil.rmtree(root / f"run-{index}", ignore_errors=True)
    finally:
        if not args.keep and not args.keep_failed:
            shutil.rmtree(root, ignore_errors=True)
        elif args.keep_failed:
            print(f"kept in {root}", flush=True)
    keys = ["detection_ms", "election_ms", "role_switch_ms", "first_write_ms", "route_ms", "gap_overall_ms",
            "gap_fifo_ms", "lost", "duplicated", "reordered"]
    report["summary"] = summary(report["runs"], keys)
    if report["floor"]:
        report["floor_summary"] = summary(report["floor"], ["gap_overall_ms", "gap_fifo_ms"])
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


def render(report: dict) -> str:
    how = report["how"]
    lines = [f"failover, fault={how['fault']}" + (f" ({how['stop_s']} s SIGSTOP)" if how["fault"] == "stop" else "")
             + f", {how['runs']} runs, NORMAL {how['rate']}/s + one FIFO group {how['fifo_rate']}/s, "
             f"controllerHeartBeatTimeoutMills {how['heartbeat_timeout_ms']}", "", "metric            p50      max"]
    for key, value in report["summary"].items():
        lines.append(f"{key:<16} {value['p50']!s:>7}  {value['max']!s:>7}")
    if "floor_summary" in report:
        lines += ["", "floor (the same client, the next address already serving):"]
        for key, value in report["floor_summary"].items():
            lines.append(f"{key:<16} {value['p50']!s:>7}  {value['max']!s:>7}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
