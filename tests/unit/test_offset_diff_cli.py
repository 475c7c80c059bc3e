"""`relaymq offset-diff` without a JVM: options, errors (exit 1, one line), apply's compare-and-set, report."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from container import cli, cli_offset_diff
from metadata.consumer_offsets import loads
from metadata.data_version import DataVersion
from spark_tools import offset_diff_job
from spark_tools.offset_diff_model import Replica, plan_group
from spark_tools.offset_report import build_summary, render_console

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "offsets")


def options(add) -> dict[str, tuple]:
    parser = argparse.ArgumentParser()
    add(parser)
    return {a.dest: (tuple(a.option_strings), a.default, a.type) for a in parser._actions if a.dest != "help"}


def test_cli_and_job_declare_the_same_options():
    assert options(cli_offset_diff._add_arguments) == options(offset_diff_job.add_arguments)


def test_stable_interface_parses():
    args = cli.build_parser().parse_args(["offset-diff", "--snapshot", "a:0=x", "--snapshot", "a:1=y", "--output", "d", "--tolerance", "5"])
    assert args.snapshot == ["a:0=x", "a:1=y"] and args.output == "d" and args.tolerance == 5 and callable(args.handler)


def test_container_cli_does_not_import_spark_tools():
    code = "import sys, container.cli as c; c.build_parser(); print(any(m.startswith(('spark_tools', 'pyspark')) for m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=os.path.dirname(FIXTURES) + "/../..")
    assert result.stdout.strip() == "False", result.stderr


@pytest.mark.parametrize("argv, fragment", [
    (["offset-diff"], "exactly one of them"),
    (["offset-diff", "--snapshot", "a:0=" + os.path.join(FIXTURES, "truncated.json"), "--snapshot", "a:1=" + os.path.join(FIXTURES, "broker-a-slave.json")], "truncated.json"),
    (["offset-diff", "--snapshot", "a:1=" + os.path.join(FIXTURES, "broker-a-slave.json")], "exactly one master"),
    (["offset-diff", "--snapshot", "a:0=x", "--tolerance", "-1"], "--tolerance -1"),
    (["offset-diff", "--snapshot", "a:0"], "GROUP:BROKER_ID=PATH"),
    (["offset-diff", "--input-parquet", "/nonexistent/dir"], "not a directory"),
    (["offset-diff", "--apply", "/nonexistent/dir"], "cannot read summary.json"),
])
def test_input_errors_exit_1_with_one_line(argv, fragment, capsys):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert fragment in err and len(errors(err)) == 1 and "Traceback" not in err


def errors(err: str) -> list[str]:
    """stderr without the progress lines (``offset-diff [1.2 s]: ...``)."""
    return [line for line in err.splitlines() if not line.startswith("offset-diff [")]


def test_quiet_hides_progress(monkeypatch, capsys):
    monkeypatch.setattr(offset_diff_job, "build_session", lambda config: (_ for _ in ()).throw(RuntimeError("no java")))
    argv = ["offset-diff", "--quiet", "--snapshot", "broker-b:0=" + os.path.join(FIXTURES, "broker-b-master.json"),
            "--snapshot", "broker-b:1=" + os.path.join(FIXTURES, "broker-b-slave.json")]
    assert cli.main(argv) == 1
    assert capsys.readouterr().err == "relaymq: offset-diff: cannot start Spark: no java\n"


def test_spark_binds_loopback_by_default_and_can_be_told_otherwise():
    from container.cli_offset_diff import spark_binding

    loopback = (("spark.driver.bindAddress", "127.0.0.1"), ("spark.driver.host", "127.0.0.1"))
    assert spark_binding(None, "local[*]", {}) == ("127.0.0.1", loopback)
    assert spark_binding(None, "local[*]", {"SPARK_LOCAL_IP": "10.0.0.5"})[0] == "10.0.0.5"
    assert spark_binding("10.0.0.7", "local[2]", {"SPARK_LOCAL_IP": "10.0.0.5"})[0] == "10.0.0.7"
    assert spark_binding(None, "spark://master:7077", {}) == (None, ())


def test_bind_address_must_be_an_ip(capsys):
    with pytest.raises(SystemExit):
        cli.main(["offset-diff", "--bind-address", "not-an-ip"])
    assert "'not-an-ip' is not an IP address" in capsys.readouterr().err


def make_plan(tmp_path, counter_now: int):
    master, slave = tmp_path / "m.json", tmp_path / "s.json"
    master.write_text('{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1},"offsetTable":{"T@G":{0:5}}}')
    slave.write_text('{"dataVersion":{"counter":%d,"stateVersion":0,"timestamp":1},"offsetTable":{"T@G":{0:9}}}' % counter_now)
    plan_dir = tmp_path / "plan"
    (plan_dir / "plan" / "g").mkdir(parents=True)
    (plan_dir / "plan" / "g" / "consumerOffset.json").write_text('{"dataVersion":{"counter":6,"stateVersion":0,"timestamp":2},"offsetTable":{"T@G":{0:9}}}')
    record = {"g": {"merged_data_version": {"counter": 6, "stateVersion": 0, "timestamp": 2}, "replicas": [
        {"broker_id": 0, "source": str(master), "address": "", "data_version": {"counter": 3, "stateVersion": 0, "timestamp": 1}},
        {"broker_id": 1, "source": str(slave), "address": "", "data_version": {"counter": 5, "stateVersion": 0, "timestamp": 1}}]}}
    (plan_dir / "summary.json").write_text(json.dumps({"schema_version": 1, "plan": record}))
    return plan_dir, master, slave


def test_apply_writes_every_replica_when_nothing_moved(tmp_path, capsys):
    plan_dir, master, slave = make_plan(tmp_path, counter_now=5)
    assert cli.main(["offset-diff", "--apply", str(plan_dir)]) == 0
    for path in (master, slave):
        table = loads(path.read_text())
        assert table.get("T", "G", 0) == 9 and table.data_version == DataVersion(0, 2, 6)
    assert loads((tmp_path / "m.json.bak").read_text()).get("T", "G", 0) == 5


def test_apply_refuses_when_a_replica_moved(tmp_path, capsys):
    plan_dir, master, _ = make_plan(tmp_path, counter_now=8)
    before = master.read_text()
    assert cli.main(["offset-diff", "--apply", str(plan_dir)]) == 3
    assert master.read_text() == before and "NOT APPLIED" in capsys.readouterr().out


def test_console_top_k_total_equals_sum_of_rows():
    replicas = [Replica("g", 0, "master", DataVersion(0, 0, 1)), Replica("g", 1, "slave", DataVersion(0, 0, 2))]
    summary = build_summary([{"broker_group": "g", "keys_total": 3, "keys_diverged": 2, "keys_beyond_tolerance": 2,
                              "rollback_if_master_wins": 30, "rollback_native": 0}], replicas,
                            {"g": plan_group(replicas)}, 0, 0)
    top = [{"broker_group": "g", "topic": "T", "group": "G", "queue_id": q, "master_offset": 1, "native_offset": 1 + r,
            "safe_offset": 1 + r, "rollback_if_master_wins": r, "rollback_native": 0} for q, r in ((0, 20), (1, 10))]
    text = render_console(summary, top, [])
    total_line = next(line for line in text.splitlines() if line.strip().startswith("TOTAL"))
    assert total_line.split()[-2:] == ["30", "0"]
    assert summary["verdict"] == "DIVERGED" and summary["exit_code"] == 2
    assert "DIVERGED: 1 broker groups, 3 queues" in text and "<- native reverse sync picks" in text


def test_replica_fetch_errors_are_one_line(capsys):
    assert cli.main(["offset-diff", "--replica", "broker-a"]) == 1
    assert "BROKER_GROUP@HOST:PORT" in capsys.readouterr().err
    assert cli.main(["offset-diff", "--replica", "broker-a@127.0.0.1:1", "--fetch-timeout-ms", "2000"]) == 1
    err = capsys.readouterr().err
    assert "incomplete set of replicas: broker-a@127.0.0.1:1: UNAVAILABLE" in err and len(errors(err)) == 1
    assert cli.main(["offset-diff", "--replica", "broker-a@h:1", "--input-parquet", "."]) == 1
    assert "cannot be combined" in capsys.readouterr().err
    assert cli.main(["offset-diff", "--replica", "broker-a@h:1", "--snapshot", "a:0=x"]) == 1  # files are read first
    assert errors(capsys.readouterr().err) == ["relaymq: offset-diff: x: No such file or directory"]


def test_gate_takes_only_pre_online_and_not_with_apply(capsys):
    with pytest.raises(SystemExit):
        cli.main(["offset-diff", "--snapshot", "a:0=x", "--gate", "upgrade"])
    assert "invalid choice: 'upgrade'" in capsys.readouterr().err
    assert cli.main(["offset-diff", "--apply", "plan", "--gate", "pre-online"]) == 1
    assert "does not combine with --apply" in capsys.readouterr().err
    assert offset_diff_job.main(["--apply", "plan", "--gate", "pre-online"]) == 1
    assert "does not combine with --apply" in capsys.readouterr().err


def test_spark_that_cannot_start_is_one_line_exit_1(monkeypatch, capsys):
    def broken(config):
        raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.\nmore")

    monkeypatch.setattr(offset_diff_job, "build_session", broken)
    argv = ["offset-diff", "--snapshot", "broker-b:0=" + os.path.join(FIXTURES, "broker-b-master.json"),
            "--snapshot", "broker-b:1=" + os.path.join(FIXTURES, "broker-b-slave.json")]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "cannot start Spark: [JAVA_GATEWAY_EXITED]" in err and len(errors(err)) == 1
    assert "offset-diff [0.0 s]: reading 2 snapshot files" in err and "starting Spark (local[*], driver bound to" in err


def test_a_failing_spark_job_is_one_line_exit_1(monkeypatch, tmp_path, capsys):
    from pyspark.errors import PySparkException

    class BrokenSession:  # the job fails on its first Spark call, as when an executor is lost
        @property
        def read(self):
            raise PySparkException("[TASK_FAILED] executor lost\nstack")

    monkeypatch.setattr(offset_diff_job, "build_session", lambda config: BrokenSession())
    for part in ("replicas", "offsets"):
        (tmp_path / part).mkdir()
    assert cli.main(["offset-diff", "--input-parquet", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "Spark job failed: [TASK_FAILED] executor lost" in err and len(errors(err)) == 1
