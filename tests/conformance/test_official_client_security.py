"""The official Python client over the TLS port and with credentials, against a real container.

Its own container: a plaintext and a TLS client port (self-signed certificate for
127.0.0.1, given to the client through ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``, the only way
the 5.1.2 client accepts a CA) and ``authenticationEnabled`` with one account.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.container_process import ContainerProcess, free_port
from tests.support.tls import self_signed_certificate

pytestmark = pytest.mark.conformance
DRIVER = Path(__file__).resolve().parents[1] / "support" / "official_client" / "driver.py"
ACCESS_KEY, SECRET_KEY = "conformance-ak", "conformance-sk"
TOPIC = "c-secure"


class SecuredTarget:
    def __init__(self, container: ContainerProcess, tls_port: int, cert: Path, workdir: Path):
        self.container, self.tls_port, self.cert, self.workdir = container, tls_port, cert, workdir

    def drive(self, scenario: str, *args: str, tls: bool = False, secret_key: str = SECRET_KEY,
              timeout_s: float = 40) -> tuple[int, list[dict]]:
        """Run the driver outside the repository (no pb2 clash); 3 means the client raised."""
        port = self.tls_port if tls else self.container.client_port
        command = [sys.executable, str(DRIVER), scenario, "--endpoint", f"127.0.0.1:{port}",
                   "--access-key", ACCESS_KEY, "--secret-key", secret_key, *args] + (["--tls"] if tls else [])
        env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(self.cert)}
        result = subprocess.run(command, cwd=self.workdir, capture_output=True, text=True, timeout=timeout_s, env=env)
        events = [json.loads(line[2:]) for line in result.stdout.splitlines() if line.startswith("@@")]
        if result.returncode not in (0, 2, 3):
            raise AssertionError(f"driver crashed ({result.returncode}): {result.stderr[-3000:]}")
        return result.returncode, events


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("conformance-secure")
    cert, key = self_signed_certificate(tmp / "pem")
    accounts = tmp / "accounts.toml"
    accounts.write_text(f'[[accounts]]\naccessKey = "{ACCESS_KEY}"\nsecretKey = "{SECRET_KEY}"\n')
    tls_port = free_port()
    container = ContainerProcess(tmp / "data", extra={
        "grpcTlsPort": tls_port, "tlsServerCertPath": str(cert), "tlsServerKeyPath": str(key),
        "authenticationEnabled": True, "authenticationAccountsFile": str(accounts),
        "minInvisibleTimeMillsForRecv": 1000, "grpcClientConsumerMinLongPollingTimeoutMillis": 1000}).start()
    try:
        deadline = time.monotonic() + 30
        while container.admin("update-topic", "--topic", TOPIC, "--type", "NORMAL", "--namesrv", container.namesrv).returncode:
            assert time.monotonic() < deadline, "topic not created"
            time.sleep(0.2)
        yield SecuredTarget(container, tls_port, cert, tmp)
    finally:
        container.stop()


def _events(events, kind):
    return [e for e in events if e["event"] == kind]


def test_signed_client_sends_over_tls_and_receives_over_plaintext(secured):
    code, sent = secured.drive("produce", "--topic", TOPIC, "--count", "2", "--prefix", "tls", tls=True)
    assert code == 0 and len(_events(sent, "sent")) == 2, sent
    code, got = secured.drive("simple", "--topic", TOPIC, "--group", "g-secure-plain", "--expect", "2")
    assert code == 0, got
    assert {e["body"] for e in _events(got, "acked")} == {"tls0", "tls1"}


def test_signed_client_receives_over_tls(secured):
    code, sent = secured.drive("produce", "--topic", TOPIC, "--count", "1", "--prefix", "plain")
    assert code == 0, sent
    code, got = secured.drive("simple", "--topic", TOPIC, "--group", "g-secure-tls", "--expect", "3", tls=True)
    assert code == 0, got
    assert {e["body"] for e in _events(got, "acked")} >= {"plain0"}


def test_a_wrong_secret_is_refused_as_unauthorized(secured):
    code, events = secured.drive("produce", "--topic", TOPIC, "--count", "1", secret_key="not-the-secret")
    assert code == 3 and not _events(events, "sent"), events
    error = _events(events, "error")[0]
    assert any("40100" in line or "not authenticated" in line for line in error["client_errors"]), error
