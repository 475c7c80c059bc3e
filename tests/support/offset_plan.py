"""Write an offset-diff plan folder made "from live replicas" without Spark.

The layout is what ``spark_tools/offset_outputs.write_plan`` and ``offset_report.build_summary``
write for ``--replica`` fetches (no ``source``, an ``address``): ``summary.json`` with ``plan``
and ``replicas``, and ``plan/<group>/consumerOffset.json`` with the safe table.  A Spark test
(tests/spark) checks that the real job's folder reads the same way.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from metadata.consumer_offsets import ConsumerOffsetTable
from metadata.data_version import DataVersion


@dataclass(frozen=True)
class PlannedReplica:
    broker_id: int
    role: str  # "master" | "slave"
    address: str
    data_version: DataVersion


def write_live_plan(plan_dir: Path, groups: Mapping[str, tuple[Sequence[PlannedReplica], ConsumerOffsetTable]]) -> Path:
    plan, replicas = {}, []
    for name, (members, safe) in sorted(groups.items()):
        newest = max((m.data_version for m in members), key=DataVersion.sort_key)
        merged = newest.next_version(1)
        plan[name] = {"merged_data_version": merged.to_json(),
                      "replicas": [{"broker_id": m.broker_id, "source": "", "address": m.address,
                                    "data_version": m.data_version.to_json()} for m in members]}
        replicas += [{"broker_group": name, "broker_id": m.broker_id, "role": m.role, "data_version": m.data_version.to_json(),
                      "source": "", "address": m.address, "fetched_at_ms": 1} for m in members]
        path = plan_dir / "plan" / name / "consumerOffset.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(ConsumerOffsetTable(merged, safe.offsets).dumps())
    summary = {"schema_version": 1, "verdict": "DIVERGED", "exit_code": 2, "plan": plan, "replicas": replicas}
    (plan_dir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    return plan_dir
