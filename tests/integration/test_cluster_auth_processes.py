"""Real processes: a nameserver with its controller and two containers, all given
clusterAuthenticationSecretFile.  The container holding the cluster's secret registers at the
nameserver and the controller; the one holding another secret is refused at both (and the
nameserver logs who), and `relaymq admin` reaches the cluster only with the secret file."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from metadata.cluster_auth import parse_secret
from proto import controller_pb2 as pb
from services import cluster_auth
from services.controller.client import ControllerClient
from tests.support.container_process import ContainerProcess, free_ports
from tests.support.nameserver_process import NameserverProcess

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SECRET = "the-right-cluster-secret-01\n"
WRONG = "another-cluster-secret-0002\n"


def relaymq_admin(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "container", "admin", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env=env)


def broker(name: str, controller: str) -> dict:
    return {"brokerName": name, "enableControllerMode": True, "controllerAddr": controller,
            "controllerHeartBeatTimeoutMills": 3000}


async def sync_state(address: str, names: list[str]) -> dict[str, int]:
    """Each named group's master broker id at the controller (the group absent: unknown there)."""
    client = ControllerClient([address], deadline_s=10.0)
    try:
        reply = await client.call("GetSyncStateData", pb.GetSyncStateDataRequest(broker_names=names))
    finally:
        await client.close()
    return {g.view.broker_name: g.view.master_broker_id for g in reply.groups if g.view.broker_name}


def test_only_the_container_holding_the_cluster_secret_registers_at_the_nameserver_and_controller(tmp_path):
    (tmp_path / "cluster.secret").write_text(SECRET)
    (tmp_path / "wrong.secret").write_text(WRONG)
    (port,) = free_ports(1)
    address = f"127.0.0.1:{port}"
    path = tmp_path / "namesrv.properties"
    path.write_text(f"listenPort={port}\nenableControllerInNamesrv=true\ncontrollerDLegerPeers=n0-{address}\n"
                    f"controllerDLegerSelfId=n0\ncontrollerStorePath={tmp_path / 'controller'}\n"
                    f"clusterAuthenticationSecretFile={tmp_path / 'cluster.secret'}\n")
    nameserver = NameserverProcess(path)
    right = ContainerProcess(tmp_path / "right", brokers=[broker("broker-a", address)], embedded_namesrv=False,
                             namesrv_port=port, extra={"clusterAuthenticationSecretFile": str(tmp_path / "cluster.secret")})
    wrong = ContainerProcess(tmp_path / "wrong", brokers=[broker("broker-b", address)], embedded_namesrv=False,
                             namesrv_port=port, extra={"clusterAuthenticationSecretFile": str(tmp_path / "wrong.secret")})
    cluster_auth.install(cluster_auth.ClusterCredential(parse_secret(SECRET)))  # this test reads as a member
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda process: process.start(), (right, wrong)))
        deadline = time.monotonic() + 20
        while (masters := asyncio.run(sync_state(address, ["broker-a", "broker-b"]))).get("broker-a", -1) < 0:
            assert time.monotonic() < deadline, masters
            time.sleep(0.2)
        listed = relaymq_admin("--cluster-secret-file", str(tmp_path / "cluster.secret"), "cluster-list", "-n", address,
                               "--json")
        assert listed.returncode == 0, listed.stderr
        names = {row.get("brokerName") for row in json.loads(listed.stdout).get("brokers", [])}
        assert "broker-a" in names and "broker-b" not in names, listed.stdout
        assert "broker-b" not in asyncio.run(sync_state(address, ["broker-a", "broker-b"]))
        outsider = relaymq_admin("cluster-list", "-n", address)
        assert outsider.returncode == 1 and "cluster authentication failed: MISSING" in outsider.stderr, outsider.stderr
        assert "--cluster-secret-file" in outsider.stderr
        assert "UNAUTHENTICATED" in wrong.log_path.read_text()
    finally:
        cluster_auth.install(None)
        for process in (right, wrong):
            process.kill()
        nameserver.kill()
    log = nameserver.process.stderr.read()
    assert "cluster authentication: refused /relaymq.internal.v1.NameserverService/" in log, log[-3000:]
    assert "BAD_SIGNATURE" in log
