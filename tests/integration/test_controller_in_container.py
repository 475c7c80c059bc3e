"""One process runs the nameserver, the controller and the brokers: ``startEmbeddedNamesrv`` with
``enableControllerInNamesrv`` in a container file (the design card's embedded option).  The
controller-mode broker registers with the controller inside its own process, is elected master
and serves the official client."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.support.container_process import ROOT, ContainerProcess

pytestmark = [pytest.mark.integration, pytest.mark.conformance]
DRIVER = ROOT / "tests" / "support" / "official_client" / "driver.py"


def test_a_single_container_runs_nameserver_controller_and_a_controller_mode_master(tmp_path):
    container = ContainerProcess(tmp_path / "c", embedded_namesrv=True, extra={"enableControllerInNamesrv": True})
    container.brokers = [{"brokerName": "broker-a", "enableControllerMode": True, "controllerAddr": container.namesrv}]
    container.start()
    try:
        deadline = time.monotonic() + 20
        while True:
            done = container.admin("get-sync-state-set", "--controller", container.namesrv, "--json")
            groups = json.loads(done.stdout)["brokers"] if done.returncode == 0 else []
            if groups and groups[0]["masterBrokerId"] == 1:
                break
            assert time.monotonic() < deadline, done.stdout + done.stderr
            time.sleep(0.1)
        assert container.admin("update-topic", "-n", container.namesrv, "--topic", "t", "--type", "NORMAL").returncode == 0
        sent = subprocess.run([sys.executable, str(DRIVER), "produce", "--endpoint", container.endpoint, "--topic", "t",
                               "--count", "5"], capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0, sent.stdout + sent.stderr
        assert sent.stdout.count('"event": "sent"') == 5
    finally:
        container.kill()


def _controller_container(tmp_path, name="c", namesrv_port=0):
    container = ContainerProcess(tmp_path / name, embedded_namesrv=True, extra={"enableControllerInNamesrv": True},
                                 namesrv_port=namesrv_port)
    container.brokers = [{"brokerName": "broker-a", "enableControllerMode": True, "controllerAddr": container.namesrv,
                          "storePathRootDir": str(tmp_path / "store")}]
    return container


def _view(container) -> dict:
    done = container.admin("get-sync-state-set", "--controller", container.namesrv, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    groups = json.loads(done.stdout)["brokers"]
    return groups[0] if groups else {}


def test_scenario_40_a_restart_with_a_new_address_keeps_the_id(tmp_path):
    first = _controller_container(tmp_path)
    first.extra["storePathRootDir"] = str(tmp_path / "shared")  # the controller's log survives the restart
    first.start()
    try:
        deadline = time.monotonic() + 20
        while _view(first).get("masterBrokerId") != 1:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        assert first.stop() == 0
    assert (tmp_path / "store" / "brokerIdentity").read_text().strip() == "DefaultCluster#broker-a#1"
    second = _controller_container(tmp_path, "c2", first.namesrv_port)  # other ports: a new address
    second.extra["storePathRootDir"] = str(tmp_path / "shared")
    second.start()
    try:
        deadline = time.monotonic() + 20
        while not (_view(second).get("members") == {"1": f"127.0.0.1:{second.admin_port}"}
                   and _view(second).get("masterBrokerId") == 1):
            assert time.monotonic() < deadline, _view(second)
            time.sleep(0.1)
    finally:
        second.kill()


def test_scenario_44_an_identity_file_of_another_group_keeps_the_broker_fenced_and_unrouted(tmp_path):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "brokerIdentity").write_text("DefaultCluster#broker-x#1\n")
    container = _controller_container(tmp_path)
    container.start()
    try:
        deadline = time.monotonic() + 5
        while "not joining the controller" not in container.log_path.read_text():
            assert time.monotonic() < deadline, container.log_path.read_text()[-2000:]
            time.sleep(0.1)
        assert "brokerIdentity names DefaultCluster/broker-x" in container.log_path.read_text()
        listed = container.admin("cluster-list", "-n", container.namesrv, "--json")
        assert "broker-a" not in listed.stdout
        assert _view(container) == {}                  # the controller never heard of it
        sent = subprocess.run([sys.executable, str(DRIVER), "produce", "--endpoint", container.endpoint, "--topic", "t",
                               "--count", "1"], capture_output=True, text=True, timeout=60)
        assert sent.returncode != 0                    # nothing takes writes
    finally:
        container.kill()
