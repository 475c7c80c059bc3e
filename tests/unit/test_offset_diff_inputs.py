"""Offset diff inputs: --snapshot specs, manifests, real-format files, bad files named."""
from __future__ import annotations

import os

import pytest

from metadata.data_version import DataVersion
from spark_tools.offset_diff_model import EMPTY_ENTRY_QUEUE_ID, OffsetDiffInputError, ReplicaId, diff_tables
from spark_tools.offset_inputs import SnapshotSpec, flatten, parse_manifest, parse_snapshot_spec, read_manifest, read_snapshot

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "offsets")


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def test_snapshot_spec_defaults_role_from_broker_id():
    assert parse_snapshot_spec("broker-a:0=/x/consumerOffset.json") == SnapshotSpec("broker-a", 0, "master", "/x/consumerOffset.json")
    assert parse_snapshot_spec("broker-a:1=/x=y.json") == SnapshotSpec("broker-a", 1, "slave", "/x=y.json")
    assert parse_snapshot_spec("broker-a:3:master=p").role == "master"


@pytest.mark.parametrize("text, fragment", [
    ("broker-a=p", "expected GROUP:BROKER_ID=PATH"),
    ("broker-a:0", "expected GROUP:BROKER_ID=PATH"),
    ("broker-a:x=p", "broker id 'x' is not an integer"),
    ("broker-a:-1=p", "non-negative"),
    ("bad group:0=p", "not a valid name"),
    ("broker-a:0:leader=p", "role 'leader'"),
])
def test_bad_snapshot_specs_say_what(text, fragment):
    with pytest.raises(OffsetDiffInputError, match=fragment):
        parse_snapshot_spec(text)


def test_manifest_paths_resolve_against_its_folder():
    specs = read_manifest(fixture("manifest.json"))
    assert [(s.broker_group, s.broker_id, s.role) for s in specs] == [
        ("broker-a", 0, "master"), ("broker-a", 1, "slave"), ("broker-b", 0, "master"), ("broker-b", 1, "slave")]
    assert all(os.path.exists(spec.path) for spec in specs)


@pytest.mark.parametrize("text, fragment", [
    ("{", "not JSON"), ("{}", "at least one entry"), ('{"replicas": [{"brokerId": 0}]}', r"replicas\[0\]"),
])
def test_bad_manifests(text, fragment):
    with pytest.raises(OffsetDiffInputError, match=fragment):
        parse_manifest(text, "m.json")


def test_rocketmq_fastjson_file_reads_with_version_and_ignores_group_topic_map():
    replica, table = read_snapshot(SnapshotSpec("broker-a", 0, "master", fixture("broker-a-master.json")), 1 << 20)
    assert replica.data_version == DataVersion(0, 1716364800000, 3)
    assert table.get("TopicOrders", "GID_orders", 0) == 37960 and table.get("%RETRY%GID_orders", "GID_orders", 0) == 0


def test_old_file_without_data_version_reads_as_zero():
    replica, _ = read_snapshot(SnapshotSpec("g", 0, "master", fixture("old-no-dataversion.json")), 1 << 20)
    assert replica.data_version == DataVersion()


@pytest.mark.parametrize("name, fragment", [
    ("truncated.json", "unexpected end of input|expected"), ("negative-offset.json", "non-negative"),
    ("bad-key.json", "topic@group"), ("missing.json", "No such file"),
])
def test_bad_files_are_named(name, fragment):
    with pytest.raises(OffsetDiffInputError, match=fragment) as info:
        read_snapshot(SnapshotSpec("g", 0, "master", fixture(name)), 1 << 20)
    assert name in str(info.value)


def test_oversized_and_empty_files(tmp_path):
    with pytest.raises(OffsetDiffInputError, match="over the limit.*file_bytes_max"):
        read_snapshot(SnapshotSpec("g", 0, "master", fixture("broker-a-master.json")), 10)
    empty = tmp_path / "consumerOffset.json"
    empty.write_text("  \n")
    with pytest.raises(OffsetDiffInputError, match="empty file"):
        read_snapshot(SnapshotSpec("g", 0, "master", str(empty)), 100)


def test_flatten_marks_empty_entries(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"offsetTable":{"T@G":{},"T@H":{3:7}}}')
    replica, table = read_snapshot(SnapshotSpec("g", 1, "slave", str(path)), 100)
    assert sorted(flatten(replica, table), key=str) == sorted([("g", 1, "T", "G", EMPTY_ENTRY_QUEUE_ID, None), ("g", 1, "T", "H", 3, 7)], key=str)


def test_fixture_scenario_in_plain_python():
    """broker-a: the master comes back stale; its newer slave wins natively; safe = max."""
    replicas, tables = [], {}
    for broker_id, name in ((0, "broker-a-master.json"), (1, "broker-a-slave.json")):
        replica, table = read_snapshot(SnapshotSpec("broker-a", broker_id, "master" if broker_id == 0 else "slave", fixture(name)), 1 << 20)
        replicas.append(replica)
        tables[ReplicaId("broker-a", broker_id)] = {(k.topic, k.group): dict(q) for k, q in table.offsets.items()}
    result = diff_tables(replicas, tables)
    assert result.plans["broker-a"].native_winner == 1
    assert sum(key.rollback_if_master_wins or 0 for key in result.keys) == 2250 + 250
    assert sum(1 for key in result.keys if key.status == "one_sided") == 2
