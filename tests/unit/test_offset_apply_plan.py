"""Applying a plan made from live replicas (services/offset_apply.py) against a fake admin API:
which plans are live, check then write, what is written, the report and the exit codes."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from container import cli
from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey
from metadata.data_version import DataVersion
from metadata.offset_write import QueueOffset
from services.offset_apply import (
    LISTED_QUEUES_MAX, AdminCallFailed, LiveApplyError, MasterState, WriteReply, apply_live_plan, read_live_plan,
)
from tests.support.container_process import ROOT, free_port
from tests.support.offset_plan import PlannedReplica, write_live_plan

V = DataVersion(0, 100, 7)


def table(version: DataVersion, **queues: dict[int, int]) -> ConsumerOffsetTable:
    return ConsumerOffsetTable(version, {OffsetKey("T", group): offsets for group, offsets in queues.items()})


def plan_of(tmp_path, groups: dict[str, ConsumerOffsetTable], version: DataVersion = V):
    members = lambda name: [PlannedReplica(0, "master", f"{name}-host:1", version),  # noqa: E731
                            PlannedReplica(1, "slave", f"{name}-slave:1", DataVersion(0, 90, 9))]
    return write_live_plan(tmp_path / "plan", {name: (members(name), safe) for name, safe in groups.items()})


class FakeAdmin:
    def __init__(self, states: dict[str, MasterState], write_failures: dict[str, AdminCallFailed] | None = None):
        self.states, self.write_failures = states, write_failures or {}
        self.reads, self.writes = [], []

    def read(self, target, timeout_s):
        self.reads.append((target.broker_group, timeout_s))
        state = self.states[target.broker_group]
        if isinstance(state, AdminCallFailed):
            raise state
        return state

    def write(self, target, offsets, timeout_s):
        self.writes.append((target.broker_group, target.planned, list(offsets)))
        if target.broker_group in self.write_failures:
            raise self.write_failures[target.broker_group]
        return WriteReply(True, target.planned.next_version(5), tuple(offsets), "")


def run(plan_dir, admin) -> tuple[int, str]:
    out = io.StringIO()
    code = apply_live_plan(read_live_plan(str(plan_dir)), admin, 2500, out)
    return code, out.getvalue()


def test_file_plans_and_unreadable_folders_are_not_live_and_mixed_plans_are_refused(tmp_path):
    from tests.unit.test_offset_diff_cli import make_plan

    file_plan, _, _ = make_plan(tmp_path, counter_now=5)
    assert read_live_plan(str(file_plan)) is None and read_live_plan(str(tmp_path / "missing")) is None
    live = plan_of(tmp_path, {"broker-a": table(V, G={0: 5})})
    plan = read_live_plan(str(live))
    (target,) = plan.targets
    assert (target.broker_group, target.broker_id, target.address, target.planned, target.slaves) == ("broker-a", 0, "broker-a-host:1", V, (1,))
    summary = json.loads((live / "summary.json").read_text())
    summary["plan"]["broker-a"]["replicas"][1]["source"] = "/data/a1.json"
    (live / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(LiveApplyError, match="mixes files and live replicas"):
        read_live_plan(str(live))


def test_only_the_masters_raised_and_added_queues_are_written_with_the_planned_version(tmp_path):
    plan_dir = plan_of(tmp_path, {"broker-a": table(V, G={0: 9, 1: 4}, H={0: 2}), "broker-b": table(V, G={0: 1})})
    admin = FakeAdmin({"broker-a": MasterState(0, "MASTER", table(V, G={0: 5, 1: 4})),
                       "broker-b": MasterState(0, "MASTER", table(V, G={0: 1}))})
    code, report = run(plan_dir, admin)
    assert code == 0, report
    assert admin.reads == [("broker-a", 2.5), ("broker-b", 2.5)]
    assert admin.writes == [("broker-a", V, [QueueOffset("T", "G", 0, 9), QueueOffset("T", "H", 0, 2)])]
    assert report.splitlines() == [
        "applied broker-a:0 (broker-a-host:1): 2 queues, dataVersion "
        "{'counter': 7, 'stateVersion': 0, 'timestamp': 100} -> {'counter': 8, 'stateVersion': 0, 'timestamp': 5}",
        "  T@G queue 0: 5 -> 9",
        "  T@H queue 0: (none) -> 2",
        "  slaves follow by metadata sync: broker-a:1",
        "unchanged broker-b:0 (broker-b-host:1): already holds the plan, nothing written",
        "APPLIED: 2 broker groups",
    ]


@pytest.mark.parametrize("state, fragment", [
    (MasterState(0, "MASTER", table(DataVersion(0, 200, 8), G={0: 6})), "dataVersion {'counter': 7, 'stateVersion': 0, 'timestamp': 100} -> {'counter': 8"),
    (MasterState(1, "SLAVE", table(V, G={0: 5})), "answers as broker id 1 (SLAVE), planned as the master"),
    (AdminCallFailed("UNAVAILABLE", "connection refused"), "cannot be read: UNAVAILABLE: connection refused"),
])
def test_a_master_that_moved_or_cannot_be_checked_stops_everything_before_any_write(tmp_path, state, fragment):
    plan_dir = plan_of(tmp_path, {"broker-a": table(V, G={0: 9}), "broker-b": table(V, G={0: 9})})
    admin = FakeAdmin({"broker-a": MasterState(0, "MASTER", table(V, G={0: 5})), "broker-b": state})
    code, report = run(plan_dir, admin)
    assert code == 3 and admin.writes == []
    assert report.startswith("NOT APPLIED: replicas moved since the plan was made; re-run the diff\n")
    assert f"  broker-b:0 (broker-b-host:1): {fragment}" in report


@pytest.mark.parametrize("failure, line", [
    (AdminCallFailed("OUT_OF_RANGE", "OFFSET_BEYOND_MAX: T@G queue 0: offset 9 is beyond the queue's max offset 8"),
     "NOT APPLIED broker-b:0 (broker-b-host:1): OFFSET_BEYOND_MAX: T@G queue 0: offset 9 is beyond the queue's max offset 8"),
    (AdminCallFailed("DEADLINE_EXCEEDED", "Deadline Exceeded"),
     "UNKNOWN broker-b:0 (broker-b-host:1): DEADLINE_EXCEEDED: Deadline Exceeded; the write may or may not have happened: re-run the diff"),
])
def test_a_refused_or_unanswered_write_stops_the_run_and_says_what_was_written(tmp_path, failure, line):
    groups = {name: table(V, G={0: 9}) for name in ("broker-a", "broker-b", "broker-c")}
    admin = FakeAdmin({name: MasterState(0, "MASTER", table(V, G={0: 5})) for name in groups}, {"broker-b": failure})
    code, report = run(plan_of(tmp_path, groups), admin)
    assert code == 3 and [w[0] for w in admin.writes] == ["broker-a", "broker-b"]
    lines = report.splitlines()
    assert lines[0].startswith("applied broker-a:0") and line in lines
    assert lines[-2:] == ["not attempted: broker-c", "PARTIAL: 1 of 3 broker groups hold their plan; re-run the diff"]


def test_a_write_that_finds_the_table_moved_is_not_applied(tmp_path):
    class MovedOnWrite(FakeAdmin):
        def write(self, target, offsets, timeout_s):
            return WriteReply(False, DataVersion(0, 300, 8), (), "MOVED_SINCE_PLAN: expected ..., current ...")

    admin = MovedOnWrite({"broker-a": MasterState(0, "MASTER", table(V, G={0: 5}))})
    code, report = run(plan_of(tmp_path, {"broker-a": table(V, G={0: 9})}), admin)
    assert code == 3 and "NOT APPLIED broker-a:0 (broker-a-host:1): moved since the check: MOVED_SINCE_PLAN" in report


def test_long_writes_list_the_first_queues_and_count_the_rest(tmp_path):
    many = {q: 10 for q in range(LISTED_QUEUES_MAX + 3)}
    admin = FakeAdmin({"broker-a": MasterState(0, "MASTER", table(V))})
    code, report = run(plan_of(tmp_path, {"broker-a": table(V, G=many)}), admin)
    assert code == 0 and report.count("(none) -> 10") == LISTED_QUEUES_MAX
    assert "  ... and 3 more (plan.csv lists every key)" in report


def test_relaymq_applies_a_live_plan_without_importing_spark_tools(tmp_path):
    plan_dir = write_live_plan(tmp_path / "plan", {"broker-a": (
        [PlannedReplica(0, "master", f"127.0.0.1:{free_port()}", V)], table(V, G={0: 9}))})
    code = ("import sys; from container import cli; rc = cli.main(['offset-diff', '--apply', sys.argv[1], "
            "'--apply-timeout-ms', '3000']); print(rc, any(m.startswith(('spark_tools', 'pyspark')) for m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code, str(plan_dir)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.stdout.splitlines()[-1] == "3 False", result.stdout + result.stderr
    assert "NOT APPLIED: replicas moved" in result.stdout and "cannot be read: UNAVAILABLE" in result.stdout


def test_bad_timeout_and_malformed_live_plans_exit_1_with_one_line(tmp_path, capsys):
    plan_dir = plan_of(tmp_path, {"broker-a": table(V, G={0: 9})})
    assert cli.main(["offset-diff", "--apply", str(plan_dir), "--apply-timeout-ms", "0"]) == 1
    assert "--apply-timeout-ms 0" in capsys.readouterr().err
    os.remove(plan_dir / "plan" / "broker-a" / "consumerOffset.json")
    admin = FakeAdmin({"broker-a": MasterState(0, "MASTER", table(V))})
    with pytest.raises(LiveApplyError, match="consumerOffset.json: No such file"):
        run(plan_dir, admin)
    summary = json.loads((plan_dir / "summary.json").read_text())
    summary["replicas"] = []  # roles lost: no master
    (plan_dir / "summary.json").write_text(json.dumps(summary))
    assert cli.main(["offset-diff", "--apply", str(plan_dir)]) == 1
    err = capsys.readouterr().err
    assert "expected one master replica" in err and err.count("\n") == 1
