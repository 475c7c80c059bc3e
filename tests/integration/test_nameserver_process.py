"""A real nameserver process: fake brokers register over gRPC, one stops heart-beating and expires."""
from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metadata.data_version import DataVersion
from metadata.route_types import BrokerIdentity
from metadata.topic_config import TopicConfig, TopicTable
from services.nameserver.client import NameserverClient
from tests.support.nameserver_process import NameserverProcess

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def relaymq(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "container", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def nameserver(tmp_path):
    path = tmp_path / "namesrv.properties"
    path.write_text("listenPort=0\nscanNotActiveBrokerInterval=100\nbrokerChannelExpiredTime=60000\n")
    process = NameserverProcess(path)
    yield process
    if process.process.poll() is None:
        process.process.kill()
        process.process.wait()


def topics(*names: str) -> TopicTable:
    return TopicTable(DataVersion(0, 1, 1), {n: TopicConfig(n, 4, 4) for n in names})


async def poll(predicate, deadline_s: float = 15.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        result = await predicate()
        if result:
            return result
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached before the deadline")


def test_brokers_register_route_and_a_silent_broker_expires(nameserver):
    a, b = BrokerIdentity("DefaultCluster", "broker-a", 0), BrokerIdentity("DefaultCluster", "broker-b", 0)

    async def scenario():
        client = NameserverClient([nameserver.address], timeout_ms=3000)
        try:
            await client.register_broker(a, "127.0.0.1:10911", "127.0.0.1:8081", topics("T"), heartbeat_timeout_ms=300)
            await client.register_broker(b, "127.0.0.1:20911", "127.0.0.1:8082", topics("T", "U"))
            route = await client.query_route("T")
            assert sorted(g.broker_name for g in route.brokers) == ["broker-a", "broker-b"]
            assert await client.query_route("Nope") is None
            assert not await client.heartbeat(b, DataVersion(0, 1, 1))

            async def a_gone():
                route = await client.query_route("T")
                return [g.broker_name for g in route.brokers] == ["broker-b"]
            await poll(a_gone)  # broker-a stopped heart-beating: expired after 300 ms + a scan
            assert await client.heartbeat(a)  # unknown now: asked to register again
        finally:
            await client.close()
    asyncio.run(scenario())
    listed = relaymq("admin", "cluster-list", "--namesrv", nameserver.address, "--json")
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    assert [(m["brokerName"], m["topicCount"]) for m in document["brokers"]] == [("broker-b", 2)]
    assert document["clusters"] == {"DefaultCluster": ["broker-b"]}
    route = relaymq("admin", "topic-route", "--topic", "U", "--namesrv", nameserver.address, "--json")
    assert json.loads(route.stdout)["brokerDatas"][0]["clientEndpoints"] == {"0": "127.0.0.1:8082"}
    missing = relaymq("admin", "topic-route", "--topic", "Nope", "--namesrv", nameserver.address, "--json")
    assert missing.returncode == 1 and missing.stderr.strip() == (
        f"relaymq: topic Nope does not exist: no broker serves it (nameserver {nameserver.address})")
    assert nameserver.stop() == 0


def test_a_busy_port_and_a_bad_key_are_one_line_naming_file_and_key(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        path = tmp_path / "ns.properties"
        path.write_text(f"listenPort={busy.getsockname()[1]}\n")
        result = relaymq("namesrv", "-c", str(path))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("relaymq:")]
    assert len(lines) == 1 and str(path) in lines[0] and "listenPort" in lines[0], result.stderr
    bad = tmp_path / "bad.properties"
    bad.write_text("scanNotActiveBrokerInterval=soon\n")
    result = relaymq("namesrv", "-c", str(bad))
    assert result.returncode == 2
    assert result.stderr.strip() == f"relaymq: {bad}: scanNotActiveBrokerInterval: 'soon' is not an integer"
