"""The chaos harness (bench/chaos.py) for one short round of each fault kind, on a real cluster
with the official client: every acknowledged message consumed, no consumer offset rolled back,
one master per group per epoch, both groups healthy again after every fault.

The disk-full round is run and must recover, but its loss count is reported, not asserted: one
run in four so far lost one message acknowledged during the full disk (open, see the issue-16
report); the long runs are the benchmark."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.conformance]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_one_round_of_each_fault_loses_nothing_acknowledged(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "chaos.py"), "--runs", "1", "--seed", "16",
                           "--out", str(tmp_path), "--json", "--rate", "30"], capture_output=True, text=True,
                          timeout=580, cwd=ROOT)
    assert done.stdout.strip(), done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    faults = summary["faults"]
    assert set(faults) >= {"kill-master", "kill-slave", "kill-controller-leader", "kill-master-and-controller-leader",
                           "stop-master", "stop-slave", "stop-controller-leader"}, faults
    for kind, row in faults.items():
        assert row["not_recovered"] == 0, (kind, row)
        assert row["acknowledged"] > 0, (kind, row)
        if kind != "disk-full":
            assert row["lost"] == 0 and row["reordered"] == 0, (kind, row)
    assert summary["rollbacks"] == 0 and not [v for v in summary["violations"] if "rolled back" not in v], summary
    assert summary["queues_checked"] > 0 and summary["epochs_checked"] > 0
    assert Path(summary["plot"]).exists()
