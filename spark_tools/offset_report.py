"""The offset diff's summary and console report, from small collected rows (no Spark, no I/O).

Rules:
- ``summary.json`` carries ``schema_version``; scripts rely on ``verdict``, ``keys_total``,
  ``keys_diverged`` and, per broker group, ``rollback_if_master_wins`` and
  ``rollback_native`` (messages).  Fields are only ever added.
- ``keys_diverged`` counts keys whose offsets differ (exactly); the verdict uses
  ``keys_beyond_tolerance`` (spread over ``--tolerance``) and one-sided keys.
- Rollback totals sum the keys that have an offset under that choice; a queue the choice
  drops (absent offset) is counted in ``native_dropped`` instead.
- The top-K table's TOTAL line is the sum of the rows printed above it.
- ``--gate pre-online`` (:func:`build_gate`): per consumer group, what each master adopts
  when it rejoins (the native outcome: the broker's own pre-online rule), what the rejoin
  would roll back (beyond ``--tolerance``) or drop, and what would roll back if the master's
  own table won.  The gate is closed (exit 4) when a rejoin rolls any consumer back or drops
  any queue's offset; open (exit 0) otherwise.
"""
from __future__ import annotations

import datetime
from typing import Any, Iterable, Mapping, Sequence

from spark_tools.offset_diff_model import (EXIT_CODES, EXIT_GATE_CLOSED, EXIT_GATE_OPEN, GATE_PRE_ONLINE, GroupPlan, Replica,
                                           verdict)

SCHEMA_VERSION = 1
GROUP_COUNTERS = ("keys_total", "keys_in_sync", "keys_diverged", "keys_one_sided", "keys_beyond_tolerance",
                  "rollback_if_master_wins", "rollback_native", "largest_gap", "reset_conflicts", "beyond_max",
                  "native_dropped")
TOTAL_COUNTERS = ("keys_total", "keys_in_sync", "keys_diverged", "keys_one_sided", "keys_beyond_tolerance",
                  "reset_conflicts", "beyond_max", "native_dropped")
TOP_COLUMNS = ("broker_group", "topic", "group", "queue_id", "master_offset", "native_offset", "safe_offset",
               "rollback_if_master_wins", "rollback_native")


def _version(replica: Replica) -> dict[str, int]:
    return replica.data_version.to_json()


def build_summary(group_rows: Iterable[Mapping[str, Any]], replicas: Sequence[Replica], plans: Mapping[str, GroupPlan],
                  tolerance: int, generated_at_ms: int) -> dict[str, Any]:
    groups: dict[str, dict[str, Any]] = {}
    for row in group_rows:
        entry = {name: int(row.get(name) or 0) for name in GROUP_COUNTERS}
        entry["data_version_inconsistent"] = bool(row.get("native_behind")) and bool(row.get("native_ahead"))
        plan = plans[row["broker_group"]]
        entry.update(master_id=plan.master_id, native_winner=plan.native_winner, newest_id=plan.newest_id)
        groups[row["broker_group"]] = entry
    for name, plan in plans.items():  # groups whose replicas hold no key at all
        groups.setdefault(name, {**{counter: 0 for counter in GROUP_COUNTERS}, "data_version_inconsistent": False,
                                 "master_id": plan.master_id, "native_winner": plan.native_winner, "newest_id": plan.newest_id})
    totals = {name: sum(group[name] for group in groups.values()) for name in TOTAL_COUNTERS}
    inconsistent = sum(1 for group in groups.values() if group["data_version_inconsistent"])
    result = verdict(totals["keys_beyond_tolerance"], totals["keys_one_sided"], totals["reset_conflicts"], inconsistent, totals["beyond_max"])
    return {
        "schema_version": SCHEMA_VERSION, "verdict": result, "exit_code": EXIT_CODES[result], "tolerance": tolerance,
        "generated_at_ms": generated_at_ms, **totals, "data_version_inconsistent_groups": inconsistent,
        "rollback_if_master_wins": sum(group["rollback_if_master_wins"] for group in groups.values()),
        "rollback_native": sum(group["rollback_native"] for group in groups.values()),
        "broker_groups": dict(sorted(groups.items())),
        "replicas": [{"broker_group": r.broker_group, "broker_id": r.broker_id, "role": r.role, "data_version": _version(r),
                      "source": r.source, "address": r.address, "fetched_at_ms": r.fetched_at_ms} for r in replicas],
    }


def verdict_line(summary: Mapping[str, Any]) -> str:
    conflicts = summary["reset_conflicts"] + summary["data_version_inconsistent_groups"] + summary["beyond_max"]
    return (f"{summary['verdict']}: {len(summary['broker_groups'])} broker groups, {summary['keys_total']:,} queues; "
            f"{summary['keys_diverged']:,} diverged ({summary['keys_beyond_tolerance']:,} beyond tolerance {summary['tolerance']}), "
            f"{summary['keys_one_sided']:,} one-sided; safe merge moves 0 consumers backwards; "
            f"{conflicts:,} conflicts need a decision")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    cells = [[str(value) for value in header]] + [["-" if value is None else f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value) for value in row] for row in rows]
    widths = [max(len(row[index]) for row in cells) for index in range(len(header))]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]


def _when(ms: int) -> str:
    """A user-facing UTC timestamp (the fetch time, or the file's modification time)."""
    if not ms:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _provenance(summary: Mapping[str, Any]) -> list[str]:
    lines = ["REPLICAS"]
    rows = []
    for replica in summary["replicas"]:
        group = summary["broker_groups"][replica["broker_group"]]
        version = replica["data_version"]
        picked = "<- native reverse sync picks" if group["native_winner"] == replica["broker_id"] else ""
        rows.append((replica["broker_group"], replica["broker_id"], replica["role"],
                     f"{version['stateVersion']}/{version['counter']}/{version['timestamp']}",
                     replica["address"] or replica["source"], _when(replica["fetched_at_ms"]), picked))
    return lines + _table(("broker_group", "id", "role", "dataVersion(state/counter/ts)", "source", "fetched/modified", ""), rows)


def _groups(summary: Mapping[str, Any]) -> list[str]:
    rows = [(name, g["keys_total"], g["keys_in_sync"], g["keys_diverged"], g["keys_one_sided"], g["rollback_if_master_wins"],
             g["rollback_native"], g["largest_gap"], g["reset_conflicts"], g["beyond_max"],
             "yes" if g["data_version_inconsistent"] else "no") for name, g in summary["broker_groups"].items()]
    header = ("broker_group", "keys", "in_sync", "diverged", "one_sided", "rollback_if_master_wins", "rollback_native",
              "largest_gap", "reset_conflicts", "beyond_max", "dv_inconsistent")
    return ["BROKER GROUPS"] + _table(header, rows)


def _top(top_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [f"TOP {len(top_rows)} ROLLBACKS (messages consumed again; safe plan: 0)"]
    if not top_rows:
        return lines + ["  none"]
    rows = [tuple(row.get(column) for column in TOP_COLUMNS) for row in top_rows]
    total_master = sum(row.get("rollback_if_master_wins") or 0 for row in top_rows)
    total_native = sum(row.get("rollback_native") or 0 for row in top_rows)
    rows.append(("TOTAL", "", "", "", "", "", "", total_master, total_native))
    return lines + _table(TOP_COLUMNS, rows)


def _one_sided(one_sided_rows: Sequence[Mapping[str, Any]], total: int) -> list[str]:
    lines = [f"ONE-SIDED KEYS ({total:,}; showing {len(one_sided_rows)}): a key only on a slave may have been created "
             "during failover, one only on the master deleted; this tool cannot know which"]
    if not one_sided_rows:
        return lines + ["  none"]
    columns = ("broker_group", "topic", "group", "queue_id", "holders", "safe_offset")
    return lines + _table(columns, [tuple(row.get(column) for column in columns) for row in one_sided_rows])


def render_console(summary: Mapping[str, Any], top_rows: Sequence[Mapping[str, Any]],
                   one_sided_rows: Sequence[Mapping[str, Any]]) -> str:
    lines = _provenance(summary) + ["", verdict_line(summary), ""] + _groups(summary) + [""]
    lines += _top(top_rows) + [""] + _one_sided(one_sided_rows, summary["keys_one_sided"])
    return "\n".join(lines) + "\n"


GATE_COUNTERS = ("keys", "keys_adopted", "keys_master_lacks", "messages_advanced", "keys_rolled_back",
                 "rollback_on_rejoin", "keys_dropped", "rollback_if_master_wins")


def build_gate(consumer_rows: Iterable[Mapping[str, Any]], plans: Mapping[str, GroupPlan]) -> dict[str, Any]:
    groups = [{"broker_group": row["broker_group"], "group": row["group"], **{c: int(row.get(c) or 0) for c in GATE_COUNTERS}}
              for row in consumer_rows]
    closing = [g for g in groups if g["keys_rolled_back"] or g["keys_dropped"]]
    return {"mode": GATE_PRE_ONLINE, "open": not closing, "exit_code": EXIT_GATE_CLOSED if closing else EXIT_GATE_OPEN,
            "consumer_groups_closing": len(closing),
            **{c: sum(g[c] for g in groups) for c in GATE_COUNTERS},
            "masters_adopt": {name: [i for i in plan.adopted if i != plan.master_id] for name, plan in sorted(plans.items())},
            "consumer_groups": groups}


def gate_line(gate: Mapping[str, Any]) -> str:
    if gate["open"]:
        return (f"GATE OPEN (pre-online): a rejoin rolls no consumer back; {len(gate['consumer_groups']):,} consumer "
                f"groups, {gate['keys_adopted']:,} queues taken from slaves (+{gate['messages_advanced']:,} messages, "
                f"{gate['keys_master_lacks']:,} queues the masters have no offset for); if the masters' own tables won "
                f"instead: {gate['rollback_if_master_wins']:,} messages consumed again, and those queues without an offset")
    return (f"GATE CLOSED (pre-online): a rejoin would roll back {gate['keys_rolled_back']:,} queues "
            f"({gate['rollback_on_rejoin']:,} messages) and drop {gate['keys_dropped']:,} of "
            f"{gate['consumer_groups_closing']:,} consumer groups")


def render_gate(gate: Mapping[str, Any], plans: Mapping[str, GroupPlan], limit: int) -> str:
    lines = ["PRE-ONLINE GATE: what each master takes when it rejoins (the broker's own rule, stateVersion > counter > "
             "timestamp, ties adopt the slave, keys only the master has are kept)"]
    for name, plan in sorted(plans.items()):
        version = plan.native_version.to_json()
        taken = [i for i in plan.adopted if i != plan.master_id]
        lines.append(f"  {name}: master {plan.master_id} " + (f"adopts the tables of {taken}, ending at "
                     f"{version['stateVersion']}/{version['counter']}/{version['timestamp']}" if taken else "keeps its own table"))
    ordered = sorted(gate["consumer_groups"], key=lambda g: (-g["rollback_on_rejoin"] - g["keys_dropped"],
                                                             -g["keys_adopted"], -g["rollback_if_master_wins"],
                                                             g["broker_group"], g["group"]))
    header = ("broker_group", "consumer_group", "queues", "adopted", "master_lacks", "advanced", "rolled_back",
              "rollback_on_rejoin", "dropped", "rollback_if_master_wins")
    rows = [(g["broker_group"], g["group"], g["keys"], g["keys_adopted"], g["keys_master_lacks"], g["messages_advanced"],
             g["keys_rolled_back"], g["rollback_on_rejoin"], g["keys_dropped"], g["rollback_if_master_wins"])
            for g in ordered[:limit]]
    lines += _table(header, rows)
    if len(ordered) > limit:
        lines.append(f"  ... {len(ordered) - limit:,} more consumer groups (summary.json's gate lists every one)")
    return "\n".join(lines + ["", gate_line(gate)]) + "\n"
