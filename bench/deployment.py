"""Run a deployment exactly as shipped under ``conf/``, the way its README section starts it.

``Deployment("controller-mode", workdir).start()`` runs ``relaymq namesrv -c conf/<name>/namesrv.toml``
then each ``conf/<name>/container-N.toml`` from ``workdir`` (the configs' relative data paths
land there), waits for each process's ready line, and gives the client endpoints the README
names.  The ports are the shipped ones (9876, 8081, 8082, ...): one deployment at a time.
Benchmarks use this so that their figures are the deployments users run, not look-alikes.
``overrides`` adds container-level keys to every container file (copies under ``workdir``),
for a benchmark that compares a setting against the shipped default.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEPLOYMENTS = {
    "controller-mode": ("namesrv.toml", ["container-1.toml", "container-2.toml"]),
    "2container": ("namesrv.toml", ["container-1.toml", "container-2.toml"]),
    "acting-master": ("namesrv.toml", ["container-1.toml", "container-2.toml"]),
    "quickstart": (None, ["../quickstart.toml"]),
}
ENDPOINTS = {"controller-mode": ["127.0.0.1:8081", "127.0.0.1:8082"], "2container": ["127.0.0.1:8081", "127.0.0.1:8082"],
             "acting-master": ["127.0.0.1:8081", "127.0.0.1:8082"], "quickstart": ["127.0.0.1:8081"]}


def _spawn(args: list[str], cwd: Path, log_path: Path, ready: bytes, timeout_s: float = 40.0) -> subprocess.Popen:
    log = open(log_path, "ab")
    process = subprocess.Popen([sys.executable, "-m", "container", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=log,
                               env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if ready in line:
            return process
        if not line and process.poll() is not None:
            raise RuntimeError(f"{args[0]} exited with {process.returncode}: {log_path.read_text()[-3000:]}")
    process.kill()
    raise RuntimeError(f"{args[0]} not ready in {timeout_s}s: {log_path.read_text()[-3000:]}")


class Deployment:
    def __init__(self, name: str, workdir: Path, overrides: dict[str, object] | None = None):
        if name not in DEPLOYMENTS:
            raise ValueError(f"unknown deployment {name!r}; one of {', '.join(DEPLOYMENTS)}")
        self.name, self.workdir = name, Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.conf = ROOT / "conf" / name
        self.overrides = dict(overrides or {})
        self.namesrv: subprocess.Popen | None = None
        self.containers: list[subprocess.Popen | None] = []

    @property
    def endpoints(self) -> list[str]:
        return ENDPOINTS[self.name]

    @property
    def endpoint(self) -> str:
        """Every container's client endpoint, as the official client takes several (';')."""
        return ";".join(self.endpoints)

    def start(self) -> "Deployment":
        namesrv, containers = DEPLOYMENTS[self.name]
        if namesrv is not None:
            self.namesrv = _spawn(["namesrv", "-c", str(self.conf / namesrv)], self.workdir, self.workdir / "namesrv.log",
                                  b"listening")
        self.containers = [None] * len(containers)
        for index in range(len(containers)):
            self.start_container(index)
        return self

    def start_container(self, index: int) -> None:
        config = (self.conf / DEPLOYMENTS[self.name][1][index]).resolve()
        if self.overrides:
            config = self._with_overrides(config)
        self.containers[index] = _spawn(["container", "-c", str(config)], self.workdir,
                                        self.workdir / f"container-{index + 1}.log", b"container ready")

    def _with_overrides(self, config: Path) -> Path:
        text = config.read_text()
        head, marker, rest = text.partition("[[broker]]")
        keys = "".join(f"{key} = {_toml(value)}\n" for key, value in self.overrides.items())
        copy = self.workdir / "conf" / config.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(head + keys + marker + rest)
        return copy

    def loop_lag_buckets(self) -> list[dict[float, float] | None]:
        """Each container's ``relaymq_event_loop_lag_seconds`` buckets (upper bound -> looks at
        most that late, cumulative) from its metrics endpoint; None for one that does not answer."""
        found = []
        for name in DEPLOYMENTS[self.name][1]:
            port = tomllib.loads((self.conf / name).read_text()).get("metricsPromExporterPort", 5557)
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                found.append(None)
                continue
            found.append({float(line.split('le="')[1].split('"')[0]): float(line.split()[-1]) for line in text.splitlines()
                          if line.startswith("relaymq_event_loop_lag_seconds_bucket{")})
        return found

    def kill_container(self, index: int) -> None:
        process = self.containers[index]
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()

    def admin(self, *args: str, check: bool = True, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "container", "admin", *args], cwd=self.workdir, capture_output=True,
                              text=True, timeout=timeout_s, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if check and done.returncode != 0:
            raise RuntimeError(f"relaymq admin {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
        return done

    def admin_retrying(self, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
        """An admin command retried until it succeeds (brokers register a moment after they start)."""
        deadline = time.monotonic() + timeout_s
        while True:
            done = self.admin(*args, check=False)
            if done.returncode == 0 or time.monotonic() > deadline:
                if done.returncode != 0:
                    raise RuntimeError(f"relaymq admin {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
                return done
            time.sleep(0.5)

    def stop(self) -> None:
        for process in [*self.containers, self.namesrv]:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*self.containers, self.namesrv]:
            if process is None:
                continue
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def lag_summary(before: dict[float, float] | None, after: dict[float, float] | None) -> str:
    """The looks between two scrapes of a container's loop-lag buckets: how many, and the bounds
    (bucket upper edges, ms) 99% and all of them stayed under."""
    if not before or not after:
        return "no metrics"
    edges = sorted(after)
    counts = [after[edge] - before.get(edge, 0.0) for edge in edges]
    total = counts[-1]
    if total <= 0:
        return "no looks"
    p99 = next(edge for edge, count in zip(edges, counts) if count >= 0.99 * total)
    worst = next(edge for edge, count in zip(edges, counts) if count >= total)
    return f"{int(total)} looks, p99 <= {p99 * 1000:g} ms, max <= {worst * 1000:g} ms"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, (int, float)) else '"' + str(value).replace('"', '\\"') + '"'
