"""A runtime add-broker whose listenPort is a port the container already listens on is refused
(issue 24, defect 9): gRPC binds with SO_REUSEPORT, so the second listener was accepted and the
kernel split connections between the client endpoint and the broker's own endpoint."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.container_process import ROOT, free_ports
from tests.support.inprocess_container import InProcessContainer

pytestmark = [pytest.mark.integration]


def add_broker(container: InProcessContainer, path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "container", "admin", "add-broker", "--container", container.admin,
                           "--config-path", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=60)


def broker_file(tmp_path, name: str, listen_port: int):
    path = tmp_path / f"{name}.properties"
    path.write_text(f"brokerClusterName=DefaultCluster\nbrokerName={name}\nbrokerId=0\nbrokerRole=ASYNC_MASTER\n"
                    f"listenPort={listen_port}\nstorePathRootDir={tmp_path / name}\n")
    return path


def test_a_broker_listen_port_on_the_containers_client_port_is_refused(tmp_path):
    container = InProcessContainer(tmp_path / "container")
    try:
        client_port = container.container.ports["client"]
        refused = add_broker(container, broker_file(tmp_path, "broker-b", client_port))
        assert refused.returncode == 1, refused.stdout
        assert f"port {client_port} is already this container's client port" in refused.stderr, refused.stderr
        assert "broker-b" not in {h.name for h in container.container.hosted.values()}
        (free,) = free_ports(1)
        added = add_broker(container, broker_file(tmp_path, "broker-c", free))
        assert added.returncode == 0, added.stderr
        assert container.container.ports["broker:broker-c"] == free
    finally:
        container.stop()
