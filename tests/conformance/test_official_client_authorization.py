"""Authorization end to end: the official Python client and ``relaymq admin`` against a real
container configured as ``conf/secure`` (its acl.toml, free ports instead of the fixed ones).

producer1 may publish to ``orders`` and nowhere else; consumer1 may consume ``orders`` as
group ``billing`` and may not publish; admin calls need the admin's signature; the user and
ACL commands change the watched file; a bad edit of it keeps the last good version.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import pytest

from metadata.authentication import authorization_value
from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from proto import messaging_service_pb2_grpc as g
from tests.support.container_process import ROOT, ContainerProcess

pytestmark = pytest.mark.conformance
DRIVER = ROOT / "tests" / "support" / "official_client" / "driver.py"
ADMIN = ("--access-key", "admin", "--secret-key", "admin-secret")


class Secured:
    def __init__(self, container: ContainerProcess, acl: Path, workdir: Path):
        self.container, self.acl, self.workdir = container, acl, workdir

    def drive(self, user: str, scenario: str, *args: str) -> tuple[int, list[dict]]:
        command = [sys.executable, str(DRIVER), scenario, "--endpoint", self.container.endpoint, "--access-key", user,
                   "--secret-key", f"{user}-secret", "--deadline-s", "10", *args]
        result = subprocess.run(command, cwd=self.workdir, capture_output=True, text=True, timeout=40)
        events = [json.loads(line[2:]) for line in result.stdout.splitlines() if line.startswith("@@")]
        assert result.returncode in (0, 2, 3), f"driver crashed ({result.returncode}): {result.stderr[-3000:]}"
        return result.returncode, events

    def admin(self, *args: str, credentials: tuple[str, ...] = ADMIN) -> subprocess.CompletedProcess:
        return self.container.admin(*credentials, *args, "--namesrv", self.container.namesrv)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("conformance-authz")
    acl = tmp / "acl.toml"
    shutil.copy(ROOT / "conf" / "secure" / "acl.toml", acl)
    container = ContainerProcess(tmp / "data", extra={
        "authenticationEnabled": True, "authorizationEnabled": True, "authorizationMetadataFile": str(acl),
        "authorizationMetadataWatchIntervalMillis": 200,
        "minInvisibleTimeMillsForRecv": 1000, "grpcClientConsumerMinLongPollingTimeoutMillis": 1000}).start()
    target = Secured(container, acl, tmp)
    try:
        deadline = time.monotonic() + 30
        for topic in ("orders", "other"):
            while target.admin("update-topic", "--topic", topic, "--type", "NORMAL").returncode:
                assert time.monotonic() < deadline, "topic not created"
                time.sleep(0.2)
        yield target
    finally:
        container.stop()


def _events(events, kind):
    return [e for e in events if e["event"] == kind]


def _refused(events, code: str) -> bool:
    error = _events(events, "error")
    return bool(error) and any(code in line or "Forbidden" in line for line in error[0]["client_errors"] + [error[0].get("error", "")])


def test_admin_calls_need_the_admins_signature(secured):
    anonymous = secured.admin("update-topic", "--topic", "orders", "--type", "NORMAL", credentials=())
    assert anonymous.returncode == 1 and "UNAUTHORIZED" in anonymous.stderr, anonymous.stderr
    assert "--access-key" in anonymous.stderr  # the hint
    producer = secured.admin("update-topic", "--topic", "orders", "--type", "NORMAL",
                             credentials=("--access-key", "producer1", "--secret-key", "producer1-secret"))
    assert producer.returncode == 1 and "FORBIDDEN: User:producer1 may not Create on Topic:orders" in producer.stderr
    half = secured.admin("list-acl", credentials=("--access-key", "admin"))
    assert half.returncode == 2 and "--secret-key" in half.stderr and "Traceback" not in half.stderr


def test_producer1_publishes_to_orders_and_nowhere_else(secured):
    code, events = secured.drive("producer1", "produce", "--topic", "orders", "--count", "2", "--prefix", "p1-")
    assert code == 0 and len(_events(events, "sent")) == 2, events
    code, events = secured.drive("producer1", "produce", "--topic", "other", "--count", "1")
    assert code == 3 and not _events(events, "sent") and _refused(events, "40300"), events


def test_consumer1_consumes_orders_as_billing_and_may_not_publish(secured):
    code, events = secured.drive("consumer1", "simple", "--topic", "orders", "--group", "billing", "--expect", "2")
    assert code == 0 and {e["body"] for e in _events(events, "acked")} >= {"p1-0", "p1-1"}, events
    code, events = secured.drive("consumer1", "produce", "--topic", "orders", "--count", "1")
    assert code == 3 and not _events(events, "sent") and _refused(events, "40300"), events


def _send_status(container: ContainerProcess, user: str, topic: str) -> d.Status:
    async def body():
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        metadata = (("x-mq-client-id", f"{user}@raw"), ("x-mq-date-time", now),
                    ("authorization", authorization_value(user, f"{user}-secret", now)))
        message = d.Message(topic=d.Resource(name=topic), body=b"raw", system_properties=d.SystemProperties(
            message_id=uuid.uuid4().hex.upper()[:34], message_type=d.NORMAL, body_encoding=d.IDENTITY))
        async with grpc.aio.insecure_channel(container.endpoint) as channel:
            reply = await g.MessagingServiceStub(channel).SendMessage(s.SendMessageRequest(messages=[message]),
                                                                      metadata=metadata, timeout=10)
            return reply.status
    return asyncio.run(body())


def _version(secured) -> int:
    listed = secured.admin("list-acl", "--json")
    assert listed.returncode == 0, listed.stderr
    (container,) = json.loads(listed.stdout)["containers"].values()
    return container["version"]


def test_acl_commands_change_the_watched_file_and_a_bad_edit_keeps_the_last_good_version(secured):
    assert _send_status(secured.container, "producer1", "other").code == d.FORBIDDEN
    start = _version(secured)
    granted = secured.admin("create-acl", "-s", "User:producer1", "-r", "Topic:other", "-a", "Pub", "-d", "Allow")
    assert granted.returncode == 0 and f"(version {start + 1})" in granted.stdout, granted.stderr
    assert "Topic:other" in secured.acl.read_text()
    assert _send_status(secured.container, "producer1", "other").code == d.OK
    created = secured.admin("create-user", "-u", "auditor", "-p", "auditor-secret")
    assert created.returncode == 0 and _version(secured) == start + 2
    shown = secured.admin("get-user", "-u", "auditor", "--json")
    assert '"username": "auditor"' in shown.stdout and "auditor-secret" not in shown.stdout

    good = secured.acl.read_text()
    edited = secured.acl.with_suffix(".edit")
    edited.write_text(good.replace('"Topic:other"', '"Topic:other"]\nbroken = ['))  # not TOML any more
    os.replace(edited, secured.acl)
    time.sleep(1.0)  # several watch rounds
    assert _version(secured) == start + 2 and _send_status(secured.container, "producer1", "other").code == d.OK
    assert "stays enforced" in secured.container.log_path.read_text()
    refused = secured.admin("delete-user", "-u", "auditor")
    assert refused.returncode == 1 and "ACL_FILE_BAD" in refused.stdout + refused.stderr

    edited.write_text(good.replace('"Topic:other"', '"Topic:elsewhere"'))
    os.replace(edited, secured.acl)
    deadline = time.monotonic() + 5
    while _send_status(secured.container, "producer1", "other").code != d.FORBIDDEN:
        assert time.monotonic() < deadline, "the good edit was not picked up"
        time.sleep(0.2)
    assert _version(secured) == start + 3


def test_migrate_acl_applies_a_plain_acl_file(secured):
    plain = secured.workdir / "plain_acl.yml"
    plain.write_text("accounts:\n  - accessKey: legacy\n    secretKey: legacy-secret\n    whiteRemoteAddress: 10.0.0.*\n"
                     "    topicPerms:\n      - orders=PUB\n")
    assert _send_status(secured.container, "legacy", "orders").code == d.UNAUTHORIZED
    applied = secured.admin("migrate-acl", "--file", str(plain), "--apply")
    assert applied.returncode == 0 and "1 users and 1 ACLs applied" in applied.stdout, applied.stdout + applied.stderr
    assert "whiteRemoteAddress" in applied.stderr  # the warning
    assert _send_status(secured.container, "legacy", "orders").code == d.OK
    again = secured.admin("migrate-acl", "--file", str(plain), "--apply")  # idempotent: updates nothing, refuses nothing
    assert again.returncode == 0, again.stdout + again.stderr
