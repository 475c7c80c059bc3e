"""Files the offset diff writes with ``--output DIR``.

Layout (documented in docs/offset-diff.md):
- ``summary.json``: offset_report.build_summary plus ``plan`` (per broker group: the
  DataVersion each replica had when planned, for apply's compare-and-set, and the merged
  version written into the plan file).
- ``detail/``: every key as parquet (in-sync keys too).
- ``plan.csv``: every key with the master's, native and safe offsets and an action
  (``keep``: the master already has the safe offset; ``raise``: it moves forward; ``add``: the
  master lacks the key).
- ``plan/<broker group>/consumerOffset.json``: the safe table in fastjson format with a
  DataVersion newer than every replica's, ready for the apply step.
- ``rollback_distribution.png`` and ``rollback_per_group.png``.

Spark renders the plan files' text (plan.csv lines; one fastjson entry per topic@group) and
writes it in key order under ``DIR/.plan-parts``; the driver only concatenates those part
files, so no Python code loops over keys (the row-by-row writer took 75 s at 1M keys).
Byte for byte the files are what ``csv.writer`` and ``ConsumerOffsetTable.dumps`` write
(a test compares them).
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Any, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from metadata.consumer_offsets import ConsumerOffsetTable
from spark_tools.offset_diff_model import Replica, merged_data_version

PLAN_COLUMNS = ("broker_group", "topic", "group", "queue_id", "master_offset", "native_offset", "safe_offset",
                "rollback_if_master_wins", "rollback_native", "status", "action")
PLAN_ORDER = ("broker_group", "topic", "group", "queue_id")


def plan_file(out_dir: str, broker_group: str) -> str:
    return os.path.join(out_dir, "plan", broker_group, "consumerOffset.json")


def _csv_field(column: str, text: bool) -> Column:
    """One field as Python's csv module (excel dialect, QUOTE_MINIMAL) writes it; null is empty."""
    value = F.col(column).cast(StringType())
    if text:
        quoted = F.concat(F.lit('"'), F.regexp_replace(value, '"', '""'), F.lit('"'))
        value = F.when(value.rlike('[",\r\n]'), quoted).otherwise(value)
    return F.coalesce(value, F.lit(""))


def plan_csv_lines(detail: DataFrame) -> DataFrame:
    """plan.csv's data lines, in key order (one ``value`` column)."""
    action = (F.when(F.col("master_offset").isNull(), F.lit("add"))
              .when(F.col("master_offset") == F.col("safe_offset"), F.lit("keep")).otherwise(F.lit("raise")))
    fields = [_csv_field(column, dict(detail.dtypes)[column] == "string") for column in PLAN_COLUMNS[:-1]]
    return detail.orderBy(*PLAN_ORDER).select(F.concat_ws(",", *fields, action).alias("value"))


def _json_string(column: Column) -> Column:
    """A JSON string literal of a valid topic/group name (backslash and quote escaped)."""
    return F.concat(F.lit('"'), F.regexp_replace(F.regexp_replace(column, r"\\", r"\\\\"), '"', '\\\\"'), F.lit('"'))


def plan_table_entries(detail: DataFrame) -> DataFrame:
    """One ``(broker_group, entry)`` row per topic@group, ordered as fastjson.dumps orders them;
    ``entry`` is that key's text inside ``offsetTable`` (two tabs deep, queues sorted by id)."""
    key = F.concat(F.col("topic"), F.lit("@"), F.col("group"))
    queue = F.concat(F.lit("\t\t\t"), F.col("queue_id").cast(StringType()), F.lit(":"),
                     F.coalesce(F.col("safe_offset").cast(StringType()), F.lit("null")))
    grouped = (detail.select("broker_group", key.alias("key"), F.struct("queue_id", queue.alias("text")).alias("queue"))
               .groupBy("broker_group", "key").agg(F.array_sort(F.collect_list("queue")).alias("queues")))
    entry = F.concat(F.lit("\t\t"), _json_string(F.col("key")), F.lit(":{\n"),
                     F.array_join(F.transform("queues", lambda item: item["text"]), ",\n"), F.lit("\n\t\t}"))
    return grouped.orderBy("broker_group", "key").select("broker_group", entry.alias("entry"))


def _part_files(folder: str, suffix: str) -> list[str]:
    """Spark's part files in partition order (their names carry the partition index)."""
    return sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.startswith("part-") and name.endswith(suffix))


def _write_plan_csv(detail: DataFrame, out_dir: str, scratch: str) -> None:
    folder = os.path.join(scratch, "csv")
    plan_csv_lines(detail).write.mode("overwrite").option("lineSep", "\r\n").text(folder)
    with open(os.path.join(out_dir, "plan.csv"), "wb") as handle:
        handle.write((",".join(PLAN_COLUMNS) + "\r\n").encode())
        for path in _part_files(folder, ".txt"):
            with open(path, "rb") as part:
                shutil.copyfileobj(part, handle, 1 << 20)


def _table_head_and_tail(version) -> tuple[str, str]:
    """fastjson text of an empty table split where the entries go: head + entries + tail."""
    empty = ConsumerOffsetTable(version, {}).dumps()
    assert empty.endswith('"offsetTable":{}\n}'), "fastjson layout changed"
    return empty[:-3] + "\n", "\n\t}\n}"


def _write_plan_tables(detail: DataFrame, versions: Mapping[str, Any], out_dir: str, scratch: str) -> None:
    import pyarrow.parquet

    folder = os.path.join(scratch, "tables")
    plan_table_entries(detail).write.mode("overwrite").parquet(folder)
    written: dict[str, Any] = {}
    try:
        for path in _part_files(folder, ".parquet"):
            for batch in pyarrow.parquet.ParquetFile(path).iter_batches(batch_size=65_536):
                for broker_group, entry in zip(batch.column("broker_group").to_pylist(), batch.column("entry").to_pylist()):
                    handle = written.get(broker_group)
                    if handle is None:
                        handle = written[broker_group] = _open_plan_file(out_dir, broker_group, versions[broker_group])
                    else:
                        handle.write(",\n")
                    handle.write(entry)
    finally:
        for broker_group, handle in written.items():
            handle.write(_table_head_and_tail(versions[broker_group])[1])
            handle.close()
    for broker_group, version in versions.items():
        if broker_group not in written:
            with open(_plan_path(out_dir, broker_group), "w", encoding="utf-8") as handle:
                handle.write(ConsumerOffsetTable(version, {}).dumps())


def _plan_path(out_dir: str, broker_group: str) -> str:
    path = plan_file(out_dir, broker_group)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def _open_plan_file(out_dir: str, broker_group: str, version):
    handle = open(_plan_path(out_dir, broker_group), "w", encoding="utf-8")
    handle.write(_table_head_and_tail(version)[0])
    return handle


def write_plan(detail: DataFrame, replicas: Sequence[Replica], out_dir: str, now_ms: int) -> dict[str, Any]:
    """plan.csv and one consumerOffset.json per broker group, rendered by Spark and concatenated
    here (no Python loop over keys); return the plan record."""
    groups = sorted({replica.broker_group for replica in replicas})
    members = {name: [replica for replica in replicas if replica.broker_group == name] for name in groups}
    versions = {name: merged_data_version(members[name], now_ms) for name in groups}
    scratch = os.path.join(out_dir, ".plan-parts")
    try:
        _write_plan_csv(detail, out_dir, scratch)
        _write_plan_tables(detail, versions, out_dir, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {name: {"merged_data_version": versions[name].to_json(),
                   "replicas": [{"broker_id": member.broker_id, "source": member.source, "address": member.address,
                                 "data_version": member.data_version.to_json()} for member in members[name]]}
            for name in groups}


def write_summary(summary: Mapping[str, Any], out_dir: str) -> str:
    path = os.path.join(out_dir, "summary.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2, sort_keys=True)
        handle.write("\n")
    return path


def write_plots(summary: Mapping[str, Any], histograms: Mapping[str, Mapping[int, int]], out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    paths = [os.path.join(out_dir, "rollback_distribution.png"), os.path.join(out_dir, "rollback_per_group.png")]
    figure, axis = pyplot.subplots(figsize=(7, 4))
    buckets = sorted({bucket for histogram in histograms.values() for bucket in histogram})
    width = 0.8 / max(1, len(histograms))
    for index, (label, histogram) in enumerate(sorted(histograms.items())):
        shift = (index - (len(histograms) - 1) / 2) * width
        axis.bar([bucket + shift for bucket in buckets], [histogram.get(bucket, 0) for bucket in buckets], width=width, label=label)
    axis.set_xticks(buckets, [f"[1e{bucket}, 1e{bucket + 1})" for bucket in buckets])
    if buckets:
        axis.set_xlim(min(buckets) - 0.6, max(buckets) + 0.6)
    axis.set_yscale("log")
    axis.set_ylim(bottom=0.5)  # a bucket holding one queue stays visible
    axis.set_xlabel("per-queue rollback (messages, power-of-ten bucket)")
    axis.set_ylabel("queues")
    axis.set_title("Distribution of per-queue rollback")
    if histograms:
        axis.legend()
    figure.tight_layout()
    figure.savefig(paths[0])
    pyplot.close(figure)
    groups = summary["broker_groups"]
    names = list(groups)
    figure, axis = pyplot.subplots(figsize=(max(5, len(names) * 0.6 + 3), 4))
    positions = range(len(names))
    axis.bar([p - 0.2 for p in positions], [groups[n]["rollback_if_master_wins"] for n in names], width=0.4, label="if master wins")
    axis.bar([p + 0.2 for p in positions], [groups[n]["rollback_native"] for n in names], width=0.4, label="native reverse sync")
    axis.set_xticks(list(positions), names, rotation=45, ha="right")
    axis.set_ylabel("messages consumed again")
    axis.set_title("Rollback per broker group")
    axis.legend()
    figure.tight_layout()
    figure.savefig(paths[1])
    pyplot.close(figure)
    return paths

