"""The offset diff as Spark transformations: plain DataFrame-in, DataFrame-out functions.

Rules (shared/reference/offset-diff.md, "the right Spark plan"):
- Input is long format, one row per replica and queue, read with the explicit schemas
  below (never inferred).
- One grouped aggregation with one conditional column per broker id
  (``max(when(broker_id == b, offset))``): a single shuffle whatever the number of replicas.
  The rows are hash-partitioned by (broker group, topic, group) first, so the aggregation by
  queue and the window that asks "does this replica hold the topic@group entry at all"
  (needed to model putAll's whole-entry replacement) reuse that one shuffle.  Broker
  groups never share a key, so the work partitions naturally.
- The per-group reverse-sync plan is decided on the driver by
  :mod:`spark_tools.offset_diff_model` (a handful of rows) and broadcast.
- Built-in functions only: no Python UDF anywhere in the hot path.
- Offsets of a replica missing from the replica table are not dropped: their keys come out
  with ``stray`` set (checked in the same pass, no extra scan), and the run refuses them.
- Semantics are those of :mod:`spark_tools.offset_diff_model`; tests compare the two.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

from spark_tools.offset_diff_model import (
    EMPTY_ENTRY_QUEUE_ID, STATUS_DIVERGED, STATUS_IN_SYNC, STATUS_ONE_SIDED, Replica, plan_group, validate_replicas,
)

KEY_COLUMNS = ("broker_group", "topic", "group", "queue_id")

OFFSETS_SCHEMA = StructType([
    StructField("broker_group", StringType(), False),
    StructField("broker_id", IntegerType(), False),
    StructField("topic", StringType(), False),
    StructField("group", StringType(), False),
    StructField("queue_id", IntegerType(), False),
    StructField("offset", LongType(), True),
])
REPLICAS_SCHEMA = StructType([
    StructField("broker_group", StringType(), False),
    StructField("broker_id", IntegerType(), False),
    StructField("role", StringType(), False),
    StructField("state_version", LongType(), False),
    StructField("counter", LongType(), False),
    StructField("timestamp_ms", LongType(), False),
    StructField("source", StringType(), True),
    StructField("address", StringType(), True),
    StructField("fetched_at_ms", LongType(), True),
])
QUEUES_SCHEMA = StructType([
    StructField("broker_group", StringType(), False),
    StructField("broker_id", IntegerType(), False),
    StructField("topic", StringType(), False),
    StructField("queue_id", IntegerType(), False),
    StructField("min_offset", LongType(), False),
    StructField("max_offset", LongType(), False),
])


def offset_col(broker_id: int) -> str:
    return f"offset_b{broker_id}"


def _entry_col(broker_id: int) -> str:
    return f"entry_b{broker_id}"


def plan_schema(broker_ids: Sequence[int]) -> StructType:
    fields = [StructField("broker_group", StringType(), False), StructField("master_id", IntegerType(), False),
              StructField("native_winner", IntegerType(), False), StructField("newest_id", IntegerType(), True),
              StructField("members", IntegerType(), False)]
    fields += [StructField(f"rank_b{broker_id}", IntegerType(), True) for broker_id in broker_ids]
    fields += [StructField(f"member_b{broker_id}", BooleanType(), False) for broker_id in broker_ids]
    return StructType(fields)


def plan_rows(replicas: Iterable[Replica], broker_ids: Sequence[int]) -> list[tuple]:
    """One row per broker group: the reverse-sync plan, with each broker id's adoption rank."""
    rows = []
    for name, members in sorted(validate_replicas(replicas).items()):
        plan = plan_group(members)
        ranks = tuple(plan.adopt_rank(broker_id) for broker_id in broker_ids)
        member = tuple(any(replica.broker_id == broker_id for replica in members) for broker_id in broker_ids)
        rows.append((name, plan.master_id, plan.native_winner, plan.newest_id, len(members), *ranks, *member))
    return rows


def plan_frame(spark: SparkSession, replicas: Sequence[Replica]) -> DataFrame:
    broker_ids = sorted({replica.broker_id for replica in replicas})
    return spark.createDataFrame(plan_rows(replicas, broker_ids), plan_schema(broker_ids))


def wide_offsets(offsets: DataFrame, broker_ids: Sequence[int]) -> DataFrame:
    """Long -> one row per key with one offset column per broker id (one shuffle).

    Rows are partitioned by a 64-bit hash of (broker group, topic, group); the aggregation
    by queue and the entry window both cluster on that hash plus the exact names, so they
    reuse the one shuffle, and the window's sort compares the long first (prefix sort)."""
    aggregations = [F.max(F.when(F.col("broker_id") == broker_id, F.col("offset"))).alias(offset_col(broker_id)) for broker_id in broker_ids]
    aggregations += [F.max(F.col("broker_id") == broker_id).alias(_entry_col(broker_id)) for broker_id in broker_ids]
    aggregations.append(F.max(~F.col("broker_id").isin(*broker_ids)).alias("unknown_id"))
    hashed = offsets.withColumn("entry_hash", F.xxhash64("broker_group", "topic", "group"))
    grouped = hashed.repartition("entry_hash").groupBy("entry_hash", *KEY_COLUMNS).agg(*aggregations)
    entry = Window.partitionBy("entry_hash", "broker_group", "topic", "group")
    with_entry = grouped.select(*KEY_COLUMNS, *(offset_col(b) for b in broker_ids), "unknown_id",
                                *(F.coalesce(F.max(_entry_col(b)).over(entry), F.lit(False)).alias(_entry_col(b)) for b in broker_ids))
    return with_entry.where(F.col("queue_id") != EMPTY_ENTRY_QUEUE_ID)


def _pick(id_column: str, broker_ids: Sequence[int]) -> Column:
    """The offset of the broker id named in ``id_column`` (null when absent)."""
    result = F.lit(None).cast(LongType())
    for broker_id in broker_ids:
        result = F.when(F.col(id_column) == broker_id, F.col(offset_col(broker_id))).otherwise(result)
    return result


def _extreme(function, columns: list[Column]) -> Column:
    return columns[0] if len(columns) == 1 else function(*columns)


def _native(broker_ids: Sequence[int]) -> Column:
    """putAll in adoption order: the highest-ranked adopted replica holding the entry decides."""
    candidates = [F.when(F.col(f"rank_b{b}").isNotNull() & F.col(_entry_col(b)),
                         F.struct(F.col(f"rank_b{b}").alias("rank"), F.col(offset_col(b)).alias("offset"))) for b in broker_ids]
    return _extreme(F.greatest, candidates).getField("offset")


def _ahead(broker_ids: Sequence[int]) -> Column:
    result = F.lit(None).cast(IntegerType())
    for broker_id in reversed(broker_ids):
        result = F.when(F.col(offset_col(broker_id)) == F.col("safe_offset"), F.lit(broker_id)).otherwise(result)
    return result


def diff_keys(wide: DataFrame, plans: DataFrame, broker_ids: Sequence[int], tolerance: int) -> DataFrame:
    """Per key: spread, ahead replica, status, native and safe outcomes, rollbacks and flags."""
    offsets = [F.col(offset_col(b)) for b in broker_ids]
    present = sum((F.col(offset_col(b)).isNotNull().cast(IntegerType()) for b in broker_ids), F.lit(0))
    joined = wide.join(F.broadcast(plans), "broker_group", "left")  # unknown groups surface as stray keys
    step = joined.select(
        "*",
        _extreme(F.greatest, offsets).alias("safe_offset"),
        _extreme(F.least, offsets).alias("min_offset"),
        present.alias("replicas_holding"),
        _native(broker_ids).alias("native_offset"),
        _pick("master_id", broker_ids).alias("master_offset"),
        _pick("newest_id", broker_ids).alias("newest_offset"),
        _pick("native_winner", broker_ids).alias("winner_offset"),
    )
    spread = F.col("safe_offset") - F.col("min_offset")
    status = (F.when(F.col("replicas_holding") < F.col("members"), F.lit(STATUS_ONE_SIDED))
              .when(spread == 0, F.lit(STATUS_IN_SYNC)).otherwise(F.lit(STATUS_DIVERGED)))
    stray = F.col("members").isNull() | F.col("unknown_id")
    for broker_id in broker_ids:
        stray = stray | (F.col(offset_col(broker_id)).isNotNull() & ~F.col(f"member_b{broker_id}"))
    return step.select(
        *KEY_COLUMNS, *offsets, "master_id", "native_winner", F.coalesce(stray, F.lit(True)).alias("stray"),
        status.alias("status"), spread.alias("spread"), _ahead(broker_ids).alias("ahead_id"),
        "safe_offset", "native_offset", "master_offset",
        (F.col("safe_offset") - F.col("native_offset")).alias("rollback_native"),
        (F.col("safe_offset") - F.col("master_offset")).alias("rollback_if_master_wins"),
        F.coalesce(F.col("safe_offset") - F.col("newest_offset") > tolerance, F.lit(False)).alias("reset_conflict"),
        F.coalesce(F.col("safe_offset") - F.col("winner_offset") > tolerance, F.lit(False)).alias("native_behind"),
        F.coalesce(F.col("winner_offset") - F.col("min_offset") > tolerance, F.lit(False)).alias("native_ahead"),
        (spread > tolerance).alias("beyond_tolerance"),
    )


def queue_limits(queues: DataFrame) -> DataFrame:
    """(broker group, topic, queue) -> the largest max offset any replica reports."""
    return queues.groupBy("broker_group", "topic", "queue_id").agg(F.max("max_offset").alias("queue_max_offset"))


def with_queue_limits(detail: DataFrame, limits: DataFrame | None) -> DataFrame:
    if limits is None:
        return detail.withColumn("queue_max_offset", F.lit(None).cast(LongType())).withColumn("beyond_max", F.lit(False))
    joined = detail.join(F.broadcast(limits), ["broker_group", "topic", "queue_id"], "left")
    beyond = F.coalesce(F.col("safe_offset") > F.col("queue_max_offset"), F.lit(False))
    return joined.withColumn("beyond_max", beyond.cast(BooleanType()))


def offset_diff(offsets: DataFrame, plans: DataFrame, broker_ids: Sequence[int], tolerance: int = 0,
                queues: DataFrame | None = None) -> DataFrame:
    """The whole per-key diff: long offsets + broadcast plans (+ queue offsets) -> detail rows."""
    detail = diff_keys(wide_offsets(offsets, broker_ids), plans, broker_ids, tolerance)
    return with_queue_limits(detail, None if queues is None else queue_limits(queues))
