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

Keys reach the driver one partition at a time (``toLocalIterator``), never all at once as a
list; the plan file of one broker group is as large as the table a broker holds anyway.
"""
from __future__ import annotations

import csv
import json
import os
from typing import Any, Mapping, Sequence

from pyspark.sql import DataFrame

from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey
from spark_tools.offset_diff_model import Replica, merged_data_version

PLAN_COLUMNS = ("broker_group", "topic", "group", "queue_id", "master_offset", "native_offset", "safe_offset",
                "rollback_if_master_wins", "rollback_native", "status", "action")


def plan_file(out_dir: str, broker_group: str) -> str:
    return os.path.join(out_dir, "plan", broker_group, "consumerOffset.json")


def _action(row: Mapping[str, Any]) -> str:
    if row["master_offset"] is None:
        return "add"
    return "keep" if row["master_offset"] == row["safe_offset"] else "raise"


def write_plan(detail: DataFrame, replicas: Sequence[Replica], out_dir: str, now_ms: int) -> dict[str, Any]:
    """Stream keys into plan.csv and one consumerOffset.json per broker group; return the plan record."""
    tables: dict[str, dict[OffsetKey, dict[int, int]]] = {replica.broker_group: {} for replica in replicas}
    ordered = detail.select(*PLAN_COLUMNS[:-1]).orderBy("broker_group", "topic", "group", "queue_id")
    with open(os.path.join(out_dir, "plan.csv"), "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(PLAN_COLUMNS)
        for row in ordered.toLocalIterator():
            values = row.asDict()
            writer.writerow([*("" if values[column] is None else values[column] for column in PLAN_COLUMNS[:-1]), _action(values)])
            tables[values["broker_group"]].setdefault(OffsetKey(values["topic"], values["group"]), {})[values["queue_id"]] = values["safe_offset"]
    record: dict[str, Any] = {}
    for broker_group, table in sorted(tables.items()):
        members = [replica for replica in replicas if replica.broker_group == broker_group]
        version = merged_data_version(members, now_ms)
        path = plan_file(out_dir, broker_group)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(ConsumerOffsetTable(version, table).dumps())
        record[broker_group] = {
            "merged_data_version": version.to_json(),
            "replicas": [{"broker_id": member.broker_id, "source": member.source, "address": member.address,
                          "data_version": member.data_version.to_json()} for member in members],
        }
    return record


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

