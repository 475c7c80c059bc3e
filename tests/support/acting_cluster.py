"""The acting-master deployment for tests and benchmarks, on free loopback ports.

Like ``conf/acting-master``: a standalone nameserver with ``supportActingMaster`` and
``notifyMinBrokerIdChanged``, and containers hosting fixed-role replicas with
``enableSlaveActingMaster``, SYNC_MASTER with ``totalReplicas = 2``, ``inSyncReplicas = 2``,
``minInSyncReplicas = 1``, ``enableAutoInSyncReplicas``, SYNC_FLUSH, and each replica on its
own endpoint (listenPort).  The default layout is the conf's: container 0 hosts broker-a's
master and broker-b's slave, container 1 the other way round.  Every process is real;
``kill`` sends SIGKILL.  Logs go to files under the working directory.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.support.container_process import ROOT, ContainerProcess, free_ports
from tests.support.controller_cluster import _spawn

CONF_LAYOUT = (("broker-a", 0), ("broker-b", 1)), (("broker-b", 0), ("broker-a", 1))
BROKER_KEYS = {"enableSlaveActingMaster": True, "flushDiskType": "SYNC_FLUSH", "totalReplicas": 2,
               "inSyncReplicas": 2, "minInSyncReplicas": 1, "enableAutoInSyncReplicas": True,
               "haSendHeartbeatInterval": 500, "haHousekeepingInterval": 3000, "haConnectRetryInterval": 300,
               "syncBrokerMemberGroupPeriod": 500, "slaveSynchronizePeriod": 1000}


class ActingCluster:
    def __init__(self, workdir: Path, layout=CONF_LAYOUT, broker_keys: dict | None = None,
                 not_active_timeout_ms: int = 2000):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.layout = [tuple(container) for container in layout]
        self.broker_keys = {**BROKER_KEYS, **(broker_keys or {})}
        self.not_active_timeout_ms = not_active_timeout_ms
        (self.namesrv_port,) = free_ports(1)
        self.listen_ports = self._listen_ports()
        self.namesrv_process: subprocess.Popen | None = None
        self.containers: list[ContainerProcess] = []

    def _listen_ports(self) -> list[list[int]]:
        """Each replica's own endpoint; in each group the master's port is the smallest, as in
        conf/acting-master (the official client sorts a broker's addresses and connects to the
        first: its streams for a group then go to the master's container directly)."""
        replicas = [(name, broker_id, index, position) for index, container in enumerate(self.layout)
                    for position, (name, broker_id) in enumerate(container)]
        ports = [[0] * len(container) for container in self.layout]
        for name in sorted({r[0] for r in replicas}):
            members = sorted((r for r in replicas if r[0] == name), key=lambda r: r[1])
            for (_, _, index, position), port in zip(members, sorted(free_ports(len(members)))):
                ports[index][position] = port
        return ports

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    def _broker(self, index: int, position: int) -> dict:
        name, broker_id = self.layout[index][position]
        return {"brokerName": name, "brokerId": broker_id, "brokerRole": "SYNC_MASTER" if broker_id == 0 else "SLAVE",
                "listenPort": self.listen_ports[index][position], **self.broker_keys}

    def start(self) -> "ActingCluster":
        """Everything up, or everything it started killed again (nothing leaks into later tests)."""
        try:
            path = self.workdir / "namesrv.toml"
            path.write_text(f"listenPort = {self.namesrv_port}\nsupportActingMaster = true\n"
                            f"notifyMinBrokerIdChanged = true\nscanNotActiveBrokerInterval = 200\n")
            self.namesrv_process = _spawn(["namesrv", "-c", str(path)], self.workdir / "namesrv.log", b"listening")
            for index in range(len(self.layout)):
                container = ContainerProcess(self.workdir / f"container-{index + 1}",
                                             brokers=[self._broker(index, p) for p in range(len(self.layout[index]))],
                                             embedded_namesrv=False, namesrv_port=self.namesrv_port,
                                             extra={"brokerHeartbeatInterval": 300,
                                                    "brokerNotActiveTimeoutMillis": self.not_active_timeout_ms})
                self.containers.append(container)
                container.start()
            for name in sorted({n for container in self.layout for n, i in container if i == 0}):
                self.wait_for(lambda name=name: 0 in self.members(name), 30, f"{name}'s master registered")
        except BaseException:
            self.close()
            raise
        return self

    def restart(self, index: int) -> None:
        self.containers[index].start()

    def kill(self, index: int) -> None:
        self.containers[index].kill()

    def close(self) -> None:
        for container in self.containers:
            container.kill()
        if self.namesrv_process is not None and self.namesrv_process.poll() is None:
            self.namesrv_process.kill()
            self.namesrv_process.wait()

    def endpoint(self, index: int) -> str:
        return self.containers[index].endpoint

    # --- what the cluster says ---------------------------------------------------------------
    def admin(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "container", "admin", *args, "-n", self.namesrv], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert not check or done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    def members(self, broker: str) -> dict[int, str]:
        done = self.admin("broker-member-group", "--broker", broker, "--json", check=False)
        if done.returncode != 0:
            return {}
        return {int(k): v for k, v in json.loads(done.stdout)["brokerAddrs"].items()}

    def broker_status(self, index: int, broker: str) -> dict | None:
        container = self.containers[index]
        done = subprocess.run([sys.executable, "-m", "container", "admin", "broker-status", "--container",
                               f"127.0.0.1:{container.admin_port}", "--json"], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        if done.returncode != 0:
            return None
        return next((b["status"] for b in json.loads(done.stdout)["brokers"] if b["brokerName"] == broker), None)

    def special_running(self, index: int, broker: str) -> bool:
        status = self.broker_status(index, broker)
        return bool(status and status["specialServicesRunning"])

    @staticmethod
    def wait_for(condition, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, f"not within {timeout_s}s: {what}"
            time.sleep(0.1)
