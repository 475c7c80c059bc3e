"""Offset diff inputs: replica identities and consumerOffset.json snapshots, validated at the edge.

Rules:
- A snapshot is named on the command line as ``GROUP:BROKER_ID[:ROLE]=PATH`` (split at the
  first ``=``; broker id 0 is the master unless a role is given) or listed in a JSON
  manifest ``{"replicas": [{"brokerGroup", "brokerId", "role"?, "path"}]}`` whose relative
  paths resolve against the manifest's folder.
- Files are parsed by :mod:`metadata.consumer_offsets` (RelayMQ's JSON and Apache RocketMQ's
  fastjson dialect); a bad, truncated or oversized file is an :class:`OffsetDiffInputError`
  naming the file.  There is no schema inference anywhere.
- Flattening (one row per replica and queue) happens here, on the driver, before Spark:
  a ``topic@group`` entry with no queues becomes one marker row (``queue_id`` -1, offset
  null) so that reverse sync's whole-entry replacement can still be modelled.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Iterable

from metadata.consumer_offsets import ConsumerOffsetTable, OffsetFileError, loads
from metadata.names import is_valid_group_name
from spark_tools.offset_diff_model import EMPTY_ENTRY_QUEUE_ID, ROLE_MASTER, ROLE_SLAVE, OffsetDiffInputError, Replica, default_role

ROLES = (ROLE_MASTER, ROLE_SLAVE)


@dataclass(frozen=True)
class SnapshotSpec:
    broker_group: str
    broker_id: int
    role: str
    path: str


def _identity(broker_group: str, raw_id: Any, role: str | None, where: str) -> tuple[str, int, str]:
    if not is_valid_group_name(broker_group):
        raise OffsetDiffInputError(f"{where}: broker group {broker_group!r} is not a valid name ([%|a-zA-Z0-9_-]+)")
    try:
        broker_id = int(raw_id)
    except (TypeError, ValueError):
        raise OffsetDiffInputError(f"{where}: broker id {raw_id!r} is not an integer") from None
    if isinstance(raw_id, bool) or broker_id < 0:
        raise OffsetDiffInputError(f"{where}: broker id {raw_id!r} must be a non-negative integer")
    role = role or default_role(broker_id)
    if role not in ROLES:
        raise OffsetDiffInputError(f"{where}: role {role!r} is not one of {', '.join(ROLES)}")
    return broker_group, broker_id, role


def parse_snapshot_spec(text: str) -> SnapshotSpec:
    """``GROUP:BROKER_ID[:ROLE]=PATH`` as given to ``--snapshot``."""
    identity, sep, path = text.partition("=")
    parts = identity.split(":")
    if not sep or not path or len(parts) not in (2, 3):
        raise OffsetDiffInputError(f"--snapshot {text!r}: expected GROUP:BROKER_ID=PATH (or GROUP:BROKER_ID:ROLE=PATH)")
    group, broker_id, role = _identity(parts[0], parts[1], parts[2] if len(parts) == 3 else None, f"--snapshot {text!r}")
    return SnapshotSpec(group, broker_id, role, path)


def parse_manifest(text: str, where: str) -> list[SnapshotSpec]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetDiffInputError(f"{where}: not JSON ({exc.msg} at line {exc.lineno})") from None
    entries = document.get("replicas") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise OffsetDiffInputError(f"{where}: expected {{\"replicas\": [...]}} with at least one entry")
    base = os.path.dirname(os.path.abspath(where))
    specs = []
    for index, entry in enumerate(entries):
        at = f"{where}: replicas[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or "brokerGroup" not in entry or "brokerId" not in entry:
            raise OffsetDiffInputError(f"{at}: expected an object with brokerGroup, brokerId and path")
        group, broker_id, role = _identity(str(entry["brokerGroup"]), entry["brokerId"], entry.get("role"), at)
        specs.append(SnapshotSpec(group, broker_id, role, os.path.join(base, entry["path"])))
    return specs


def read_manifest(path: str) -> list[SnapshotSpec]:
    try:
        with open(path, encoding="utf-8") as handle:
            return parse_manifest(handle.read(), path)
    except OSError as exc:
        raise OffsetDiffInputError(f"manifest {path}: {exc.strerror}") from None


def read_snapshot(spec: SnapshotSpec, file_bytes_max: int) -> tuple[Replica, ConsumerOffsetTable]:
    try:
        size = os.path.getsize(spec.path)
        if size > file_bytes_max:
            raise OffsetDiffInputError(f"{spec.path}: {size} bytes is over the limit of {file_bytes_max} (file_bytes_max)")
        with open(spec.path, "rb") as handle:
            raw = handle.read()
        modified_ms = int(os.path.getmtime(spec.path) * 1000)
    except OSError as exc:
        raise OffsetDiffInputError(f"{spec.path}: {exc.strerror}") from None
    if not raw.strip():
        raise OffsetDiffInputError(f"{spec.path}: empty file")
    try:
        table = loads(raw, where=spec.path)
    except OffsetFileError as exc:
        raise OffsetDiffInputError(str(exc)) from None
    replica = Replica(spec.broker_group, spec.broker_id, spec.role, table.data_version, source=spec.path, fetched_at_ms=modified_ms)
    return replica, table


def flatten(replica: Replica, table: ConsumerOffsetTable) -> Iterable[tuple[str, int, str, str, int, int | None]]:
    """(broker_group, broker_id, topic, group, queue_id, offset) rows, marker rows for empty entries."""
    for key, queues in table.offsets.items():
        if not queues:
            yield replica.broker_group, replica.broker_id, key.topic, key.group, EMPTY_ENTRY_QUEUE_ID, None
        for queue_id, offset in queues.items():
            yield replica.broker_group, replica.broker_id, key.topic, key.group, queue_id, offset

