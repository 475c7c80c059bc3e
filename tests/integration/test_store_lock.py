"""A second process on a data directory another one holds is refused; the first keeps serving."""
from __future__ import annotations

import os
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.container_process import ROOT, ContainerProcess, free_port
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.integration


def test_second_container_on_a_locked_store_is_refused_and_the_first_keeps_serving(tmp_path):
    first = ContainerProcess(tmp_path / "first").start()
    try:
        assert first.admin("update-topic", "-t", "locked", "--namesrv", first.namesrv).returncode == 0
        copy = ContainerProcess(tmp_path / "copy", extra={"storePathRootDir": str(first.data_dir)})
        with pytest.raises(RuntimeError, match="container exited with 1"):
            copy.start(timeout_s=20)
        refusal = [line for line in copy.log_path.read_text().splitlines() if line.startswith("relaymq:")]
        store = first.data_dir / "broker-a-0"
        assert refusal == [f"relaymq: {store} is in use by process {first.process.pid} (relaymq broker "
                           f"DefaultCluster_broker-a_0): refusing to open it twice (two processes on one store corrupt it)"]
        assert "Traceback" not in copy.log_path.read_text()
        client = RawClient(first.endpoint)
        try:
            assert client.send("locked", b"still here").status.code == 20000
        finally:
            client.close()
        with grpc.insecure_channel(first.endpoint) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        first.kill()


def test_second_controller_on_a_locked_store_is_refused(tmp_path):
    store = tmp_path / "controller-store"
    port = free_port()
    config = tmp_path / "n0.toml"
    config.write_text(f'controllerDLegerPeers = "n0-127.0.0.1:{port}"\ncontrollerDLegerSelfId = "n0"\n'
                      f'controllerStorePath = "{store}"\n')
    command = [sys.executable, "-m", "container", "controller", "-c", str(config)]
    first = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert "ready" in first.stdout.readline()
        second = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=30,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert second.returncode == 1
        assert second.stderr.strip().splitlines()[-1] == (
            f"relaymq: {store} is in use by process {first.pid} (relaymq controller n0 of RelayMQController): "
            f"refusing to open it twice (two processes on one store corrupt it)")
        assert first.poll() is None
    finally:
        first.kill()
        first.wait()
