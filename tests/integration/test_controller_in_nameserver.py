"""``relaymq namesrv`` with ``enableControllerInNamesrv = true``: one process serves routes and
the controller on the same port; the admin CLI finds the leader, writes and reads through it."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metadata.data_version import DataVersion
from metadata.route_types import BrokerIdentity
from metadata.topic_config import TopicConfig, TopicTable
from proto import controller_pb2 as pb
from services.controller.client import ControllerClient
from services.nameserver.client import NameserverClient
from tests.support.container_process import free_ports
from tests.support.nameserver_process import NameserverProcess

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SUCCESS = pb.ControllerStatus.SUCCESS


def relaymq(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "container", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def embedded(tmp_path):
    """A nameserver whose single-member controller group listens on the nameserver's own port."""
    (port,) = free_ports(1)
    path = tmp_path / "namesrv.properties"
    path.write_text(f"listenPort={port}\nenableControllerInNamesrv=true\n"
                    f"controllerDLegerPeers=n0-127.0.0.1:{port}\ncontrollerDLegerSelfId=n0\n"
                    f"controllerStorePath={tmp_path / 'controller'}\n")
    process = NameserverProcess(path)
    yield process
    process.kill()


def admin(address: str, *args: str) -> dict:
    done = relaymq("admin", *args, "--controller", address, "--json")
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


def wait_for_leader(address: str, deadline_s: float = 20.0) -> dict:
    end = time.monotonic() + deadline_s
    while True:
        meta = admin(address, "get-controller-metadata")
        if meta["isLeader"] or time.monotonic() > end:
            return meta
        time.sleep(0.1)


async def register_replica(address: str) -> None:
    client = ControllerClient([address], deadline_s=20.0)
    try:
        applied = await client.call("ApplyBrokerId", pb.ApplyBrokerIdRequest(
            cluster_name="DefaultCluster", broker_name="broker-a", applied_broker_id=1,
            register_check_code="127.0.0.1:10911;1"))
        assert applied.status.code == SUCCESS, applied.status.remark
        beat = await client.call("BrokerHeartbeat", pb.BrokerHeartbeatRequest(
            cluster_name="DefaultCluster", broker_name="broker-a", broker_id=1, broker_address="127.0.0.1:10911"))
        assert beat.status.code == SUCCESS, beat.status.remark
    finally:
        await client.close()


async def route_still_served(address: str) -> list[str]:
    client = NameserverClient([address], timeout_ms=3000)
    try:
        await client.register_broker(BrokerIdentity("DefaultCluster", "broker-a", 0), "127.0.0.1:10911",
                                     "127.0.0.1:8081", TopicTable(DataVersion(0, 1, 1), {"T": TopicConfig("T", 4, 4)}))
        route = await client.query_route("T")
        return [g.broker_name for g in route.brokers]
    finally:
        await client.close()


def test_the_embedded_controller_serves_metadata_writes_and_reads(embedded):
    meta = wait_for_leader(embedded.address)
    assert meta["isLeader"] and meta["leaderId"] == "n0" and meta["leaderAddress"] == embedded.address
    assert meta["peers"] == [{"id": "n0", "address": embedded.address}]

    asyncio.run(register_replica(embedded.address))
    elected = admin(embedded.address, "elect-master", "--broker-name", "broker-a", "--broker-id", "1")
    assert elected["status"]["codeName"] == "SUCCESS", elected
    assert elected["view"]["masterBrokerId"] == 1 and elected["view"]["masterEpoch"] == 1

    sets = admin(embedded.address, "get-sync-state-set", "--broker-name", "broker-a")
    (group,) = sets["brokers"]
    assert (group["brokerName"], group["masterBrokerId"], group["syncStateSet"]) == ("broker-a", 1, [1])
    assert group["replicas"][0]["address"] == "127.0.0.1:10911"

    assert asyncio.run(route_still_served(embedded.address)) == ["broker-a"]  # the nameserver still works
    assert embedded.stop() == 0  # SIGTERM stops the nameserver and its controller cleanly
