"""Apply a plan made with ``--output``: compare-and-set on DataVersion, then write.

Rules:
- Default is report and plan only; applying is a separate, explicit step.
- Before writing anything, every replica of every broker group in the plan is re-read and
  its DataVersion compared with the one recorded at planning time.  If any moved (or a file
  is gone or unreadable), nothing is written and the exit code is 3 (needs a human: re-plan).
- This module applies plans made from file snapshots (brokers stopped): the plan's
  consumerOffset.json is written to each replica's file, the previous content kept as
  ``.bak`` the way RocketMQ's ``ConfigManager.persist`` does, through a temporary file, fsync
  and rename.  Plans made from live replicas are applied by ``relaymq offset-diff --apply``
  through the broker admin API (services/offset_apply.py: spark_tools may not import it), so
  a live replica reaching this module is refused.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Any, Mapping, TextIO

from metadata.consumer_offsets import OffsetFileError, loads
from metadata.data_version import DataVersion, DataVersionFormatError
from spark_tools.offset_diff_model import EXIT_CODES, VERDICT_NEEDS_HUMAN, OffsetDiffInputError


def _read_plan(plan_dir: str) -> Mapping[str, Any]:
    path = os.path.join(plan_dir, "summary.json")
    try:
        with open(path, encoding="utf-8") as handle:
            summary = json.load(handle)
    except OSError as exc:
        raise OffsetDiffInputError(f"--apply {plan_dir}: cannot read summary.json ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise OffsetDiffInputError(f"{path}: not JSON ({exc.msg})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("plan"), dict):
        raise OffsetDiffInputError(f"{path}: no plan recorded (was it written with --output?)")
    return summary["plan"]


def moved_replicas(plan: Mapping[str, Any]) -> list[str]:
    """Replicas whose file no longer carries the DataVersion recorded in the plan."""
    moved = []
    for broker_group, record in sorted(plan.items()):
        for replica in record["replicas"]:
            where = f"{broker_group}:{replica['broker_id']}"
            if not replica.get("source"):
                raise OffsetDiffInputError(f"{where} was fetched live ({replica.get('address')}): apply a live plan with "
                                           f"`relaymq offset-diff --apply`, which writes through the broker admin API")
            try:
                with open(replica["source"], "rb") as handle:
                    current = loads(handle.read(), where=replica["source"]).data_version
                planned = DataVersion.from_json(replica["data_version"], f"plan {where}")
            except (OSError, OffsetFileError, DataVersionFormatError) as exc:
                moved.append(f"{where} ({replica['source']}): {getattr(exc, 'strerror', None) or exc}")
                continue
            if current != planned:
                moved.append(f"{where} ({replica['source']}): dataVersion {planned.to_json()} -> {current.to_json()}")
    return moved


def _replace(path: str, text: str) -> None:
    if os.path.exists(path):
        shutil.copyfile(path, path + ".bak")
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def apply_plan(plan_dir: str, out: TextIO) -> int:
    plan = _read_plan(plan_dir)
    moved = moved_replicas(plan)
    if moved:
        out.write("NOT APPLIED: replicas moved since the plan was made; re-run the diff\n")
        out.writelines(f"  {line}\n" for line in moved)
        return EXIT_CODES[VERDICT_NEEDS_HUMAN]
    for broker_group, record in sorted(plan.items()):
        path = os.path.join(plan_dir, "plan", broker_group, "consumerOffset.json")
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise OffsetDiffInputError(f"{path}: {exc.strerror}") from None
        for replica in record["replicas"]:
            _replace(replica["source"], text)
            out.write(f"applied {broker_group}:{replica['broker_id']} -> {replica['source']}\n")
    return 0
