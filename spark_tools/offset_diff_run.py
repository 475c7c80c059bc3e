"""One run of the offset diff on a given SparkSession: load, diff, report, write.

Rules:
- Snapshot files are parsed on the driver (metadata.consumer_offsets) and handed to Spark
  through Arrow with the explicit schema; fetched parquet is read with the same schema.
  Nothing is inferred.
- Every offset row must belong to a known replica (checked in the diff's own pass); the
  reverse-sync plan of each broker group is decided here from the replicas' DataVersions.
- The detail is never cached whole: the console's rollups come from one pass that keeps
  notable keys only (offset_rollups.compact); with ``--output`` the detail is written as
  parquet once and re-read for the rollups and the plan files.
- Spark failures become one clear line (exit code 1), never a traceback that could be
  mistaken for a result.
"""
from __future__ import annotations

import os
from typing import Any, TextIO

from metadata.data_version import DataVersion
from spark_tools.offset_diff_model import OffsetDiffInputError, Replica, plan_group, validate_replicas
from spark_tools.offset_inputs import flatten, read_snapshot


def _offsets_frame(spark, rows: list[tuple], schema):
    """Flat rows -> DataFrame through Arrow, with nullable integer columns (no float detour)."""
    import pandas

    if not rows:
        return spark.createDataFrame([], schema)
    frame = pandas.DataFrame.from_records(rows, columns=[item.name for item in schema.fields])
    frame = frame.astype({"broker_id": "int32", "queue_id": "int32", "offset": "Int64"})
    return spark.createDataFrame(frame, schema)


def read_snapshots(config) -> tuple[list[Replica], list[tuple]]:
    """Parse and validate every snapshot file on the driver, before any Spark work."""
    replicas, rows = [], []
    for spec in config.snapshots:
        replica, table = read_snapshot(spec, config.file_bytes_max)
        replicas.append(replica)
        rows.extend(flatten(replica, table))
    validate_replicas(replicas)
    return replicas, rows


def load_snapshots(spark, snapshots: tuple[list[Replica], list[tuple]]) -> tuple[list[Replica], Any, Any]:
    from spark_tools.offset_diff_spark import OFFSETS_SCHEMA

    replicas, rows = snapshots
    return replicas, _offsets_frame(spark, rows, OFFSETS_SCHEMA), None


def _replica_from_row(row) -> Replica:
    version = DataVersion(state_version=row["state_version"], timestamp_ms=row["timestamp_ms"], counter=row["counter"])
    return Replica(row["broker_group"], row["broker_id"], row["role"], version, source=row["source"] or "",
                   fetched_at_ms=row["fetched_at_ms"] or 0, address=row["address"] or "")


def load_parquet(spark, config) -> tuple[list[Replica], Any, Any]:
    from spark_tools.offset_diff_spark import OFFSETS_SCHEMA, QUEUES_SCHEMA, REPLICAS_SCHEMA

    base = config.input_parquet
    for part in ("replicas", "offsets"):
        if not os.path.exists(os.path.join(base, part)):
            raise OffsetDiffInputError(f"--input-parquet {base}: missing {part}/ (written by the fetch step)")
    replicas = [_replica_from_row(row) for row in spark.read.schema(REPLICAS_SCHEMA).parquet(os.path.join(base, "replicas")).collect()]
    if not replicas:
        raise OffsetDiffInputError(f"--input-parquet {base}: replicas/ holds no replica")
    validate_replicas(replicas)
    offsets = spark.read.schema(OFFSETS_SCHEMA).parquet(os.path.join(base, "offsets"))
    queues_path = os.path.join(base, "queues")
    queues = spark.read.schema(QUEUES_SCHEMA).parquet(queues_path) if os.path.exists(queues_path) else None
    return replicas, offsets, queues


def compute(spark, config, replicas: list[Replica], offsets, queues):
    from spark_tools.offset_diff_spark import offset_diff, plan_frame

    broker_ids = sorted({replica.broker_id for replica in replicas})
    detail = offset_diff(offsets, plan_frame(spark, replicas), broker_ids, config.tolerance, queues)
    return detail, broker_ids


def _silent(stage: str) -> None:
    pass


def report(spark, config, replicas, detail, broker_ids, now_ms: int, out: TextIO, progress=_silent) -> dict[str, Any]:
    """With --output the detail is written once and re-read (columnar) for everything else;
    without, one pass over the detail builds the small compact frame the console needs."""
    from spark_tools import offset_outputs, offset_rollups
    from spark_tools.offset_report import build_gate, build_summary, render_console, render_gate

    source = detail
    progress(f"diffing {len(replicas)} replicas" + (f", writing the detail to {config.output}" if config.output else ""))
    if config.output:
        os.makedirs(config.output, exist_ok=True)
        detail.write.mode("overwrite").parquet(os.path.join(config.output, "detail"))
        source = spark.read.parquet(os.path.join(config.output, "detail"))
    compacted = offset_rollups.compact(source).persist()
    try:
        plans = {name: plan_group(members) for name, members in validate_replicas(replicas).items()}
        groups = offset_rollups.collect_groups(compacted)
        stray = sorted(row["broker_group"] for row in groups if row["stray_keys"])
        if stray:
            raise OffsetDiffInputError(f"offsets of replicas missing from the replica list, in broker groups {stray}")
        summary = build_summary(groups, replicas, plans, config.tolerance, now_ms)
        top = offset_rollups.top_rollbacks(compacted, config.top_k)
        one_sided = offset_rollups.one_sided_keys(compacted, broker_ids, config.one_sided_limit)
        histograms = {label: offset_rollups.rollback_histogram(compacted, column)
                      for label, column in (("if master wins", "rollback_if_master_wins"), ("native", "rollback_native"))} if config.output else {}
        if config.gate:
            summary["gate"] = build_gate(offset_rollups.consumer_groups(compacted, config.tolerance), plans)
    finally:
        compacted.unpersist()
    out.write(render_console(summary, top, one_sided))
    if config.gate:
        out.write("\n" + render_gate(summary["gate"], plans, config.top_k))
    if config.output:
        progress(f"writing the plan, summary and plots to {config.output}")
        summary["plan"] = offset_outputs.write_plan(source, replicas, config.output, now_ms)
        offset_outputs.write_summary(summary, config.output)
        offset_outputs.write_plots(summary, histograms, config.output)
        out.write(f"wrote {config.output}: summary.json, detail/, plan.csv, plan/<group>/consumerOffset.json, 2 plots\n")
    return summary


def execute(spark, config, now_ms: int, out: TextIO, snapshots=None, progress=_silent) -> int:
    """``snapshots``: what read_snapshots returned (file input), None for parquet input."""
    from pyspark.errors import PySparkException
    from py4j.protocol import Py4JJavaError

    try:
        progress("loading offsets into Spark" if snapshots is not None else f"reading {config.input_parquet}")
        loaded = load_parquet(spark, config) if snapshots is None else load_snapshots(spark, snapshots)
        replicas, offsets, queues = loaded
        detail, broker_ids = compute(spark, config, replicas, offsets, queues)
        summary = report(spark, config, replicas, detail, broker_ids, now_ms, out, progress)
    except (PySparkException, Py4JJavaError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OffsetDiffInputError(f"Spark job failed: {first}") from None
    return int(summary["gate"]["exit_code"] if "gate" in summary else summary["exit_code"])
