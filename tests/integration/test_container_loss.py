"""One container of a two-container cluster SIGKILLed: writes go on, admin queries name the
missing replicas and the stranded lag, and the metrics show the slave gone.

The brokers use the replication keys of the shipped ``conf/2container`` files, so this is
also the check that that deployment survives the loss of a container.
"""
from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from container.config_loader import load_config_file
from tests.support.container_process import free_port
from tests.support.ha_pair import HaPair, wait_until
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
TOPIC, GROUP = "loss", "loss-group"
GONE = ("UNREACHABLE", "NOT_REGISTERED")


def shipped_replication_keys() -> dict:
    master = load_config_file(ROOT / "conf" / "2container" / "container-1.toml")["broker"][0]
    return {k: v for k, v in master.items() if k in ("inSyncReplicas", "minInSyncReplicas", "enableAutoInSyncReplicas",
                                                     "totalReplicas")}


def metric(port: int, name: str, **labels: str) -> float | None:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return None


@pytest.fixture
def pair(tmp_path):
    keys = shipped_replication_keys()
    assert keys["enableAutoInSyncReplicas"] is True and keys["minInSyncReplicas"] == 1
    running = HaPair(tmp_path, extra={**keys, "slaveSynchronizePeriod": 500})
    for container in running.containers:
        container.extra["metricsPromExporterPort"] = free_port()
    running.start()
    yield running
    running.close()


def admin(pair: HaPair, *args: str) -> dict:
    result = pair.containers[0].admin(*args, "--namesrv", pair.nameserver.address, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def send(endpoint: str, count: int) -> int:
    client = RawClient(endpoint)
    try:
        return sum(client.send(TOPIC, b"x" * 100, timeout=10).status.code == 20000 for _ in range(count))
    finally:
        client.close()


def test_one_container_killed(pair):
    first, second = pair.containers
    metrics_port = first.extra["metricsPromExporterPort"]
    pair.update_topic(TOPIC, queues=2)
    assert first.admin("update-group", "-g", GROUP, "--namesrv", pair.nameserver.address).returncode == 0
    wait_until(lambda: pair.slave_connected("broker-a") and pair.slave_connected("broker-b"), what="slaves connected")
    assert send(second.endpoint, 20) == 20  # to broker-b, whose master dies below
    wait_until(lambda: pair.caught_up("broker-b"), what="broker-b's slave caught up")
    wait_until(lambda: admin(pair, "consumer-progress", "-g", GROUP, "-t", TOPIC)["totalLag"] == 20, what="group synced")
    assert metric(metrics_port, "relaymq_replication_slave_connected", broker="broker-a", slave_id="1") == 1
    assert metric(metrics_port, "relaymq_replication_master_connected", broker="broker-b", broker_id="1") == 1
    assert metric(metrics_port, "relaymq_broker_role", broker="broker-b", broker_id="1", role="SLAVE") == 1

    second.kill()

    wait_until(lambda: metric(metrics_port, "relaymq_replication_slave_connected", broker="broker-a", slave_id="1") == 0,
               what="slave_connected to drop")
    wait_until(lambda: metric(metrics_port, "relaymq_replication_master_connected", broker="broker-b", broker_id="1") == 0,
               what="master_connected to drop")
    assert send(first.endpoint, 10) == 10  # broker-a takes writes with its slave gone
    reader = RawClient(first.endpoint)
    try:  # and its consumers read them: the closed slave left the SyncStateSet, the confirm offset moves
        got = wait_until(lambda: reader.receive(GROUP, TOPIC, "broker-a", poll_s=1), timeout_s=10, what="messages readable")
        assert got
    finally:
        reader.close()

    progress = admin(pair, "consumer-progress", "-g", GROUP, "-t", TOPIC)
    groups = {g["brokerName"]: g for g in progress["groups"]}
    assert groups["broker-b"]["master"] in GONE and groups["broker-b"]["source"] == "slave 1"
    assert progress["strandedLag"] == 20 and progress["totalLag"] == 30 and not progress["complete"]
    text = first.admin("consumer-progress", "-g", GROUP, "-t", TOPIC, "--namesrv", pair.nameserver.address).stdout
    assert "20 messages stranded there (read from slave 1" in text and "total lag: 30" in text

    status = admin(pair, "topic-status", "-t", TOPIC)
    replicas = {(g["brokerName"], r["brokerId"]): r["state"] for g in status["groups"] for r in g["replicas"]}
    assert replicas[("broker-b", 0)] in GONE and replicas[("broker-a", 1)] in GONE
    assert replicas[("broker-a", 0)] == replicas[("broker-b", 1)] == "OK"
    assert {b["brokerName"] for b in status["brokers"]} == {"broker-a", "broker-b"}  # broker-b read from its slave
    ha = {g["brokerName"]: g for g in admin(pair, "ha-status")["groups"]}
    assert ha["broker-b"]["master"]["state"] in GONE and not ha["broker-b"]["servable"]
    listed = admin(pair, "cluster-list")
    assert not listed["complete"]
