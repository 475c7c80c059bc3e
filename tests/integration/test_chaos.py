"""The chaos harness (bench/chaos.py) for one short round of each fault kind, on a real cluster
with the official client: every acknowledged message consumed, no FIFO message reordered, no
consumer offset rolled back, one master per group per epoch, both groups healthy again after
every fault.

As root (the sandbox of bench/chaos_env.py: network namespaces, loop-device filesystems, blkio
cgroups) the round includes a full disk, a slow disk and a network partition of the master's
and of the slave's container, and the test checks that the sandbox left nothing behind (no
namespace, link, loop device or cgroup named after the harness's process).  Without root those
kinds are skipped by the harness and not required here.  The long runs are the benchmark."""
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
    harness = subprocess.Popen([sys.executable, str(ROOT / "bench" / "chaos.py"), "--runs", "1", "--seed", "16",
                                "--out", str(tmp_path), "--json", "--rate", "30"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        stdout, stderr = harness.communicate(timeout=480)
    except subprocess.TimeoutExpired:
        harness.send_signal(signal.SIGTERM)  # as Ctrl-C: the harness removes its cluster and sandbox
        stdout, stderr = harness.communicate(timeout=60)
    if sandbox:
        assert leftovers(harness.pid) == []
    assert stdout.strip(), stderr[-3000:]
    summary = json.loads(stdout.strip().splitlines()[-1])
    faults = summary["faults"]
    assert set(faults) == (set(chaos_faults.KINDS) if sandbox else ALWAYS), faults
    for kind, row in faults.items():
        assert row["not_recovered"] == 0, (kind, row)
        assert row["acknowledged"] > 0, (kind, row)
        assert row["lost"] == 0 and row["reordered"] == 0, (kind, row)
    assert summary["rollbacks"] == 0 and summary["violations"] == [], summary
    assert summary["queues_checked"] > 0 and summary["epochs_checked"] > 0
    assert Path(summary["plot"]).exists()
