"""mqadmin's everyday operations against a real container process, through the CLI."""
from __future__ import annotations

import json
import time

import pytest

from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from tests.support.container_process import ContainerProcess
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.integration
TOPIC, GROUP = "ops-topic", "ops-group"


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    container = ContainerProcess(tmp_path_factory.mktemp("ops") / "data").start()
    client = RawClient(container.endpoint)
    try:
        for args in (("update-topic", "-t", TOPIC, "--queues", "2"), ("update-group", "-g", GROUP)):
            assert admin(container, *args).returncode == 0
        deadline = time.monotonic() + 10
        while client.route(TOPIC).status.code != 20000:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        yield container, client
    finally:
        client.close()
        container.kill()


def admin(container: ContainerProcess, *args: str):
    return container.admin(*args, "--namesrv", container.namesrv)


def ok(result) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def progress(container) -> dict:
    return ok(admin(container, "consumer-progress", "-g", GROUP, "-t", TOPIC, "--json"))


def receive_all(client: RawClient, ack: bool) -> list:
    got = []
    for _ in range(6):
        batch = client.receive(GROUP, TOPIC, "broker-a", batch=32, invisible_s=30, poll_s=1)
        got += batch
        if ack:
            for message in batch:
                assert client.ack(GROUP, TOPIC, message).status.code == 20000
        if len(got) >= 10:
            break
    return got


def test_lookup_reset_skip_connections_and_config(running):
    container, client = running
    sent = [client.send(TOPIC, f"m{i}".encode(), keys=(f"order-{i}",)).entries[0].message_id for i in range(10)]
    found = ok(admin(container, "query-msg-by-id", "-t", TOPIC, "-i", sent[3], "--body-bytes", "8", "--json"))
    assert [(m["messageId"], m["body"], m["keys"]) for m in found["messages"]] == [(sent[3], "m3", "order-3")]
    assert not found["truncated"] and found["scanned"] == 10
    by_key = ok(admin(container, "query-msg-by-key", "-t", TOPIC, "-k", "order-7", "--json"))
    assert [m["messageId"] for m in by_key["messages"]] == [sent[7]]
    nothing = admin(container, "query-msg-by-key", "-t", TOPIC, "-k", "nosuch")
    assert nothing.returncode == 0 and "no message found" in nothing.stdout and "(the whole topic)" in nothing.stdout

    assert len(receive_all(client, ack=True)) == 10
    assert progress(container)["totalLag"] == 0
    rewound = ok(admin(container, "reset-offset-by-time", "-g", GROUP, "-t", TOPIC, "-s", "0", "--json"))
    assert sorted(q["newOffset"] for q in rewound["brokers"][0]["queues"]) == [0, 0]
    assert progress(container)["totalLag"] == 10
    assert len(receive_all(client, ack=False)) == 10  # delivered again after the rewind
    skipped = ok(admin(container, "skip-accumulated-message", "-g", GROUP, "-t", TOPIC, "--json"))
    assert sum(q["newOffset"] for q in skipped["brokers"][0]["queues"]) == 10
    assert progress(container)["totalLag"] == 0

    client.stub.Heartbeat(s.HeartbeatRequest(group=d.Resource(name=GROUP), client_type=d.SIMPLE_CONSUMER),
                          metadata=client.metadata, timeout=5)
    producer = RawClient(container.endpoint)
    settings = d.Settings(client_type=d.PRODUCER, publishing=d.Publishing(topics=[d.Resource(name=TOPIC)]))
    list(producer.stub.Telemetry(iter([s.TelemetryCommand(settings=settings)]), metadata=producer.metadata, timeout=5))
    producer.close()
    consumers = ok(admin(container, "consumer-connection", "-g", GROUP, "--json"))
    assert [c["clientId"] for c in consumers["clients"]] == [client.metadata[0][1]]
    producers = ok(admin(container, "producer-connection", "-t", TOPIC, "--json"))
    assert [(c["clientId"], c["clientType"]) for c in producers["clients"]] == [(producer.metadata[0][1], "PRODUCER")]


def test_broker_config_get_update_and_refusals(running):
    container, _ = running
    config = {e["key"]: e for e in ok(admin(container, "get-broker-config", "-b", "broker-a", "--json"))["config"]}
    assert config["popScanMax"]["live"] and config["popScanMax"]["value"] == "256" and not config["brokerRole"]["live"]
    changed = ok(admin(container, "update-broker-config", "-b", "broker-a", "-k", "popScanMax", "-v", "512", "--json"))
    assert changed["changed"] == [{"key": "popScanMax", "value": "512", "unit": "messages", "live": True}]
    again = {e["key"]: e for e in ok(admin(container, "get-broker-config", "-b", "broker-a", "--json"))["config"]}
    assert again["popScanMax"]["value"] == "512"
    restart = admin(container, "update-broker-config", "-b", "broker-a", "-k", "brokerRole", "-v", "SLAVE")
    assert restart.returncode == 1 and "NOT_LIVE: brokerRole exists but takes effect only at a restart" in restart.stderr
    bad = admin(container, "update-broker-config", "-b", "broker-a", "-k", "popScanMax", "-v", "0")
    assert bad.returncode == 1 and "BAD_CONFIG_VALUE" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_unknown_names_are_errors(running):
    container, _ = running
    group = admin(container, "consumer-progress", "-g", "nosuch")
    assert group.returncode == 1 and "consumer group nosuch does not exist" in group.stderr
    topic = admin(container, "topic-status", "-t", "nosuch")
    assert topic.returncode == 1 and "topic nosuch does not exist" in topic.stderr
    cluster = admin(container, "cluster-list", "-c", "NoSuchCluster")
    assert cluster.returncode == 1 and "cluster NoSuchCluster is not registered" in cluster.stderr
    reset = admin(container, "reset-offset-by-time", "-g", "nosuch", "-t", TOPIC, "-s", "now")
    assert reset.returncode == 1 and "CONSUMER_GROUP_NOT_FOUND" in reset.stderr
