"""Two real containers hosting two broker groups crosswise, plus a standalone nameserver.

Container 1 hosts broker-a's master and broker-b's slave, container 2 the reverse, as in
``conf/2container``; every process is real and can be SIGKILLed.  Helpers read each
replica's commit log from disk, so tests compare bytes, not what a broker claims.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from tests.support.container_process import ContainerProcess
from tests.support.nameserver_process import NameserverProcess, start_nameserver


def broker_entries(master: str, slave: str, role: str, flush: str, extra: dict) -> list[dict]:
    common = {"flushDiskType": flush, "totalReplicas": 2, "inSyncReplicas": 2 if role == "SYNC_MASTER" else 1,
              "haSendHeartbeatInterval": 1000, **extra}
    return [{"brokerName": master, "brokerId": 0, "brokerRole": role, **common},
            {"brokerName": slave, "brokerId": 1, "brokerRole": "SLAVE", **common}]


class HaPair:
    def __init__(self, root: Path, role: str = "SYNC_MASTER", flush: str = "SYNC_FLUSH", extra: dict | None = None):
        self.root = root
        self.nameserver: NameserverProcess = start_nameserver(root / "namesrv")
        extra = extra or {}
        self.containers = [
            ContainerProcess(root / f"container-{i}", brokers=broker_entries(m, s, role, flush, extra),
                             embedded_namesrv=False, namesrv_port=self.nameserver.port)
            for i, (m, s) in ((1, ("broker-a", "broker-b")), (2, ("broker-b", "broker-a")))]

    def start(self) -> "HaPair":
        for container in self.containers:
            container.start()
        return self

    def slave_connected(self, broker: str) -> bool:
        slaves = self.ha_status(broker)["slaves"]
        return bool(slaves) and slaves[0]["connected"]

    def caught_up(self, broker: str) -> bool:
        status = self.ha_status(broker)
        master, slaves = status["master"], status["slaves"]
        return bool(master and "maxOffset" in master and slaves and slaves[0]["ackOffset"] == master["maxOffset"]
                    and slaves[0]["maxOffset"] == master["maxOffset"])

    def close(self) -> None:
        for container in self.containers:
            container.kill()
        self.nameserver.kill()

    def master_of(self, broker: str) -> ContainerProcess:
        return self.containers[0] if broker == "broker-a" else self.containers[1]

    def slave_of(self, broker: str) -> ContainerProcess:
        return self.containers[1] if broker == "broker-a" else self.containers[0]

    def commit_log(self, broker: str, replica: str) -> tuple[int, bytes]:
        """(min offset, bytes) of one replica's commit log read from its files, without the zeros a
        master keeps written past its data (store.commit_log; the tests' records end non-zero)."""
        container = self.master_of(broker) if replica == "master" else self.slave_of(broker)
        directory = container.data_dir / f"{broker}-{0 if replica == 'master' else 1}" / "commitlog"
        files = sorted(p for p in directory.iterdir() if p.name.isdigit()) if directory.exists() else []
        if not files:
            return 0, b""
        return int(files[0].name), b"".join(p.read_bytes() for p in files).rstrip(b"\x00")

    def ha_status(self, broker: str) -> dict:
        result = self.containers[0].admin("ha-status", "--broker", broker, "--namesrv", self.nameserver.address, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)["groups"][0]

    def update_topic(self, topic: str, queues: int = 4, broker: str | None = None) -> None:
        only = ("--broker", broker) if broker else ()
        result = self.containers[0].admin("update-topic", "--topic", topic, "--type", "NORMAL", "--queues", str(queues),
                                          "--namesrv", self.nameserver.address, *only)
        assert result.returncode == 0, result.stderr


def wait_until(predicate, timeout_s: float = 30.0, interval_s: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
