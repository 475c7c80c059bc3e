"""A standalone nameserver and a standalone controller serve their metrics."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.test_container_loss import metric
from tests.support.container_process import ROOT, ContainerProcess, free_port
from tests.support.ha_pair import wait_until
from tests.support.nameserver_process import start_nameserver

pytestmark = pytest.mark.integration


def test_nameserver_metrics(tmp_path):
    port = free_port()
    nameserver = start_nameserver(tmp_path / "namesrv", f"listenPort=0\nnamesrvMetricsPort={port}\n")
    container = ContainerProcess(tmp_path / "c", embedded_namesrv=False, namesrv_port=nameserver.port)
    try:
        container.start()
        wait_until(lambda: metric(port, "relaymq_nameserver_brokers_alive", cluster="DefaultCluster") == 1,
                   what="the broker registered")
        assert metric(port, "relaymq_nameserver_broker_groups_without_master", cluster="DefaultCluster") == 0
        assert container.admin("update-topic", "-t", "M", "--namesrv", nameserver.address).returncode == 0
        before = metric(port, "relaymq_nameserver_routes_served_total", result="found") or 0
        assert container.admin("topic-route", "-t", "M", "--namesrv", nameserver.address).returncode == 0
        assert metric(port, "relaymq_nameserver_routes_served_total", result="found") == before + 1
        assert metric(port, "process_open_fds") > 0
    finally:
        container.kill()
        nameserver.kill()


def test_controller_metrics(tmp_path):
    peer, port = free_port(), free_port()
    config = tmp_path / "n0.toml"
    config.write_text(f'controllerDLegerPeers = "n0-127.0.0.1:{peer}"\ncontrollerDLegerSelfId = "n0"\n'
                      f'controllerStorePath = "{tmp_path / "store"}"\ncontrollerMetricsPort = {port}\n')
    process = subprocess.Popen([sys.executable, "-m", "container", "controller", "-c", str(config)], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert "ready" in process.stdout.readline()
        labels = {"group": "RelayMQController", "member": "n0"}
        wait_until(lambda: metric(port, "relaymq_controller_leader", **labels) == 1, what="a leader")
        assert metric(port, "relaymq_controller_term", **labels) >= 1
        assert metric(port, "relaymq_controller_elections_total", **labels) >= 1
        assert metric(port, "relaymq_controller_committed_index", **labels) >= 1
    finally:
        process.kill()
        process.wait()
