"""Malformed calls a container absorbs while it serves a steady official-client load.

One real container (ASYNC_FLUSH, one master) in its own process.  The steady load is the
official ``rocketmq-python-client`` in a subprocess: producers sending 1 KiB messages, one
send in flight each, reporting every half second how many sends completed and their summed
latency.  The garbage is a grpc.aio client in this process sending requests that cannot
parse (an invalid wire type, then random bytes) to every unary method of the client
protocol, ``--garbage-concurrency`` calls in flight, paced to each of ``--garbage-rates``
calls/s (0: as fast as they are answered), checking each answer (the response's BAD_REQUEST
status, or INVALID_ARGUMENT).

Phases, back to back in one run: quiet (load only), one garbage phase per rate (load +
garbage), one phase of well-formed Heartbeat calls at ``--heartbeat-rate`` (what any call
costs, for comparison: a malformed call cannot cost less than gRPC's own per-call work),
quiet again.
Printed per phase: official sends/s and mean latency, the extra calls/s answered (malformed or heartbeats), the
container's CPU (user + system, /proc) per second, and at the end the lines the container
logged about bad requests and any traceback (there must be none).

    .venv/bin/python bench/bench_bad_requests.py [--phase-s 10] [--producers 2] [--garbage-rates 250,1000,0]
Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from proto import messaging_service_pb2 as s  # noqa: E402

TOPIC = "bench-bad"
META = (("x-mq-client-id", f"bench-bad@{os.getpid()}"), ("x-mq-language", "PYTHON"))
LOAD = """
import json, sys, threading, time
from rocketmq import ClientConfiguration, Credentials, Message, Producer
endpoint, topic, producers, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
lock, done, latency = threading.Lock(), [0], [0.0]
def run(producer):
    message = Message()
    message.topic, message.body = topic, b"x" * 1024
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        started = time.monotonic()
        producer.send(message)
        with lock:
            done[0] += 1
            latency[0] += time.monotonic() - started
clients = [Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=10), (topic,)) for _ in range(producers)]
for client in clients:
    client.startup()
print(json.dumps({"ready": time.monotonic()}), flush=True)
threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in clients]
for thread in threads:
    thread.start()
while any(t.is_alive() for t in threads):
    time.sleep(0.5)
    with lock:
        print(json.dumps({"t": time.monotonic(), "sent": done[0], "latency_s": latency[0]}), flush=True)
for client in clients:
    client.shutdown()
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def garbage(rng: random.Random) -> bytes:
    """Bytes no protobuf message parses: field 1 with wire type 7 (invalid), then noise."""
    return b"\x0f" + rng.randbytes(rng.randrange(0, 64))


class Flood:
    """``concurrency`` callers of random unary client-protocol methods with garbage."""

    def __init__(self, endpoint: str, concurrency: int, well_formed: bool = False):
        self.endpoint, self.concurrency, self.well_formed = endpoint, concurrency, well_formed
        self.rate = 0.0  # calls/s in all; 0: unpaced
        methods = s.DESCRIPTOR.services_by_name["MessagingService"].methods
        self.paths = [(f"/{m.containing_service.full_name}/{m.name}", getattr(s, m.output_type.name))
                      for m in methods if not m.client_streaming and not m.server_streaming]
        if well_formed:
            self.paths = [("/apache.rocketmq.v2.MessagingService/Heartbeat", s.HeartbeatResponse)]
        self.answered = self.wrong = 0

    async def _caller(self, channel, seed: int) -> None:
        rng = random.Random(seed)
        calls = {path: channel.unary_unary(path) for path, _ in self.paths}
        interval = self.concurrency / self.rate if self.rate else 0.0
        next_at = time.monotonic() + rng.random() * interval
        while not self._stop.is_set():
            if interval:
                next_at += interval
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            path, response_type = rng.choice(self.paths)
            try:
                body = s.HeartbeatRequest().SerializeToString() if self.well_formed else garbage(rng)
                reply = response_type.FromString(await calls[path](body, timeout=5, metadata=META))
                ok = reply.status.code == (20000 if self.well_formed else 40000)
            except grpc.aio.AioRpcError as error:
                ok = error.code() is grpc.StatusCode.INVALID_ARGUMENT
            self.answered += 1
            self.wrong += not ok

    async def run(self, seconds: float, rate: float) -> None:
        self.rate = rate
        self._stop = asyncio.Event()
        async with grpc.aio.insecure_channel(self.endpoint) as channel:
            tasks = [asyncio.create_task(self._caller(channel, seed)) for seed in range(self.concurrency)]
            await asyncio.sleep(seconds)
            self._stop.set()
            await asyncio.gather(*tasks)


class LoadReader:
    """Reads the load subprocess's cumulative counts as they arrive."""

    def __init__(self, process: subprocess.Popen):
        self.points: list[tuple[float, int, float]] = []
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            record = json.loads(line)
            if "ready" in record:
                self.ready.set()
            else:
                self.points.append((record["t"], record["sent"], record["latency_s"]))

    def window(self, start: float, end: float) -> tuple[float, float]:
        """(sends/s, mean latency ms) between the report points nearest ``start`` and ``end``."""
        inside = [p for p in self.points if start <= p[0] <= end]
        if len(inside) < 2:
            return float("nan"), float("nan")
        (t0, n0, l0), (t1, n1, l1) = inside[0], inside[-1]
        return (n1 - n0) / (t1 - t0), 1000 * (l1 - l0) / max(1, n1 - n0)


def start_container(data: Path):
    from tests.support.container_process import ContainerProcess

    container = ContainerProcess(data, brokers=[{"brokerName": "broker-a", "flushDiskType": "ASYNC_FLUSH"}]).start()
    deadline = time.monotonic() + 30
    while container.admin("update-topic", "-t", TOPIC, "--namesrv", container.namesrv).returncode != 0:
        if time.monotonic() > deadline:
            raise RuntimeError("update-topic failed")
        time.sleep(0.2)
    return container


def phase(name: str, seconds: float, container, load: LoadReader, flood: Flood | None, rate: float = 0) -> dict:
    cpu_before, started = cpu_seconds(container.process.pid), time.monotonic()
    answered = flood.answered if flood else 0
    if flood:
        asyncio.run(flood.run(seconds, rate))
    else:
        time.sleep(seconds)
    ended = time.monotonic()
    time.sleep(0.6)  # the load's next report point
    rate, latency_ms = load.window(started, ended)
    calls = (flood.answered - answered) if flood else 0
    return {"phase": name, "sends_s": rate, "latency_ms": latency_ms, "garbage_s": calls / (ended - started),
            "cpu_s_per_s": (cpu_seconds(container.process.pid) - cpu_before) / (ended - started)}


def report(results: list[dict], flood: Flood, log: str) -> None:
    quiet = (results[0]["sends_s"] + results[-1]["sends_s"]) / 2
    quiet_ms = (results[0]["latency_ms"] + results[-1]["latency_ms"]) / 2
    print(f"\n{'phase':<18}{'sends/s':>10}{'vs quiet':>10}{'send ms':>10}{'calls/s':>12}{'container cpu':>15}")
    for r in results:
        change = f"{100 * (r['sends_s'] / quiet - 1):+.0f}%"
        print(f"{r['phase']:<18}{r['sends_s']:>10.0f}{change:>10}{r['latency_ms']:>10.2f}{r['garbage_s']:>12.0f}"
              f"{r['cpu_s_per_s']:>14.2f}s")
    print(f"quiet: mean of the first and last phases, {quiet:.0f} sends/s at {quiet_ms:.2f} ms; container cpu: "
          f"CPU seconds per second of the container process (user + system)")
    print(f"malformed calls answered: {flood.answered} ({flood.wrong} with a wrong status); container log: "
          f"{log.count('bad request from')} 'bad request' lines, {log.count('Traceback')} tracebacks, "
          f"{len(log.encode())} bytes")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase-s", type=float, default=10.0, help="seconds per phase (default 10)")
    parser.add_argument("--producers", type=int, default=2, help="official-client producers, one send in flight each")
    parser.add_argument("--garbage-concurrency", type=int, default=32, help="malformed calls in flight at most")
    parser.add_argument("--heartbeat-rate", type=float, default=1000, help="well-formed Heartbeat calls/s of the comparison "
                        "phase (0: no such phase)")
    parser.add_argument("--garbage-rates", default="250,1000,0",
                        help="malformed calls/s of each garbage phase, comma-separated; 0: as fast as answered")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, grpcio {grpc.__version__}, {os.cpu_count()} cpus, "
          f"{args.producers} producers, {args.garbage_concurrency} malformed calls in flight, {args.phase_s:.0f} s per phase")
    with tempfile.TemporaryDirectory() as tmp:
        container = start_container(Path(tmp) / "data")
        rates = [float(r) for r in args.garbage_rates.split(",")]
        load_seconds = (3 + len(rates)) * (args.phase_s + 0.7) + 6
        process = subprocess.Popen([sys.executable, "-c", LOAD, container.endpoint, TOPIC, str(args.producers), str(load_seconds)],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            load = LoadReader(process)
            load.ready.wait(60)
            time.sleep(2)  # warm-up
            flood = Flood(container.endpoint, args.garbage_concurrency)
            results = [phase("quiet", args.phase_s, container, load, None)]
            results += [phase(f"garbage {'max' if not r else f'{r:.0f}/s'}", args.phase_s, container, load, flood, r)
                        for r in rates]
            if args.heartbeat_rate:
                heartbeats = Flood(container.endpoint, args.garbage_concurrency, well_formed=True)
                results.append(phase(f"heartbeat {args.heartbeat_rate:.0f}/s", args.phase_s, container, load, heartbeats,
                                     args.heartbeat_rate))
            results.append(phase("quiet", args.phase_s, container, load, None))
        finally:
            process.kill()
            process.wait()
            container.stop()
        report(results, flood, container.log_path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
