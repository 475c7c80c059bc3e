"""A broker on shared storage (issue 26), with real container processes and the official client:
the first container to open the store claims it and the other does not serve it; when the
owner is stopped (SIGSTOP) mid-load and the other takes the store over, the woken owner
acknowledges nothing more and drops the broker, and every message the producer saw
acknowledged is consumed from the new owner.

The takeover is done here by the test (store.takeover, as the new owner's container does it when
the controller asks: docs/reassign.md, tests/integration/test_reassign.py), so that the old owner
is caught exactly where it stands; the new owner's container then restarts and opens the store
as its owner."""
from __future__ import annotations

import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from store.config import StoreConfig
from store.ownership_files import read_ledger
from store.takeover import take_over
from tests.support.container_process import ContainerProcess, free_ports
from tests.support.failover_load import Client, drain, wait_started, stop_together
from tests.support.nameserver_process import start_nameserver

pytestmark = [pytest.mark.integration, pytest.mark.conformance]


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {what}"
        time.sleep(0.05)


def _sent(metrics_port: int) -> float:
    """What a container says it accepted for broker-a (``relaymq_messages_sent``, every topic)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("relaymq_messages_sent_total{") and 'broker="broker-a"' in line)


def _acked(producer: Client) -> int:
    return sum(1 for e in producer.snapshot() if e["event"] == "ack")


@pytest.mark.parametrize("owner_state", ["stopped", "running"])
def test_an_owner_taken_over_acknowledges_nothing_more_and_loses_nothing(tmp_path: Path, owner_state: str):
    """``stopped``: SIGSTOP during the takeover, woken after it (its sends in flight complete
    then); ``running``: never stopped (a partitioned owner that hears of no move), so every
    put it takes after the takeover's scan must be refused by its own check of the claims."""
    nameserver = start_nameserver(tmp_path / "namesrv")
    shared = tmp_path / "shared-store" / "broker-a"
    broker = {"brokerName": "broker-a", "storePathRootDir": str(shared), "sharedStorage": True,
              "flushDiskType": "SYNC_FLUSH"}
    metrics_port, = free_ports(1)
    containers = [ContainerProcess(tmp_path / name, brokers=[broker], embedded_namesrv=False, namesrv_port=nameserver.port,
                                   extra={"metricsPromExporterPort": metrics_port} if name == "container-1" else {})
                  for name in ("container-1", "container-2")]
    owner, other = containers
    clients: list[Client] = []
    try:
        owner.start()
        other.start()
        assert "not served here" in other.log_path.read_text() and "owned by 127.0.0.1:" in other.log_path.read_text()
        assert read_ledger(shared).newest.owner == owner.endpoint
        created = owner.admin("update-topic", "--topic", "normal", "--type", "NORMAL", "-n", nameserver.address)
        assert created.returncode == 0, created.stdout + created.stderr
        producer = Client("produce", "--endpoint", owner.endpoint, "--topic", "normal", "--rate", "300",
                          "--seconds", "600", log_path=tmp_path / "producer.log")
        clients.append(producer)
        wait_started(producer)
        _wait(lambda: _acked(producer) > 600, 30, "the load runs")

        if owner_state == "stopped":
            os.kill(owner.process.pid, signal.SIGSTOP)  # hung with its files open and sends in flight
        taken = take_over(StoreConfig(store_path_root_dir=shared), other.endpoint, 2)
        other.stop()
        before = len(other.log_path.read_text())
        other.start()  # opens broker-a as its owner now
        restarted = other.log_path.read_text()[before:]
        assert "not served here" not in restarted and "brokers broker-a#0" in restarted, restarted[-2000:]
        if owner_state == "stopped":
            os.kill(owner.process.pid, signal.SIGCONT)
        _wait(lambda: "no longer served here" in owner.log_path.read_text(), 15, "the woken owner drops broker-a")
        # The producer's routes now lead to the new owner, whose acknowledgements are welcome: it is
        # the old owner that must accept nothing more, so it is asked (its /metrics). A put appended
        # before the stop may still be counted as it wakes, racing the drop's log line (its message
        # is inside the sealed end: the lost count below checks it), so the first sample waits.
        time.sleep(0.5)
        accepted_after_drop = _sent(metrics_port)
        assert accepted_after_drop > 600, "the old owner's /metrics count what it accepted before the move"
        acked_after_drop = _acked(producer)
        time.sleep(1.0)
        assert _sent(metrics_port) == accepted_after_drop, "the old owner accepted puts after it was fenced and dropped"
        _wait(lambda: _acked(producer) > acked_after_drop + 100, 30, "the new owner acknowledges the producer's sends")
        producer.stop()

        consumer = Client("consume", "--endpoint", other.endpoint, "--topic", "normal", "--group", "after-move",
                          "--seconds", "600", log_path=tmp_path / "consumer.log")
        clients.append(consumer)
        counts = drain([consumer], [producer], 60)
        assert counts.lost == set(), f"{len(counts.lost)} acknowledged messages are not in the new owner's store"
        assert taken.sealed_end > 0 and taken.starts_at >= taken.sealed_end
        print(f"acked {len(counts.acked)}, consumed {len(counts.consumed)}, duplicates {counts.duplicates}",
              file=sys.stderr)
    finally:
        stop_together(*clients)
        for container in containers:
            if container.process is not None and container.process.poll() is None:
                os.kill(container.process.pid, signal.SIGCONT)
            container.kill()
        nameserver.kill()
