"""The offset diff job, unchanged, under ``spark-submit`` against a Spark standalone cluster: a
master and two workers on loopback started from the installed pyspark's own launcher classes
(tests/support/spark_standalone.py), reading its input from a path every worker sees.  Its
answer is the one the job gives in-process (the gate's exit code, the summary), and the work
ran on both workers' executors."""
from __future__ import annotations

import json

import pytest

from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey
from metadata.data_version import DataVersion
from services.offset_fetch import FetchedReplica, FetchResult, FileReplica, ReplicaTarget, write_parquet
from tests.support.spark_standalone import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def gate_input(folder) -> str:
    """broker-a: a stopped master's file next to its acting slave (newer state version); broker-b:
    a master whose table is newer than its slave's (the rejoin keeps it: the slave's 15 rolls back)."""
    def table(version, entries):
        return ConsumerOffsetTable(version, {OffsetKey(t, g): q for (t, g), q in entries.items()})

    files = [FileReplica("broker-a", 0, "master", table(DataVersion(0, 1, 9), {("T", "g1"): {0: 10, 1: 4}}), "a0.json"),
             FileReplica("broker-b", 0, "master", table(DataVersion(0, 1, 9), {("T", "g2"): {0: 10}}), "b0.json")]
    live = [(ReplicaTarget("broker-a", "h:1"),
             FetchedReplica(table(DataVersion(1, 1, 5), {("T", "g1"): {0: 25, 1: 4}}), (), "slave", 1)),
            (ReplicaTarget("broker-b", "h:2"),
             FetchedReplica(table(DataVersion(0, 0, 5), {("T", "g2"): {0: 15}}), (), "slave", 1))]
    return write_parquet(FetchResult(tuple(live), ()), str(folder), now_ms=1, files=files)


def test_spark_submit_to_a_standalone_cluster_runs_the_job_unchanged(tmp_path):
    folder = gate_input(tmp_path / "input")
    cluster = StandaloneCluster(tmp_path / "cluster").start()
    try:
        done = cluster.submit(["--input-parquet", folder, "--output", str(tmp_path / "out"), "--gate", "pre-online"])
    finally:
        cluster.close()
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-4000:]  # broker-b's rejoin rolls g2 back
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    gate = {(g["broker_group"], g["group"]): g for g in summary["gate"]["consumer_groups"]}
    assert gate[("broker-a", "g1")]["messages_advanced"] == 15 and gate[("broker-a", "g1")]["keys_rolled_back"] == 0
    assert gate[("broker-b", "g2")]["rollback_on_rejoin"] == 5 and summary["gate"]["masters_adopt"] == {
        "broker-a": [1], "broker-b": []}
    assert "GATE CLOSED (pre-online)" in done.stdout
    assert (tmp_path / "out" / "plan" / "broker-a" / "consumerOffset.json").exists()
    assert "Registering app relaymq-offset-diff" in cluster.log("master")
    launched = [i for i in range(cluster.workers) if "Asked to launch executor" in cluster.log(f"worker-{i}")]
    assert launched == [0, 1], "the job's executors ran on both workers"
