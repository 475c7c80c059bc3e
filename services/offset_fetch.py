"""The offset diff's live fetch step: pull each replica's offsets, write flat parquet for Spark.

Rules (shared/reference/offset-diff.md, "Fetch snapshots outside Spark"):
- Plain Python, outside Spark: one call per replica through a :class:`ReplicaSource`
  (the broker admin gRPC API in production, an in-process fake in tests), at most
  ``concurrency`` at a time, each bounded by ``timeout_ms``; a replica that fails or does
  not answer in time is reported by name, never silently left out (a partial diff could
  look in sync).
- Output is flat parquet, the layout the Spark job reads with explicit schemas
  (spark_tools/offset_diff_spark.py; a test keeps the two equal)::

      DIR/replicas/part-0.parquet            one row per replica (identity, role, DataVersion)
      DIR/offsets/part-<group>-<id>.parquet  one row per replica and queue
      DIR/queues/part-<group>-<id>.parquet   per replica and queue: min and max offset

  An empty ``topic@group`` entry becomes one row with queue id -1 and a null offset.
- Time comes from a clock argument (``now_ms``), read once per fetch run.
"""
from __future__ import annotations

import concurrent.futures
import os
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import pyarrow
import pyarrow.parquet

from metadata.consumer_offsets import ConsumerOffsetTable, OffsetFileError, loads
from metadata.names import is_valid_group_name

EMPTY_ENTRY_QUEUE_ID = -1

OFFSETS_SCHEMA = pyarrow.schema([
    pyarrow.field("broker_group", pyarrow.string(), False), pyarrow.field("broker_id", pyarrow.int32(), False),
    pyarrow.field("topic", pyarrow.string(), False), pyarrow.field("group", pyarrow.string(), False),
    pyarrow.field("queue_id", pyarrow.int32(), False), pyarrow.field("offset", pyarrow.int64(), True),
])
REPLICAS_SCHEMA = pyarrow.schema([
    pyarrow.field("broker_group", pyarrow.string(), False), pyarrow.field("broker_id", pyarrow.int32(), False),
    pyarrow.field("role", pyarrow.string(), False), pyarrow.field("state_version", pyarrow.int64(), False),
    pyarrow.field("counter", pyarrow.int64(), False), pyarrow.field("timestamp_ms", pyarrow.int64(), False),
    pyarrow.field("source", pyarrow.string(), True), pyarrow.field("address", pyarrow.string(), True),
    pyarrow.field("fetched_at_ms", pyarrow.int64(), True),
])
QUEUES_SCHEMA = pyarrow.schema([
    pyarrow.field("broker_group", pyarrow.string(), False), pyarrow.field("broker_id", pyarrow.int32(), False),
    pyarrow.field("topic", pyarrow.string(), False), pyarrow.field("queue_id", pyarrow.int32(), False),
    pyarrow.field("min_offset", pyarrow.int64(), False), pyarrow.field("max_offset", pyarrow.int64(), False),
])


class FetchError(Exception):
    """The fetch could not produce a complete input; the message names the replicas."""


@dataclass(frozen=True)
class FetchConfig:
    concurrency: int = 8  # replicas fetched at once
    timeout_ms: int = 10_000  # per replica, all its calls included
    topic_status_max: int = 10_000  # topics whose queue min/max one replica is asked for

    def validate(self) -> "FetchConfig":
        for name in ("concurrency", "timeout_ms", "topic_status_max"):
            if getattr(self, name) < 1:
                raise FetchError(f"fetch config {name}={getattr(self, name)}: must be at least 1")
        return self


@dataclass(frozen=True)
class ReplicaTarget:
    """One replica to fetch: its broker group (RocketMQ's brokerName) on one container."""

    broker_group: str
    address: str

    @classmethod
    def parse(cls, text: str) -> "ReplicaTarget":
        """``BROKER_GROUP@HOST:PORT``."""
        group, sep, address = text.partition("@")
        if not sep or not address or not is_valid_group_name(group) or ":" not in address:
            raise FetchError(f"--replica {text!r}: expected BROKER_GROUP@HOST:PORT")
        return cls(group, address)


@dataclass(frozen=True)
class QueueRange:
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True)
class FetchedReplica:
    table: ConsumerOffsetTable
    queues: tuple[QueueRange, ...]
    role: str
    broker_id: int


class ReplicaSource(Protocol):
    def fetch(self, target: ReplicaTarget, timeout_s: float) -> FetchedReplica: ...


@dataclass(frozen=True)
class FileReplica:
    """A replica read from its files (a stopped master), written next to the fetched ones."""

    broker_group: str
    broker_id: int
    role: str
    table: ConsumerOffsetTable
    source: str
    modified_ms: int = 0


@dataclass(frozen=True)
class FetchResult:
    fetched: tuple[tuple[ReplicaTarget, FetchedReplica], ...]
    failures: tuple[str, ...]  # "group@address: reason"


def fetch_all(targets: Sequence[ReplicaTarget], source: ReplicaSource, config: FetchConfig) -> FetchResult:
    """Fetch every target, ``config.concurrency`` at a time; failures and timeouts are named."""
    config.validate()
    timeout_s = config.timeout_ms / 1000
    fetched, failures = [], []
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="offset-fetch")
    try:
        futures = {pool.submit(source.fetch, target, timeout_s): target for target in targets}
        # each call carries its own deadline; the wait adds one timeout for queueing behind the pool
        rounds = -(-len(targets) // config.concurrency)
        done, pending = concurrent.futures.wait(futures, timeout=timeout_s * (rounds + 1))
        for future in pending:
            future.cancel()
            failures.append(f"{futures[future].broker_group}@{futures[future].address}: no answer within {config.timeout_ms} ms")
        for future in done:
            target = futures[future]
            try:
                fetched.append((target, future.result()))
            except Exception as exc:  # a source's failure of any kind is reported by replica name
                failures.append(f"{target.broker_group}@{target.address}: {exc}")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    order = {target: index for index, target in enumerate(targets)}
    fetched.sort(key=lambda item: order[item[0]])
    return FetchResult(tuple(fetched), tuple(sorted(failures)))


def _offset_rows(group: str, broker_id: int, table: ConsumerOffsetTable) -> dict[str, list]:
    columns: dict[str, list] = {name: [] for name in OFFSETS_SCHEMA.names}
    for key, queues in table.offsets.items():
        items = list(queues.items()) or [(EMPTY_ENTRY_QUEUE_ID, None)]
        for queue_id, offset in items:
            for name, value in zip(OFFSETS_SCHEMA.names, (group, broker_id, key.topic, key.group, queue_id, offset)):
                columns[name].append(value)
    return columns


def write_parquet(result: FetchResult, out_dir: str, now_ms: int, files: Sequence[FileReplica] = ()) -> str:
    """Write the flat layout (``files``: replicas read from files, written alongside); refuses
    (FetchError) when any replica is missing."""
    if result.failures:
        raise FetchError("cannot diff an incomplete set of replicas: " + "; ".join(result.failures))
    if not result.fetched and not files:
        raise FetchError("no replica to write")
    for part in ("replicas", "offsets", "queues"):
        os.makedirs(os.path.join(out_dir, part), exist_ok=True)
    replicas: dict[str, list] = {name: [] for name in REPLICAS_SCHEMA.names}
    for replica in files:
        version = replica.table.data_version
        row = (replica.broker_group, replica.broker_id, replica.role, version.state_version, version.counter,
               version.timestamp_ms, replica.source, "", replica.modified_ms)
        for name, value in zip(REPLICAS_SCHEMA.names, row):
            replicas[name].append(value)
        offsets = pyarrow.table(_offset_rows(replica.broker_group, replica.broker_id, replica.table), schema=OFFSETS_SCHEMA)
        pyarrow.parquet.write_table(offsets, os.path.join(out_dir, "offsets", f"part-{replica.broker_group}-{replica.broker_id}.parquet"))
    for target, replica in result.fetched:
        version = replica.table.data_version
        row = (target.broker_group, replica.broker_id, replica.role, version.state_version, version.counter,
               version.timestamp_ms, "", target.address, now_ms)
        for name, value in zip(REPLICAS_SCHEMA.names, row):
            replicas[name].append(value)
        part = f"part-{target.broker_group}-{replica.broker_id}.parquet"
        offsets = pyarrow.table(_offset_rows(target.broker_group, replica.broker_id, replica.table), schema=OFFSETS_SCHEMA)
        pyarrow.parquet.write_table(offsets, os.path.join(out_dir, "offsets", part))
        queue_rows = [(target.broker_group, replica.broker_id, q.topic, q.queue_id, q.min_offset, q.max_offset) for q in replica.queues]
        queues = pyarrow.table({name: [row[i] for row in queue_rows] for i, name in enumerate(QUEUES_SCHEMA.names)}, schema=QUEUES_SCHEMA)
        pyarrow.parquet.write_table(queues, os.path.join(out_dir, "queues", part))
    pyarrow.parquet.write_table(pyarrow.table(replicas, schema=REPLICAS_SCHEMA), os.path.join(out_dir, "replicas", "part-0.parquet"))
    return out_dir


class AdminReplicaSource:
    """ReplicaSource over the broker admin gRPC API (GetConsumerOffsets, then TopicStatus per topic)."""

    def __init__(self, config: FetchConfig, channel_factory: Callable[[str], object] | None = None,
                 credentials=None):
        """``credentials``: what each call is signed with (default: the caller's, which
        ``relaymq offset-diff --access-key/--secret-key`` sets); resolved here, on the caller's
        thread, because the fetches run on a pool's threads."""
        from services.admin.client import CALLER_CREDENTIALS

        self.config = config
        self._channel_factory = channel_factory
        self._credentials = credentials or CALLER_CREDENTIALS.get()

    def _signed(self):
        return self._credentials.metadata() if self._credentials is not None else None

    def fetch(self, target: ReplicaTarget, timeout_s: float) -> FetchedReplica:
        import time

        import grpc

        from services.cluster_auth import internal_sync_channel

        from proto import admin_pb2 as pb
        from proto import admin_pb2_grpc as pb_grpc

        deadline = time.monotonic() + timeout_s
        from services.ha.converters import MAX_FRAME_BYTES

        # a table of a million keys is about 13 MB: past gRPC's default 4 MiB, within the internal port's limit
        options = [("grpc.max_receive_message_length", MAX_FRAME_BYTES)]
        channel = (self._channel_factory(target.address) if self._channel_factory
                   else internal_sync_channel(target.address, options=options))
        try:
            stub = pb_grpc.BrokerAdminStub(channel)
            reply = stub.GetConsumerOffsets(pb.AdminGetConsumerOffsetsRequest(broker_name=target.broker_group),
                                            timeout=max(0.001, deadline - time.monotonic()), metadata=self._signed())
            try:
                table = loads(reply.document, where=f"{target.broker_group}@{target.address} consumerOffset.json")
            except OffsetFileError as exc:
                raise FetchError(str(exc)) from None
            topics = sorted({key.topic for key in table.offsets})[: self.config.topic_status_max]
            queues = []
            for topic in topics:
                try:
                    status = stub.TopicStatus(pb.AdminTopicStatusRequest(broker_name=target.broker_group, topic=topic),
                                              timeout=max(0.001, deadline - time.monotonic()), metadata=self._signed())
                except grpc.RpcError as exc:
                    if exc.code() == grpc.StatusCode.NOT_FOUND:
                        continue  # offsets of a deleted topic: no queue bounds to check
                    raise
                queues += [QueueRange(topic, q.queue_id, q.min_offset, q.max_offset)
                           for broker in status.brokers if broker.broker_id == reply.broker_id for q in broker.queues]
            role = "master" if reply.role.lower() == "master" else "slave"
            return FetchedReplica(table, tuple(queues), role, int(reply.broker_id))
        except grpc.RpcError as exc:
            raise FetchError(f"{exc.code().name}: {exc.details()}") from None
        finally:
            channel.close()
