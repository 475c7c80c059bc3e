"""The chaos harness (bench/chaos.py) for one short round of each fault kind that no dedicated
integration test exercises, on a real cluster with the official client at the harness's default
load (200 NORMAL and 100 FIFO messages a second), every third round a backlog round (the
consumers paused until 1,000 wait -- 3,000 in the benchmark's default -- then draining through
the fault): every acknowledged message consumed, no FIFO message reordered, no consumer offset
rolled back, one master per group per epoch, both groups healthy again after every fault, the
consumers level again after every round, and consumer-progress at lag 0 once drained.

As root (the sandbox of bench/chaos_env.py: network namespaces, loop-device filesystems, blkio
cgroups) the round takes a full disk, a slow disk and a network partition of the master's and
of the slave's container, a stopped slave and a stopped controller leader, and the test checks
that the sandbox left nothing behind (no namespace, link, loop device or cgroup named after the
harness's process).  The kinds left out have their own tests (a master killed or stopped, and a
master killed with the controller leader: test_failover_controller_mode; a slave killed:
test_replication); one round of all twelve took 305 s, a quarter of CI's 20 minutes, and stays
the benchmark's default.  Each round waits for the consumers to be level again; here the
producer is held after 3 s not level rather than the benchmark's 10 (the checks are the same;
the rounds spent most of their 20 s waiting for consumers that drain faster once it is held).  Without root the sandbox kinds cannot run and the round takes the
seven kinds that need no sandbox instead."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench import chaos_env, chaos_faults

pytestmark = [pytest.mark.integration, pytest.mark.conformance]
ROOT = Path(__file__).resolve().parents[2]
# the kinds with no dedicated integration test; with the sandbox, the round takes these
CI_KINDS = (*chaos_faults.SANDBOX_KINDS, "stop-slave", "stop-controller-leader")
ALWAYS = {"kill-master", "kill-slave", "kill-controller-leader", "kill-master-and-controller-leader",
          "stop-master", "stop-slave", "stop-controller-leader"}


def leftovers(pid: int) -> list[str]:
    """Sandbox resources still named after the harness process ``pid``."""
    tag = f"rmq{pid}"
    found = [line for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
             if line.startswith(tag)]
    found += [line for line in subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout.splitlines()
              if f" {tag}" in line]
    found += [line for line in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout.splitlines()
              if f"{tag}-disk" in line]
    found += [str(path) for path in chaos_env.CGROUP_BLKIO.glob(f"{tag}[a-z]*")]
    return found


@pytest.mark.timeout(600)
def test_one_round_of_each_fault_loses_nothing_acknowledged(tmp_path):
    sandbox = chaos_env.available() is None
    kinds = set(CI_KINDS) if sandbox else ALWAYS
    harness = subprocess.Popen([sys.executable, str(ROOT / "bench" / "chaos.py"), "--runs", "1", "--seed", "16",
                                "--kinds", ",".join(sorted(kinds)), "--backlog", "1000", "--hold-producer-after", "1",
                                "--out", str(tmp_path),
                                "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        stdout, stderr = harness.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        harness.send_signal(signal.SIGTERM)  # as Ctrl-C: it drains shortly, reports, removes cluster and sandbox
        stdout, stderr = harness.communicate(timeout=180)
    if sandbox:
        assert leftovers(harness.pid) == []
    assert stdout.strip(), stderr[-3000:]
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["stopped"] is None, summary
    faults = summary["faults"]
    assert set(faults) == kinds, faults
    for kind, row in faults.items():
        assert row["not_recovered"] == 0, (kind, row)
        assert row["acknowledged"] > 0, (kind, row)
        assert row["lost"] == 0 and row["reordered"] == 0, (kind, row)
        assert row["not_level"] == 0, (kind, row)
    assert sum(row["backlog_rounds"] for row in faults.values()) == len(faults) // 3
    assert summary["rollbacks"] == 0 and summary["violations"] == [], summary
    assert summary["lag_left"] == 0, summary
    assert summary["queues_checked"] > 0 and summary["epochs_checked"] > 0 and summary["elections_logged"] > 0
    assert Path(summary["plot"]).exists()


@pytest.mark.timeout(300)
def test_a_run_stopped_midway_still_checks_and_reports_the_rounds_it_did(tmp_path):
    """SIGTERM after the first round: the harness heals, drains shortly, checks and prints the
    summary of the rounds done (exit 130, "stopped" saying after which round), and removes its
    cluster and sandbox.  A long run cut short by the operator or a full disk keeps its verdict."""
    harness = subprocess.Popen([sys.executable, str(ROOT / "bench" / "chaos.py"), "--runs", "20", "--seed", "1",
                                "--kinds", "kill-slave", "--out", str(tmp_path), "--json", "--rate", "20"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    seen = []
    try:
        for line in harness.stderr:
            seen.append(line)
            if line.startswith("round 1/20 "):
                harness.send_signal(signal.SIGTERM)
                break
        stdout, stderr = harness.communicate(timeout=200)
    finally:
        if harness.poll() is None:
            harness.kill()
    assert harness.returncode == 130, "".join(seen)[-3000:] + stderr[-3000:]
    if chaos_env.available() is None:
        assert leftovers(harness.pid) == []
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["stopped"].startswith("SIGTERM after round "), summary
    assert 1 <= summary["rounds_done"] < 20 and summary["faults"]["kill-slave"]["runs"] == summary["rounds_done"]
    assert summary["acknowledged"] > 0 and summary["lost"] == 0, summary
    assert summary["rollbacks"] == 0 and summary["violations"] == [], summary
    assert summary["queues_checked"] > 0 and Path(summary["plot"]).exists()
    assert json.loads((tmp_path / "chaos.json").read_text())["stopped"] == summary["stopped"]
