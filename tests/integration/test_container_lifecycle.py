"""The container as an operator meets it: start, health, SIGTERM, restart, bad configs."""
from __future__ import annotations

import socket
import subprocess
import sys
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.container_process import ROOT, ContainerProcess

pytestmark = pytest.mark.integration


def relaymq(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "container", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def container(tmp_path):
    process = ContainerProcess(tmp_path / "data").start()
    yield process
    process.kill()


def create_topic(container: ContainerProcess, topic: str, kind: str = "NORMAL") -> None:
    result = container.admin("update-topic", "--topic", topic, "--type", kind, "--namesrv", container.namesrv)
    assert result.returncode == 0, result.stderr


def wait_for_route(client, topic: str, deadline_s: float = 10.0):
    deadline = time.monotonic() + deadline_s
    while True:
        response = client.route(topic)
        if response.status.code == 20000 and response.message_queues:
            return response
        assert time.monotonic() < deadline, f"no route for {topic}: {response.status}"
        time.sleep(0.1)


def test_health_service_reports_serving(container):
    with grpc.insecure_channel(container.endpoint) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_sigterm_exits_zero_and_restart_serves_acknowledged_messages(tmp_path):
    from tests.support.raw_client import RawClient

    process = ContainerProcess(tmp_path / "data").start()
    try:
        create_topic(process, "lifecycle")
        client = RawClient(process.endpoint)
        wait_for_route(client, "lifecycle")
        sent = []
        for index in range(20):
            reply = client.send("lifecycle", f"m{index}".encode())
            assert reply.status.code == 20000, reply.status
            sent.append(f"m{index}".encode())
        client.close()
        started = time.monotonic()
        assert process.stop() == 0
        assert time.monotonic() - started < 10
        process.start()
        client = RawClient(process.endpoint)
        wait_for_route(client, "lifecycle")
        received = []
        deadline = time.monotonic() + 20
        while len(received) < len(sent) and time.monotonic() < deadline:
            for message in client.receive("lifecycle-group", "lifecycle", "broker-a", poll_s=5):
                received.append(message.body)
                assert client.ack("lifecycle-group", "lifecycle", message).status.code == 20000
        client.close()
        assert sorted(received) == sorted(sent)
    finally:
        process.kill()


@pytest.mark.parametrize("key", ["grpcServerPort", "haListenPort", "grpcTlsPort"])
def test_port_in_use_is_one_clear_line(tmp_path, key):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        process = ContainerProcess(tmp_path / "data")
        if key == "grpcServerPort":
            process.client_port = busy.getsockname()[1]
        else:
            process.extra[key] = busy.getsockname()[1]
        if key == "grpcTlsPort":
            from tests.support.tls import self_signed_certificate
            cert, private_key = self_signed_certificate(tmp_path / "pem")
            process.extra.update(tlsServerCertPath=str(cert), tlsServerKeyPath=str(private_key))
        config = process.write_config()
        result = relaymq("container", "-c", str(config))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and "already in use" in lines[0] and str(config) in lines[0]
    assert not (tmp_path / "data" / "broker-a-0").exists(), "no data may be touched before the ports are known to be free"


@pytest.mark.parametrize("text, key", [
    ("grpcServerPort = 'eighty'\n[[broker]]\nbrokerName = 'a'\n", "grpcServerPort"),
    ("[[broker]]\nbrokerName = 'a'\nbrokerRole = 'BOSS'\n", "brokerRole"),
    ("[[broker]]\nbrokerName = 'a'\nbrokerRole = 'SLAVE'\nbrokerId = 0\n", "brokerId"),
    ("[[broker]]\nbrokerName = 'a'\nflushDiskType = 'SOMETIMES'\n", "flushDiskType"),
    ("[[broker]]\nbrokerName = 'a'\nmysteryKey = 1\n", "mysteryKey"),
    ("[[broker]]\nbrokerName = 'a'\n[[broker]]\nbrokerName = 'a'\n", "brokerName"),
])
def test_bad_config_is_one_line_naming_file_and_key(tmp_path, text, key):
    config = tmp_path / "bad.toml"
    config.write_text(text)
    result = relaymq("container", "-c", str(config))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert key in lines[0] and "bad.toml" in lines[0] and "Traceback" not in result.stderr


def test_missing_config_file(tmp_path):
    result = relaymq("container", "-c", str(tmp_path / "nope.toml"))
    assert result.returncode == 2 and "file not found" in result.stderr and "Traceback" not in result.stderr


def test_metrics_endpoint_shows_sends_store_size_and_consumer_lag(tmp_path):
    import urllib.request

    from tests.support.container_process import free_port
    from tests.support.raw_client import RawClient

    metrics_port = free_port()
    process = ContainerProcess(tmp_path / "data", extra={"metricsPromExporterPort": metrics_port}).start()
    try:
        create_topic(process, "metered")
        assert process.admin("update-group", "--group", "metered-group", "--namesrv", process.namesrv).returncode == 0
        client = RawClient(process.endpoint)
        wait_for_route(client, "metered")
        for index in range(5):
            assert client.send("metered", f"m{index}".encode()).status.code == 20000
        received = []
        deadline = time.monotonic() + 15
        while len(received) < 5 and time.monotonic() < deadline:
            received += client.receive("metered-group", "metered", "broker-a", poll_s=5)  # delivered, not acked
        client.close()
        assert len(received) == 5
        wanted = ('relaymq_messages_sent_total{broker="broker-a",topic="metered"} 5.0',
                  'relaymq_consumer_lag_messages{broker="broker-a",group="metered-group",topic="metered"} 5.0')
        deadline = time.monotonic() + 15
        while True:
            text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
            looks = [float(line.split()[1]) for line in text.splitlines()
                     if line.startswith("relaymq_event_loop_lag_seconds_count ")]
            if all(line in text for line in wanted) and "relaymq_store_size_bytes" in text and looks and looks[0] > 1:
                break
            assert time.monotonic() < deadline, [l for l in text.splitlines() if 'metered' in l or 'store_size' in l]
            time.sleep(0.2)
    finally:
        process.kill()
