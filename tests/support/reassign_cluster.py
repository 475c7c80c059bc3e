"""The deployment of conf/reassign on free ports, from its own files: a nameserver with the
embedded controller, container-1 serving broker-a (SYNC_FLUSH, on ./shared-store) and an idle
container-2, all started from one working directory (``workdir``), as the files say.

Only the ports (and, where a test asks, the move's timeouts) differ from the shipped files, so
their keys, paths and names are what is tested.  ``controllers=3`` runs the controller as three
standalone members (``relaymq controller``, one Raft group) beside a plain nameserver instead,
so that a test can kill the leader mid-move; the containers and the admin commands are given
all three addresses.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from tests.support.container_process import free_ports, toml_value

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf" / "reassign"
READY = {"namesrv": b"listening on", "container": b"container ready", "controller": b"ready"}


def _toml(values: dict) -> str:
    lines = [f"{k} = {toml_value(v)}" for k, v in values.items() if k != "broker"]
    for broker in values.get("broker", []):
        lines.append("[[broker]]")
        lines += [f"{k} = {toml_value(v)}" for k, v in broker.items()]
    return "\n".join(lines) + "\n"


class ReassignCluster:
    def __init__(self, workdir: Path, controllers: int = 1, **controller: int):
        """``controller``: controller keys to set (reassignReleaseTimeoutMillis=...)."""
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        ports = free_ports(8 + (controllers if controllers > 1 else 0))  # one call: distinct ports
        (self.namesrv_port, self.client_1, self.client_2, self.admin_1, self.admin_2, self.ha_1,
         self.ha_2, self.metrics_port) = ports[:8]
        self.controller_ports = ports[8:] or [self.namesrv_port]
        self.controller = controller
        self.processes: dict[str, subprocess.Popen] = {}

    @property
    def controller_addr(self) -> str:
        return ";".join(f"127.0.0.1:{port}" for port in self.controller_ports)

    @property
    def standalone(self) -> bool:
        return self.controller_ports != [self.namesrv_port]

    def controller_names(self) -> list[str]:
        return [f"controller-n{index}" for index in range(len(self.controller_ports))] if self.standalone else []

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    def endpoint(self, index: int) -> str:
        return f"127.0.0.1:{(self.client_1, self.client_2)[index - 1]}"

    def _config(self, name: str) -> Path:
        values = {} if name.startswith("controller-") else tomllib.loads((CONF / f"{name}.toml").read_text())
        peers = ";".join(f"n{index}-127.0.0.1:{port}" for index, port in enumerate(self.controller_ports))
        if name == "namesrv" and self.standalone:  # routes only: the controller runs as three members
            values = {"listenPort": self.namesrv_port, "namesrvMetricsPort": self.metrics_port}
        elif name == "namesrv":
            values.update(listenPort=self.namesrv_port, controllerDLegerPeers=peers,
                          namesrvMetricsPort=self.metrics_port, **self.controller)
        elif name.startswith("controller-"):  # the embedded controller's keys, as a standalone member
            shipped = tomllib.loads((CONF / "namesrv.toml").read_text())
            member = name.rsplit("-", 1)[1]
            values = {key: shipped[key] for key in ("controllerDLegerGroup", "reassignReleaseTimeoutMillis",
                                                    "reassignOpenTimeoutMillis")}
            values.update(controllerDLegerPeers=peers, controllerDLegerSelfId=member,
                          controllerStorePath=f"./relaymq-data/reassign/controller-{member}", **self.controller)
        else:
            index = int(name[-1])
            values.update(grpcServerPort=(self.client_1, self.client_2)[index - 1],
                          listenPort=(self.admin_1, self.admin_2)[index - 1], haListenPort=(self.ha_1, self.ha_2)[index - 1],
                          namesrvAddr=self.namesrv, controllerAddr=self.controller_addr, metricsPromExporterPort=0)
        path = self.workdir / f"{name}.toml"
        path.write_text(_toml(values))
        return path

    def start(self, name: str, timeout_s: float = 30.0) -> subprocess.Popen:
        kind = "namesrv" if name == "namesrv" else "controller" if name.startswith("controller-") else "container"
        log = open(self.workdir / f"{name}.log", "ab")
        process = subprocess.Popen([sys.executable, "-m", "container", kind, "-c", str(self._config(name))],
                                   cwd=self.workdir, stdout=subprocess.PIPE, stderr=log,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)})
        deadline = time.monotonic() + timeout_s
        seen = b""
        while READY[kind] not in seen:
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                raise RuntimeError(f"{name} exited {process.returncode}: {(self.workdir / f'{name}.log').read_text()[-3000:]}")
            seen += line
            if time.monotonic() >= deadline:
                process.kill()
                process.wait()
                raise AssertionError(f"{name} not ready within {timeout_s} s")
        self.processes[name] = process
        return process

    def start_all(self) -> "ReassignCluster":
        try:  # everything up, or everything it started killed again (nothing leaks into later tests)
            for name in ("namesrv", *self.controller_names(), "container-1", "container-2"):
                self.start(name)
            self.wait_for(lambda: len([c for c in self.moves_list()["containers"] if c["live"]]) == 2, 20,
                          "both containers reported to the controller")
        except BaseException:
            self.close()
            raise
        return self

    def signal(self, name: str, which: int) -> None:
        self.processes[name].send_signal(which)

    def kill(self, name: str) -> None:
        process = self.processes.pop(name)
        if process.poll() is None:
            process.kill()
        process.wait()

    def close(self) -> None:
        for name in list(self.processes):
            self.signal(name, signal.SIGCONT)
            self.kill(name)

    def admin(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
        extra = ("--controller", self.controller_addr) if self.standalone and args[0] == "reassign-broker" else ()
        return subprocess.run([sys.executable, "-m", "container", "admin", *args, "-n", self.namesrv, *extra], cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout_s)

    def controller_leader(self) -> str | None:
        """The process name of the controller members' leader (None when none answers)."""
        done = subprocess.run([sys.executable, "-m", "container", "admin", "get-controller-metadata", "--controller",
                               self.controller_addr, "--json"], cwd=ROOT, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            return None
        leader = json.loads(done.stdout).get("leaderAddress")
        addresses = [f"127.0.0.1:{port}" for port in self.controller_ports]
        return f"controller-n{addresses.index(leader)}" if leader in addresses else None

    def moves_list(self) -> dict:
        done = self.admin("reassign-broker", "--list", "--json")
        return json.loads(done.stdout) if done.returncode == 0 else {"moves": {}, "containers": []}

    def served_by(self, broker: str) -> list[str]:
        """Client endpoints cluster-list shows serving ``broker``."""
        done = self.admin("cluster-list", "--json")
        if done.returncode != 0:
            return []
        document = json.loads(done.stdout)
        rows = document if isinstance(document, list) else document.get("brokers", document.get("members", []))
        return sorted({r.get("clientEndpoint") or r.get("endpoint") for r in rows if r.get("brokerName") == broker})

    def metric(self, name: str, **labels: str) -> float:
        """A sample of the nameserver-and-controller process's /metrics (0 when absent)."""
        import urllib.request

        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in text.splitlines():
            if line.startswith(f"{name}{{{want}}} ") or (not labels and line.startswith(f"{name} ")):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    @staticmethod
    def wait_for(condition, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
            time.sleep(0.1)
