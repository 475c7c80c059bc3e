"""Issue 24, defects 5 and 6, with real processes: the deployment of conf/controller-mode
(tests/support/controller_cluster.py) is redundant from its start, and stays so while other
processes compete for the machine's cores.

* Defect 5: a slave whose log is empty joined the SyncStateSet only after the first write, so
  an idle fresh cluster showed ``[1]`` for both groups for as long as it stayed idle.
* Defect 6: with other processes starting on the same two cores, both slaves were closed as
  SLAVE_SILENT in their first seconds and never joined the set; after a kill of the master
  the controller could elect no one.  Here two processes spin on the cores (nice 0) for the
  cluster's first 10 s.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.support.controller_cluster import BROKERS, ControllerModeCluster

pytestmark = [pytest.mark.integration]


def sync_state_sets(cluster: ControllerModeCluster) -> dict[str, list[int]]:
    views = {broker: cluster.view(broker) for broker in BROKERS}
    return {broker: sorted(view.sync_state_set) if view is not None else [] for broker, view in views.items()}


def wait_redundant(cluster: ControllerModeCluster, timeout_s: float) -> float:
    """Seconds until both groups' SyncStateSets hold both replicas."""
    started = time.monotonic()
    while True:
        sets = sync_state_sets(cluster)
        if all(len(members) == 2 for members in sets.values()):
            return time.monotonic() - started
        assert time.monotonic() - started < timeout_s, f"SyncStateSets after {timeout_s}s: {sets}"
        time.sleep(0.1)


def silent_closes(cluster: ControllerModeCluster) -> list[str]:
    lines = []
    for container in cluster.containers:
        text = container.log_path.read_text(errors="replace") if container.log_path else ""
        lines += [line for line in text.splitlines() if "SLAVE_SILENT" in line or "MASTER_SILENT" in line]
    return lines


def test_a_fresh_cluster_is_redundant_before_its_first_write(tmp_path):
    cluster = ControllerModeCluster(tmp_path).start()
    try:
        took = wait_redundant(cluster, timeout_s=5)       # no message was sent
        print(f"both SyncStateSets whole {took:.1f}s after the masters were elected")
        time.sleep(3)                                      # idle: nobody is shrunk out again
        assert all(len(members) == 2 for members in sync_state_sets(cluster).values()), sync_state_sets(cluster)
        cluster.kill(0)                                    # a master lost before any write
        deadline = time.monotonic() + 15
        while cluster.master_container("broker-a") != 1:
            assert time.monotonic() < deadline, f"broker-a: {cluster.view('broker-a')}"
            time.sleep(0.1)
    finally:
        cluster.close()


def spin(seconds: float) -> list[subprocess.Popen]:
    """One busy process per core, each ending by itself after ``seconds``."""
    code = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]


def test_under_cpu_contention_both_slaves_join_and_a_killed_master_is_replaced(tmp_path):
    spinners = spin(10)
    cluster = ControllerModeCluster(tmp_path)
    try:
        cluster.start()
        wait_redundant(cluster, timeout_s=20)
        for process in spinners:
            process.wait(timeout=15)
        wait_redundant(cluster, timeout_s=5)               # still whole once the cores are free
        closes = silent_closes(cluster)
        assert not closes, "\n".join(closes)
        cluster.kill(0)
        deadline = time.monotonic() + 15
        while cluster.master_container("broker-a") != 1:
            assert time.monotonic() < deadline, f"broker-a: {cluster.view('broker-a')}"
            time.sleep(0.1)
    finally:
        for process in spinners:
            if process.poll() is None:
                process.kill()
                process.wait()
        cluster.close()
