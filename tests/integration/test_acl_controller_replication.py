"""Users and ACLs stored once in the controller, enforced by every container (issue 25).

Two containers under a nameserver with the embedded controller, authorization on, both
seeded from ``conf/secure/acl.toml``.  A user and ACL created through container 1's admin
are committed by the controller and enforced by container 2 (the official client publishes
there as that user); container 2 is killed (SIGKILL), the ACL is deleted through container
1, and container 2 refuses the user from its first call after its restart.  ``list-acl``
shows the same version on both, with the brokers that enforce it.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import shutil
import subprocess
import sys
import time
import uuid

import grpc
import pytest

from metadata.authentication import authorization_value
from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from proto import messaging_service_pb2_grpc as g
from tests.support.container_process import ROOT
from tests.support.controller_cluster import ControllerModeCluster

pytestmark = pytest.mark.integration
ADMIN = ("--access-key", "admin", "--secret-key", "admin-secret")
DRIVER = ROOT / "tests" / "support" / "official_client" / "driver.py"


def _send(endpoint: str, user: str, secret: str, topic: str) -> d.Status:
    async def body():
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        metadata = (("x-mq-client-id", f"{user}@raw"), ("x-mq-date-time", now),
                    ("authorization", authorization_value(user, secret, now)))
        message = d.Message(topic=d.Resource(name=topic), body=b"raw", system_properties=d.SystemProperties(
            message_id=uuid.uuid4().hex.upper()[:34], message_type=d.NORMAL, body_encoding=d.IDENTITY))
        async with grpc.aio.insecure_channel(endpoint) as channel:
            reply = await g.MessagingServiceStub(channel).SendMessage(s.SendMessageRequest(messages=[message]),
                                                                      metadata=metadata, timeout=10)
            return reply.status
    return asyncio.run(body())


def _wait_code(endpoint: str, user: str, secret: str, topic: str, code: int, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while (status := _send(endpoint, user, secret, topic)).code != code:
        assert time.monotonic() < deadline, f"{user} on {topic} at {endpoint}: {status}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("acl-controller")
    seed = tmp / "acl.toml"
    shutil.copy(ROOT / "conf" / "secure" / "acl.toml", seed)
    keys = {"authenticationEnabled": True, "authorizationEnabled": True, "authorizationMetadataFile": str(seed),
            "authorizationMetadataWatchIntervalMillis": 200}
    running = ControllerModeCluster(tmp, container_keys=[dict(keys), dict(keys)])
    try:
        running.start()
        running.admin_when_registered(*ADMIN, "update-topic", "--topic", "audit", "--type", "NORMAL", "-b", "broker-b")
        yield running
    finally:
        running.close()


def _list_acl(cluster: ControllerModeCluster, address: str) -> dict:
    listed = cluster.admin(*ADMIN, "list-acl", "--container", address, "--json")
    return json.loads(listed.stdout)["containers"][address]


def test_a_change_through_one_container_is_enforced_by_the_other_and_by_one_that_was_down(cluster):
    first, second = (f"127.0.0.1:{c.admin_port}" for c in cluster.containers)
    assert _send(cluster.endpoint(1), "auditor", "auditor-secret", "audit").code == d.UNAUTHORIZED

    created = cluster.admin(*ADMIN, "create-user", "-u", "auditor", "-p", "auditor-secret", "--container", first)
    assert "committed through the controller" in created.stdout, created.stdout
    granted = cluster.admin(*ADMIN, "create-acl", "-s", "User:auditor", "-r", "Topic:audit", "-a", "Pub", "-d", "Allow",
                            "--container", first)
    assert "committed through the controller" in granted.stdout, granted.stdout
    version = json.loads(cluster.admin(*ADMIN, "list-acl", "--container", first, "--json").stdout)[
        "containers"][first]["version"]

    _wait_code(cluster.endpoint(1), "auditor", "auditor-secret", "audit", d.OK)  # within a sync interval
    command = [sys.executable, str(DRIVER), "produce", "--endpoint", cluster.endpoint(1), "--topic", "audit",
               "--count", "1", "--access-key", "auditor", "--secret-key", "auditor-secret", "--deadline-s", "10"]
    official = subprocess.run(command, cwd=cluster.workdir, capture_output=True, text=True, timeout=40)
    assert official.returncode == 0 and '"event": "sent"' in official.stdout, official.stdout + official.stderr[-2000:]
    on_second = _list_acl(cluster, second)
    assert on_second["version"] == version and on_second["origin"], on_second
    (enforcer,) = on_second["enforcers"]
    assert enforcer["brokers"] == ["broker-a", "broker-b"] and enforcer["version"] == version

    cluster.kill(1)
    deleted = cluster.admin(*ADMIN, "delete-acl", "-s", "User:auditor", "--container", first)
    assert "committed through the controller" in deleted.stdout, deleted.stdout
    cluster.restart_container(1)
    # from its first call after the restart: the sync before serving fetched the new version
    assert _send(cluster.endpoint(1), "auditor", "auditor-secret", "audit").code == d.FORBIDDEN
    assert _list_acl(cluster, second)["version"] == version + 1
    controller = _list_acl(cluster, cluster.namesrv)  # the controller: each container's last report
    assert {e["container"]: e["version"] for e in controller["enforcers"]} == {first: version + 1, second: version + 1}
