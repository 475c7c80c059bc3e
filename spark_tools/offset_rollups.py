"""Small rollups of the per-key detail that the driver collects: DataFrame in, rows out.

Rules:
- The detail is never cached whole (materialising 10M wide rows costs more than computing
  them): :func:`compact` keeps every notable key (not in sync, or beyond the queue's max)
  as its own row and folds the clean in-sync keys into one counted row per broker group and
  consumer group, in the same pass (so :func:`consumer_groups`, the pre-online gate's view,
  still counts every key of a consumer group).  Every rollup below reads the compact frame and weights by ``rows``.
- Only summaries, top-K rows and histogram buckets reach the driver; never all keys
  (the plan files stream keys with ``toLocalIterator`` instead, see offset_outputs).
- Top-K orders by the larger of the two rollbacks, then by key, so the report is stable.
- Histogram buckets are powers of ten of the per-queue rollback (bucket b holds
  10**b <= rollback < 10**(b+1)); zero rollbacks are not plotted.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType

from spark_tools.offset_diff_model import STATUS_DIVERGED, STATUS_IN_SYNC, STATUS_ONE_SIDED

KEY_PARTS = ("topic", "group", "queue_id")


def compact(detail: DataFrame) -> DataFrame:
    """Notable keys one row each (``rows`` 1); clean in-sync keys one row per broker group and
    consumer group.

    ``status``, the detail's only string value, is a grouping key (it is constant over the
    folded in-sync rows): every remaining ``first`` is fixed-width, so Spark plans a hash
    aggregation, not a sort of all keys (which cost about a third of the job at 10M keys)."""
    notable = (F.col("status") != STATUS_IN_SYNC) | F.col("beyond_max") | F.col("stray")
    values = [name for name in detail.columns if name not in ("broker_group", "status", *KEY_PARTS)]
    folded = [F.col(name) if name == "group" else F.when(notable, F.col(name)).alias(name) for name in KEY_PARTS]
    return (detail.groupBy("broker_group", "status", *folded)
            .agg(F.count(F.lit(1)).alias("rows"), *(F.first(name).alias(name) for name in values)))


def _count(condition) -> Any:
    return F.coalesce(F.sum(F.when(condition, F.col("rows"))), F.lit(0))


def group_rollup(compacted: DataFrame) -> DataFrame:
    """One row per broker group with the counters offset_report.build_summary expects."""
    return compacted.groupBy("broker_group").agg(
        F.sum("rows").alias("keys_total"),
        _count(F.col("status") == STATUS_IN_SYNC).alias("keys_in_sync"),
        _count(F.col("status") == STATUS_DIVERGED).alias("keys_diverged"),
        _count(F.col("status") == STATUS_ONE_SIDED).alias("keys_one_sided"),
        _count((F.col("status") == STATUS_DIVERGED) & F.col("beyond_tolerance")).alias("keys_beyond_tolerance"),
        F.sum(F.coalesce("rollback_if_master_wins", F.lit(0))).alias("rollback_if_master_wins"),
        F.sum(F.coalesce("rollback_native", F.lit(0))).alias("rollback_native"),
        F.max("spread").alias("largest_gap"),
        _count(F.col("reset_conflict")).alias("reset_conflicts"),
        _count(F.col("beyond_max")).alias("beyond_max"),
        _count(F.col("native_offset").isNull()).alias("native_dropped"),  # in-sync keys always have one
        F.max("native_behind").alias("native_behind"),
        F.max("native_ahead").alias("native_ahead"),
        _count(F.col("stray")).alias("stray_keys"),
    )


def collect_groups(detail: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in group_rollup(detail).collect()]


def top_rollbacks(detail: DataFrame, top_k: int) -> list[dict[str, Any]]:
    worst = F.greatest(F.coalesce("rollback_if_master_wins", F.lit(0)), F.coalesce("rollback_native", F.lit(0)))
    rows = (detail.where(worst > 0)
            .orderBy(worst.desc(), "broker_group", "topic", "group", "queue_id")
            .select("broker_group", "topic", "group", "queue_id", "master_offset", "native_offset", "safe_offset",
                    "rollback_if_master_wins", "rollback_native")
            .limit(top_k).collect())
    return [row.asDict() for row in rows]


def one_sided_keys(detail: DataFrame, broker_ids: list[int], limit: int) -> list[dict[str, Any]]:
    holders = F.concat_ws(",", *(F.when(F.col(f"offset_b{b}").isNotNull(), F.lit(str(b))) for b in broker_ids))
    rows = (detail.where(F.col("status") == STATUS_ONE_SIDED)
            .orderBy("broker_group", "topic", "group", "queue_id")
            .select("broker_group", "topic", "group", "queue_id", holders.alias("holders"), "safe_offset")
            .limit(limit).collect())
    return [row.asDict() for row in rows]


def rollback_histogram(detail: DataFrame, column: str) -> dict[int, int]:
    """Power-of-ten bucket -> number of queues, for queues whose rollback is positive."""
    bucket = F.floor(F.log10(F.col(column))).cast(IntegerType())
    rows = detail.where(F.col(column) > 0).groupBy(bucket.alias("bucket")).agg(F.sum("rows").alias("queues")).collect()
    return {row["bucket"]: row["queues"] for row in rows}


def consumer_groups(compacted: DataFrame, tolerance: int) -> list[dict[str, Any]]:
    """The pre-online gate's view, one row per (broker group, consumer group): how many queues the
    master takes from a slave (of them, how many it has no offset for) and how far they advance
    it, how many a rejoin would roll back (beyond ``tolerance``) or drop, and the rollback if the
    master's own table won."""
    native, master = F.col("native_offset"), F.col("master_offset")
    # in-sync keys (the folded rows among them: their values are each from some key) adopt nothing
    adopted = (F.col("status") != STATUS_IN_SYNC) & native.isNotNull() & (master.isNull() | (native != master))
    rolled_back = F.coalesce(F.col("rollback_native"), F.lit(0)) > tolerance
    rows = compacted.groupBy("broker_group", "group").agg(
        F.sum("rows").alias("keys"),
        _count(adopted).alias("keys_adopted"),
        F.coalesce(F.sum(F.when(adopted & master.isNotNull() & (native > master), (native - master) * F.col("rows"))),
                   F.lit(0)).alias("messages_advanced"),
        _count(rolled_back).alias("keys_rolled_back"),
        F.coalesce(F.sum(F.when(rolled_back, F.col("rollback_native") * F.col("rows"))), F.lit(0)).alias("rollback_on_rejoin"),
        _count(native.isNull()).alias("keys_dropped"),
        _count(adopted & master.isNull()).alias("keys_master_lacks"),
        F.coalesce(F.sum(F.col("rollback_if_master_wins") * F.col("rows")), F.lit(0)).alias("rollback_if_master_wins"),
    ).orderBy("broker_group", "group").collect()
    return [row.asDict() for row in rows]
