"""The Spark offset diff: plan shape, agreement with the plain-Python reference, outputs, exit codes."""
from __future__ import annotations

import io
import json
import os
import random

import pytest

from metadata.data_version import DataVersion
from spark_tools.offset_diff_job import DiffConfig, run
from spark_tools.offset_diff_model import Replica, ReplicaId, diff_tables
from spark_tools.offset_diff_spark import OFFSETS_SCHEMA, QUEUES_SCHEMA, offset_diff, plan_frame, wide_offsets
from spark_tools.offset_inputs import SnapshotSpec

pytestmark = pytest.mark.spark
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "offsets")


def spec(group: str, broker_id: int, name: str) -> SnapshotSpec:
    return SnapshotSpec(group, broker_id, "master" if broker_id == 0 else "slave", os.path.join(FIXTURES, name))


def shuffles(frame) -> int:
    plan = frame._jdf.queryExecution().executedPlan().toString()
    return sum(1 for line in plan.splitlines() if "Exchange" in line and "BroadcastExchange" not in line and "ReusedExchange" not in line)


@pytest.mark.parametrize("replica_count", [2, 3])
def test_plan_has_exactly_one_shuffle_whatever_the_replica_count(spark, replica_count):
    replicas = [Replica("g", b, "master" if b == 0 else "slave", DataVersion()) for b in range(replica_count)]
    rows = [("g", b, "T", "G", q, 10 + b) for b in range(replica_count) for q in range(2)]
    detail = offset_diff(spark.createDataFrame(rows, OFFSETS_SCHEMA), plan_frame(spark, replicas), list(range(replica_count)))
    assert shuffles(detail) == 1
    assert "PythonUDF" not in detail._jdf.queryExecution().executedPlan().toString()


def test_wide_offsets_is_one_row_per_key_with_a_column_per_replica(spark):
    from pyspark.testing import assertDataFrameEqual

    rows = [("g", 0, "T", "G", 0, 5), ("g", 1, "T", "G", 0, 7), ("g", 1, "T", "G", 1, 3), ("g", 0, "T", "H", -1, None)]
    actual = wide_offsets(spark.createDataFrame(rows, OFFSETS_SCHEMA), [0, 1])
    expected = spark.createDataFrame(
        [("g", "T", "G", 0, 5, 7, False, True, True), ("g", "T", "G", 1, None, 3, False, True, True)],
        "broker_group string, topic string, group string, queue_id int, offset_b0 bigint, offset_b1 bigint, unknown_id boolean, "
        "entry_b0 boolean, entry_b1 boolean")
    assertDataFrameEqual(actual, expected)


def random_case(seed: int):
    rng = random.Random(seed)
    replicas, tables, rows = [], {}, []
    for group in ("ga", "gb"):
        for broker_id in range(3):
            version = DataVersion(rng.randint(0, 1), rng.randint(0, 2), rng.randint(0, 2))
            replicas.append(Replica(group, broker_id, "master" if broker_id == 0 else "slave", version))
            table = {}
            for topic, consumer in (("T", "G"), ("T", "H"), ("U", "G")):
                if rng.random() < 0.8:
                    table[(topic, consumer)] = {q: rng.randint(0, 50) for q in range(4) if rng.random() < 0.8}
            tables[ReplicaId(group, broker_id)] = table
            for (topic, consumer), queues in table.items():
                rows += [(group, broker_id, topic, consumer, q, o) for q, o in queues.items()] or [(group, broker_id, topic, consumer, -1, None)]
    return replicas, tables, rows


def test_spark_agrees_with_the_plain_python_reference(spark):
    replicas, tables, rows = [], {}, []
    for seed in range(4):  # one Spark job over four independent cases, broker groups renamed per seed
        case_replicas, case_tables, case_rows = random_case(seed)
        rename = lambda name: f"{name}{seed}"  # noqa: E731
        replicas += [Replica(rename(r.broker_group), r.broker_id, r.role, r.data_version) for r in case_replicas]
        tables.update({ReplicaId(rename(k.broker_group), k.broker_id): v for k, v in case_tables.items()})
        rows += [(rename(row[0]), *row[1:]) for row in case_rows]
    limits = {(r.broker_group, "T", 0): 30 for r in replicas}
    queues = spark.createDataFrame([(g, 0, t, q, 0, m) for (g, t, q), m in limits.items()], QUEUES_SCHEMA)
    detail = offset_diff(spark.createDataFrame(rows, OFFSETS_SCHEMA), plan_frame(spark, replicas), [0, 1, 2], 3, queues)
    got = {(r.broker_group, r.topic, r.group, r.queue_id): r for r in detail.collect()}
    expected = diff_tables(replicas, tables, tolerance=3, queue_max=limits)
    assert set(got) == {(k.broker_group, k.topic, k.group, k.queue_id) for k in expected.keys}
    for key in expected.keys:
        row = got[(key.broker_group, key.topic, key.group, key.queue_id)]
        assert (row.status, row.spread, row.ahead_id, row.safe_offset, row.native_offset, row.master_offset,
                row.rollback_native, row.rollback_if_master_wins, row.reset_conflict, row.beyond_max) == (
            key.status, key.spread, key.ahead_id, key.safe_offset, key.native_offset, key.master_offset,
            key.rollback_native, key.rollback_if_master_wins, key.reset_conflict, key.beyond_max), key
    assert len({k.broker_group for k in expected.keys}) >= 6


def test_fixtures_end_to_end_with_output(spark, tmp_path):
    config = DiffConfig(snapshots=(spec("broker-a", 0, "broker-a-master.json"), spec("broker-a", 1, "broker-a-slave.json"),
                                   spec("broker-b", 0, "broker-b-master.json"), spec("broker-b", 1, "broker-b-slave.json")),
                        output=str(tmp_path))
    out = io.StringIO()
    assert run(config, spark=spark, now_ms=1_800_000_000_000, out=out) == 2
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["schema_version"] == 1 and summary["verdict"] == "DIVERGED"
    assert (summary["keys_total"], summary["keys_in_sync"], summary["keys_diverged"], summary["keys_one_sided"]) == (11, 7, 2, 2)
    assert summary["native_dropped"] == 0 and summary["broker_groups"]["broker-b"]["keys_in_sync"] == 2
    assert summary["broker_groups"]["broker-a"]["rollback_if_master_wins"] == 2500
    assert summary["broker_groups"]["broker-a"]["rollback_native"] == 0
    assert summary["broker_groups"]["broker-b"]["rollback_if_master_wins"] == 0
    assert spark.read.parquet(str(tmp_path / "detail")).count() == 11  # in-sync keys too
    plan_lines = (tmp_path / "plan.csv").read_bytes().decode().split("\r\n")  # csv.writer's excel dialect
    keys = [line.split(",")[:3] + [int(line.split(",")[3])] for line in plan_lines[1:-1]]
    assert len(plan_lines) == 13 and plan_lines[-1] == "" and keys == sorted(keys)
    assert plan_lines[0] == "broker_group,topic,group,queue_id,master_offset,native_offset,safe_offset,rollback_if_master_wins,rollback_native,status,action"
    assert "broker-a,TopicOrders,GID_orders,0,37960,40210,40210,2250,0,diverged,raise" in plan_lines
    from metadata.consumer_offsets import loads

    for group in ("broker-a", "broker-b"):  # byte for byte what ConsumerOffsetTable.dumps writes
        text = (tmp_path / "plan" / group / "consumerOffset.json").read_text()
        assert loads(text).dumps() == text
    merged = loads((tmp_path / "plan" / "broker-a" / "consumerOffset.json").read_text())
    assert merged.get("TopicOrders", "GID_orders", 0) == 40210 and merged.data_version == DataVersion(0, 1_800_000_000_000, 6)
    assert not (tmp_path / ".plan-parts").exists()
    assert all((tmp_path / name).stat().st_size > 0 for name in ("rollback_distribution.png", "rollback_per_group.png"))
    assert "DIVERGED: 2 broker groups, 11 queues" in out.getvalue()


def test_in_sync_and_needs_human_exit_codes(spark, tmp_path, capsys):
    from container import cli

    def snapshots(group: str, master: str, slave: str) -> list[str]:  # through the CLI's exact --snapshot spelling
        return ["--snapshot", f"{group}:0={os.path.join(FIXTURES, master)}", "--snapshot", f"{group}:1={os.path.join(FIXTURES, slave)}"]

    assert cli.main(["offset-diff", *snapshots("broker-b", "broker-b-master.json", "broker-b-slave.json")]) == 0
    assert cli.main(["offset-diff", *snapshots("broker-c", "broker-c-master-reset.json", "broker-c-slave.json")]) == 3
    assert capsys.readouterr().out.count("NEEDS_HUMAN") == 1
    near = [tmp_path / "m.json", tmp_path / "s.json"]
    near[0].write_text('{"offsetTable":{"T@G":{0:100}}}')
    near[1].write_text('{"offsetTable":{"T@G":{0:104}}}')
    specs = (SnapshotSpec("g", 0, "master", str(near[0])), SnapshotSpec("g", 1, "slave", str(near[1])))
    assert run(DiffConfig(snapshots=specs, tolerance=4), spark=spark, now_ms=0, out=io.StringIO()) == 0  # spread 4: exit 2 at 3


def test_fetched_parquet_with_queue_bounds_flags_offsets_beyond_max(spark, tmp_path):
    from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey
    from services.offset_fetch import FetchedReplica, FetchResult, QueueRange, ReplicaTarget, write_parquet

    def replica(broker_id: int, offset: int, queue_max: int) -> tuple:
        table = ConsumerOffsetTable(DataVersion(0, 0, 4), {OffsetKey("T", "G"): {0: offset}})
        return ReplicaTarget("broker-a", f"h:{broker_id}"), FetchedReplica(table, (QueueRange("T", 0, 0, queue_max),), "master" if broker_id == 0 else "slave", broker_id)

    write_parquet(FetchResult((replica(0, 50, 60), replica(1, 70, 65)), ()), str(tmp_path), now_ms=1)
    out = io.StringIO()
    assert run(DiffConfig(input_parquet=str(tmp_path)), spark=spark, now_ms=0, out=out) == 3
    assert "h:0" in out.getvalue() and "NEEDS_HUMAN" in out.getvalue() and "1 conflicts need a decision" in out.getvalue()


def test_relaymq_offset_diff_entry_point_in_process(spark, tmp_path, capsys):
    from container import cli

    argv = ["offset-diff", "--manifest", os.path.join(FIXTURES, "manifest.json"), "--output", str(tmp_path / "out"), "--tolerance", "0"]
    assert cli.main(argv) == 2
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["verdict"] == "DIVERGED" and summary["keys_diverged"] == 2
    assert "REPLICAS" in capsys.readouterr().out


def test_offsets_of_unlisted_replicas_are_refused_not_dropped(spark):
    from spark_tools.offset_rollups import collect_groups, compact

    replicas = [Replica("g", 0, "master", DataVersion()), Replica("g", 1, "slave", DataVersion()), Replica("h", 0, "master", DataVersion())]
    rows = [("g", 0, "T", "G", 0, 5), ("g", 1, "T", "G", 0, 5), ("g", 7, "T", "G", 1, 5),  # broker id 7 unknown
            ("x", 0, "T", "G", 0, 5), ("h", 1, "T", "G", 0, 5), ("h", 0, "T", "G", 0, 5)]  # group x unknown; h has no id 1
    detail = offset_diff(spark.createDataFrame(rows, OFFSETS_SCHEMA), plan_frame(spark, replicas), [0, 1])
    compacted = compact(detail)
    assert "SortAggregate" not in compacted._jdf.queryExecution().executedPlan().toString()  # no sort of every key
    stray = {row["broker_group"]: row["stray_keys"] for row in collect_groups(compacted)}
    assert stray == {"g": 1, "h": 1, "x": 1}


def test_a_plan_from_live_fetches_is_what_the_live_apply_reads(spark, tmp_path):
    from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey
    from metadata.offset_write import QueueOffset
    from services.offset_apply import raises, read_live_plan
    from services.offset_fetch import FetchedReplica, FetchResult, QueueRange, ReplicaTarget, write_parquet

    tables = {broker_id: ConsumerOffsetTable(DataVersion(0, 0, 4 + broker_id), {OffsetKey("T", "G"): {0: offset, 1: 3}})
              for broker_id, offset in ((0, 50), (1, 70))}
    fetched = tuple((ReplicaTarget("broker-a", f"h:{broker_id}"),
                     FetchedReplica(table, (QueueRange("T", 0, 0, 100), QueueRange("T", 1, 0, 100)), "master" if broker_id == 0 else "slave", broker_id))
                    for broker_id, table in tables.items())
    write_parquet(FetchResult(fetched, ()), str(tmp_path / "fetch"), now_ms=1)
    assert run(DiffConfig(input_parquet=str(tmp_path / "fetch"), output=str(tmp_path / "out")), spark=spark, now_ms=0, out=io.StringIO()) == 2
    plan = read_live_plan(str(tmp_path / "out"))
    (target,) = plan.targets
    assert (target.broker_group, target.broker_id, target.address, target.planned, target.slaves) == ("broker-a", 0, "h:0", DataVersion(0, 0, 4), (1,))
    assert raises(plan.safe_table("broker-a"), tables[0]) == [QueueOffset("T", "G", 0, 70)]


def _gate_inputs(folder, master_version, slave_version, master_offsets, slave_offsets):
    """A stopped master's consumerOffset.json (file) next to its live slave (fetched), in one folder."""
    from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey
    from services.offset_fetch import FetchedReplica, FetchResult, FileReplica, ReplicaTarget, write_parquet

    def table(version, offsets):
        return ConsumerOffsetTable(version, {OffsetKey(topic, group): queues for (topic, group), queues in offsets.items()})

    master = FileReplica("broker-a", 0, "master", table(master_version, master_offsets), "/data/a0/consumerOffset.json")
    slave = (ReplicaTarget("broker-a", "h:2"), FetchedReplica(table(slave_version, slave_offsets), (), "slave", 1))
    return write_parquet(FetchResult((slave,), ()), str(folder), now_ms=1, files=[master])


def test_gate_open_when_the_rejoin_adopts_the_acting_slaves_table(spark, tmp_path):
    master = {("T", "orders"): {0: 10, 1: 20}, ("T", "audit"): {0: 7}, ("T", "only-master"): {0: 3}}
    slave = {("T", "orders"): {0: 40, 1: 20}, ("T", "audit"): {0: 7}}
    folder = _gate_inputs(tmp_path / "in", DataVersion(0, 1, 90), DataVersion(1, 2, 50), master, slave)
    out = io.StringIO()
    assert run(DiffConfig(input_parquet=folder, output=str(tmp_path / "out"), gate="pre-online"), spark=spark, now_ms=0,
               out=out) == 0
    gate = json.loads((tmp_path / "out" / "summary.json").read_text())["gate"]
    rows = {g["group"]: g for g in gate["consumer_groups"]}
    assert gate["open"] and gate["masters_adopt"] == {"broker-a": [1]}
    assert (rows["orders"]["keys"], rows["orders"]["keys_adopted"], rows["orders"]["messages_advanced"],
            rows["orders"]["rollback_if_master_wins"], rows["orders"]["keys_rolled_back"]) == (2, 1, 30, 30, 0)
    assert rows["audit"]["keys_adopted"] == 0 and rows["only-master"]["keys_dropped"] == 0  # kept
    assert rows["orders"]["keys_master_lacks"] == 0
    text = out.getvalue()
    assert "GATE OPEN (pre-online)" in text and "master 0 adopts the tables of [1]" in text


def test_gate_closed_when_the_masters_newer_table_would_roll_consumers_back(spark, tmp_path, capsys):
    """The slave acted (offsets 40) but a stale master's table is newer by version (upstream #9711:
    a store that did not bump): the rejoin keeps the master's 10 -- exit 4."""
    master = {("T", "orders"): {0: 10}}
    slave = {("T", "orders"): {0: 40}, ("T", "new"): {0: 5}}
    folder = _gate_inputs(tmp_path / "in", DataVersion(2, 9, 1), DataVersion(1, 2, 50), master, slave)
    out = io.StringIO()
    assert run(DiffConfig(input_parquet=folder, gate="pre-online"), spark=spark, now_ms=0, out=out) == 4
    text = out.getvalue()
    assert "GATE CLOSED (pre-online): a rejoin would roll back 1 queues (30 messages) and drop 1 of 2 consumer groups" in text
    slave_only = {("T", "orders"): {0: 40}, ("T", "new"): {0: 5}}
    folder = _gate_inputs(tmp_path / "in2", DataVersion(0, 1, 1), DataVersion(1, 2, 50), master, slave_only)
    out = io.StringIO()
    assert run(DiffConfig(input_parquet=folder, gate="pre-online"), spark=spark, now_ms=0, out=out) == 0
    assert "2 queues taken from slaves (+30 messages, 1 queues the masters have no offset for)" in out.getvalue()
    assert "master 0 keeps its own table" in text

