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
