"""The live fetch step: concurrency, timeouts, named failures, flat parquet, the gRPC source."""
from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pyarrow.parquet
import pytest

from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey, loads
from metadata.data_version import DataVersion
from services.offset_fetch import (
    OFFSETS_SCHEMA, QUEUES_SCHEMA, REPLICAS_SCHEMA, AdminReplicaSource, FetchConfig, FetchError, FetchedReplica,
    QueueRange, ReplicaTarget, fetch_all, write_parquet,
)

TABLE = ConsumerOffsetTable(DataVersion(1, 100, 7), {OffsetKey("T", "G"): {0: 5, 1: 9}, OffsetKey("T", "H"): {}})


class FakeSource:
    def __init__(self, block: set[str] = frozenset(), fail: set[str] = frozenset()):
        self.block, self.fail = block, fail
        self.running = self.peak = 0
        self.lock = threading.Lock()
        self.release = threading.Event()

    def fetch(self, target: ReplicaTarget, timeout_s: float) -> FetchedReplica:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            if target.address in self.block:
                self.release.wait(timeout_s * 10)
            if target.address in self.fail:
                raise ConnectionError("connection refused")
            threading.Event().wait(0.01)  # overlap with the others
            broker_id = int(target.address.rsplit(":", 1)[1]) % 10
            return FetchedReplica(TABLE, (QueueRange("T", 0, 0, 7),), "master" if broker_id == 0 else "slave", broker_id)
        finally:
            with self.lock:
                self.running -= 1


def targets(n: int) -> list[ReplicaTarget]:
    return [ReplicaTarget("broker-a", f"10.0.0.{i}:1091{i}") for i in range(n)]


def test_concurrency_is_bounded_and_order_kept():
    source = FakeSource()
    result = fetch_all(targets(6), source, FetchConfig(concurrency=2))
    assert source.peak <= 2 and not result.failures
    assert [t.address for t, _ in result.fetched] == [t.address for t in targets(6)]


def test_timeouts_and_failures_are_named():
    source = FakeSource(block={"10.0.0.1:10911"}, fail={"10.0.0.2:10912"})
    try:
        result = fetch_all(targets(3), source, FetchConfig(concurrency=3, timeout_ms=50))
    finally:
        source.release.set()
    assert len(result.fetched) == 1
    assert result.failures == ("broker-a@10.0.0.1:10911: no answer within 50 ms", "broker-a@10.0.0.2:10912: connection refused")
    with pytest.raises(FetchError, match="incomplete set of replicas: broker-a@10.0.0.1:10911"):
        write_parquet(result, "/nonexistent", 0)


def test_target_parsing_and_config_limits():
    assert ReplicaTarget.parse("broker-a@host:10911") == ReplicaTarget("broker-a", "host:10911")
    with pytest.raises(FetchError, match="BROKER_GROUP@HOST:PORT"):
        ReplicaTarget.parse("broker-a")
    with pytest.raises(FetchError, match="concurrency=0"):
        FetchConfig(concurrency=0).validate()


def test_flat_parquet_layout(tmp_path):
    result = fetch_all(targets(2), FakeSource(), FetchConfig())
    write_parquet(result, str(tmp_path), now_ms=123)
    replicas = pyarrow.parquet.read_table(tmp_path / "replicas").to_pylist()
    assert [(r["broker_id"], r["role"], r["counter"], r["state_version"], r["fetched_at_ms"]) for r in replicas] == [(0, "master", 7, 1, 123), (1, "slave", 7, 1, 123)]
    offsets = pyarrow.parquet.read_table(tmp_path / "offsets" / "part-broker-a-1.parquet").to_pylist()
    assert sorted((r["group"], r["queue_id"], r["offset"]) for r in offsets if r["group"] == "H") == [("H", -1, None)]
    assert len(offsets) == 3
    assert pyarrow.parquet.read_table(tmp_path / "queues").num_rows == 2


def test_parquet_schemas_match_the_spark_job():
    types = pytest.importorskip("pyspark.sql.types")
    from spark_tools import offset_diff_spark as job

    names = {"string": types.StringType(), "int32": types.IntegerType(), "int64": types.LongType()}
    for arrow, spark in ((OFFSETS_SCHEMA, job.OFFSETS_SCHEMA), (REPLICAS_SCHEMA, job.REPLICAS_SCHEMA), (QUEUES_SCHEMA, job.QUEUES_SCHEMA)):
        assert [(f.name, names[str(f.type)], f.nullable) for f in arrow] == [(f.name, f.dataType, f.nullable) for f in spark.fields]


def test_grpc_source_against_an_in_process_admin_service():
    from proto import admin_pb2 as pb
    from proto import admin_pb2_grpc as pb_grpc

    class Admin(pb_grpc.BrokerAdminServicer):
        def GetConsumerOffsets(self, request, context):
            assert request.broker_name == "broker-a"
            return pb.AdminGetConsumerOffsetsResponse(broker_name="broker-a", broker_id=1, role="SLAVE", document=TABLE.dumps())

        def TopicStatus(self, request, context):
            queues = [pb.AdminQueueStatus(queue_id=q, min_offset=0, max_offset=8) for q in (0, 1)]
            return pb.AdminTopicStatusResponse(topic=request.topic, brokers=[pb.AdminBrokerTopicStatus(broker_name="broker-a", broker_id=1, queues=queues)])

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_BrokerAdminServicer_to_server(Admin(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        result = fetch_all([ReplicaTarget("broker-a", f"127.0.0.1:{port}")], AdminReplicaSource(FetchConfig()), FetchConfig(timeout_ms=5000))
    finally:
        server.stop(None)
    assert not result.failures
    (_, replica), = result.fetched
    assert (replica.broker_id, replica.role, replica.table) == (1, "slave", loads(TABLE.dumps()))
    assert replica.queues == (QueueRange("T", 0, 0, 8), QueueRange("T", 1, 0, 8))


def test_grpc_source_names_an_unreachable_replica():
    result = fetch_all([ReplicaTarget("broker-a", "127.0.0.1:1")], AdminReplicaSource(FetchConfig()), FetchConfig(timeout_ms=2000))
    assert len(result.failures) == 1 and result.failures[0].startswith("broker-a@127.0.0.1:1: UNAVAILABLE: ")
    assert "\n" not in result.failures[0]
