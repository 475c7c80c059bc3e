"""The RelayMQ server the conformance tests drive with the official client.

By default the real container (``relaymq container -c``) with a tmp config and free ports;
topics and groups are created with ``relaymq admin update-topic`` / ``update-group``.
``RELAYMQ_CONFORMANCE_TARGET=fake`` starts ``tests.support.messaging_server`` (the servicer
over the in-memory fake broker) instead, to tell protocol bugs from broker bugs.  Both get short minimum invisible and poll times so
the suite stays around a minute.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tests" / "support" / "official_client" / "driver.py"
TOPICS = {"c-normal": "NORMAL", "c-fifo": "FIFO", "c-delay": "DELAY", "c-tx": "TRANSACTION", "c-redo": "NORMAL",
          "c-dlq": "NORMAL", "c-push": "NORMAL", "c-pushfail": "NORMAL", "c-filter": "NORMAL",
          "c-sql": "NORMAL"}
# what tests.support.messaging_server's group rules give the fake broker
GROUPS = {"fifo-g": ("--fifo", "--max-attempts", "2"), "dlq-g": ("--max-attempts", "2")}
SHORT = {"minInvisibleTimeMillsForRecv": 1000, "grpcClientConsumerMinLongPollingTimeoutMillis": 1000}


@dataclass
class Target:
    endpoint: str
    workdir: Path  # the client's cwd: outside the repository, so our ``proto`` is not importable

    def drive(self, scenario: str, *args: str, timeout_s: float = 40) -> tuple[int, list[dict]]:
        """Run the official client in a subprocess (outside the repository: no pb2 clash)."""
        result = subprocess.run([sys.executable, str(DRIVER), scenario, "--endpoint", self.endpoint, *args],
                                cwd=self.workdir, capture_output=True, text=True, timeout=timeout_s)
        events = [json.loads(line[2:]) for line in result.stdout.splitlines() if line.startswith("@@")]
        if result.returncode not in (0, 2):
            raise AssertionError(f"driver crashed ({result.returncode}): {result.stderr[-3000:]}")
        return result.returncode, events


def _start_fake(tmp: Path):
    args = [sys.executable, "-m", "tests.support.messaging_server", "--min-poll-ms", "1000", "--min-invisible-ms", "1000"]
    for topic, kind in TOPICS.items():
        args += ["--topic", f"{topic}={kind}"]
    log = open(tmp / "server.log", "wb")
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stdout.readline().decode()
        if line.startswith("READY"):
            return process, f"127.0.0.1:{line.split()[1]}"
        if not line and process.poll() is not None:
            break
    process.kill()
    raise RuntimeError(f"test server did not start: {(tmp / 'server.log').read_text()[-2000:]}")


def _admin_until_ok(container, *args: str, deadline_s: float = 30) -> None:
    """Retry until the container's broker has registered at the nameserver (polled, with a deadline)."""
    deadline = time.monotonic() + deadline_s
    while True:
        done = container.admin(*args, "--namesrv", container.namesrv)
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"admin {' '.join(args)} failed: {done.stderr[-1000:]}")
        time.sleep(0.2)


@pytest.fixture(scope="session")
def relaymq(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("conformance")
    if os.environ.get("RELAYMQ_CONFORMANCE_TARGET", "container") == "container":
        from tests.support.container_process import ContainerProcess

        container = ContainerProcess(tmp / "data", extra=dict(SHORT)).start()
        try:
            for topic, kind in TOPICS.items():
                _admin_until_ok(container, "update-topic", "--topic", topic, "--type", kind)
            for group, options in GROUPS.items():
                _admin_until_ok(container, "update-group", "--group", group, *options)
            yield Target(container.endpoint, tmp)
        finally:
            container.stop()
        return
    process, endpoint = _start_fake(tmp)
    try:
        yield Target(endpoint, tmp)
    finally:
        process.kill()
        process.wait()
