"""Run a real ``relaymq container`` process for tests: free ports, a tmp data dir, SIGKILL.

``ContainerProcess.start()`` writes a TOML config with free loopback ports, starts
``python -m container container -c FILE`` and waits (with a deadline) for the ready line;
``stop()`` sends SIGTERM and returns the exit code; ``kill()`` sends SIGKILL.
"""
from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


_handed_out: set[int] = set()  # ports this process gave a test: the kernel may offer them again


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int) -> list[int]:
    """``count`` free loopback ports, distinct and never handed out before by this process,
    from below the kernel's ephemeral range.  A probed port is released before its user binds
    it: one from the ephemeral range (port 0's) could meanwhile become the local port of any
    outgoing connection (a client's, a replica link's), and a container then refused to start,
    its port "already in use" (CI, test_controller_mode_liveness).  Below that range only a
    listener takes a port, and the probes start at a place drawn per process."""
    high = _ephemeral_low()
    low = max(1024, high - 20_000)
    span = high - low
    start = random.Random(os.getpid() ^ time.monotonic_ns()).randrange(span)
    ports: list[int] = []
    for step in range(span):
        port = low + (start + step) % span
        if port in _handed_out:
            continue
        probe = socket.socket()
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            probe.close()
        _handed_out.add(port)
        ports.append(port)
        if len(ports) == count:
            return ports
    raise RuntimeError(f"no {count} free loopback ports in {low}-{high - 1}")


def free_port() -> int:
    return free_ports(1)[0]


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class ContainerProcess:
    data_dir: Path
    brokers: list[dict] = field(default_factory=lambda: [{"brokerName": "broker-a"}])
    extra: dict = field(default_factory=dict)
    embedded_namesrv: bool = True
    namesrv_port: int = 0
    process: subprocess.Popen | None = None
    log_path: Path | None = None
    host: str = "127.0.0.1"           # the container's address (its own network namespace: bench/chaos_env.py)
    namesrv_host: str = "127.0.0.1"
    # the command before the container's own arguments (bench/handler_cpu.py runs it under its
    # wrappers); None: ``python -m container``
    launcher: list[str] | None = None

    def __post_init__(self) -> None:
        # distinct: three separate probes could be handed the same port (it happened)
        self.client_port, self.admin_port, namesrv_port = free_ports(3)
        if not self.namesrv_port:
            self.namesrv_port = namesrv_port

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def namesrv(self) -> str:
        return f"{self.namesrv_host}:{self.namesrv_port}"

    def config_text(self) -> str:
        top = {
            "brokerContainerIP": self.host, "adminBindAddress": self.host, "grpcServerPort": self.client_port, "listenPort": self.admin_port, "haListenPort": 0,
            "startEmbeddedNamesrv": self.embedded_namesrv, "namesrvListenPort": self.namesrv_port,
            "namesrvAddr": self.namesrv, "storePathRootDir": str(self.data_dir), "metricsPromExporterPort": 0,
            "brokerHeartbeatInterval": 500, **self.extra,
        }
        lines = [f"{k} = {toml_value(v)}" for k, v in top.items()]
        for broker in self.brokers:
            lines.append("[[broker]]")
            lines += [f"{k} = {toml_value(v)}" for k, v in {"brokerClusterName": "DefaultCluster", "brokerId": 0, **broker}.items()]
        return "\n".join(lines) + "\n"

    def write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / "container.toml"
        path.write_text(self.config_text())
        return path

    def start(self, timeout_s: float = 30.0) -> "ContainerProcess":
        config = self.write_config()
        self.log_path = self.data_dir / "container.log"
        log = open(self.log_path, "ab")
        command = self.launcher or [sys.executable, "-m", "container"]
        self.process = subprocess.Popen([*command, "container", "-c", str(config)],
                                        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if b"container ready" in line:
                return self
            if not line and self.process.poll() is not None:
                raise RuntimeError(f"container exited with {self.process.returncode}: {self.log_path.read_text()[-3000:]}")
        self.kill()
        raise RuntimeError(f"container not ready in {timeout_s}s: {self.log_path.read_text()[-3000:]}")

    def stop(self, timeout_s: float = 15.0) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def admin(self, *args: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "container", "admin", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout_s)
