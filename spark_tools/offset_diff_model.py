"""The offset diff's semantics as plain Python: the reference the Spark job must agree with.

Rules (shared/reference/offset-diff.md, rocketmq-ha-behaviour.md section 3):
- A replica is (broker group, broker id, role, DataVersion).  Each broker group has exactly
  one master; the others are slaves.
- Native outcome = what a master's pre-online does, by the one rule of
  ``metadata.pre_online_merge`` (which the broker's own pre-online applies too): the master
  starts from its own table and version, visits the slaves in ascending broker id, and adopts
  a slave's table when its current version is not newer (ties adopt), ``putAll`` per
  ``topic@group`` entry: the last adopted replica that has the entry gives its whole queue
  map, so a queue missing from it disappears (native offset ``None``).
- Safe outcome = per-queue maximum over the replicas that hold the queue: it never moves a
  consumer backwards relative to any replica.
- Rollback of a choice = safe - chosen offset (messages consumed again); ``None`` when the
  choice has no offset for the queue.
- Status: ``in_sync`` (every replica of the group holds the queue, same offset),
  ``diverged`` (every replica holds it, offsets differ), ``one_sided`` (some replicas lack it).
- Reset conflict: the group's strictly newest DataVersion replica holds the queue, yet is
  lower than the maximum by more than the tolerance (looks like an intentional reset).
- A group is DataVersion-inconsistent when the natively chosen table is behind on some
  queues and ahead on others by more than the tolerance: no whole-table choice is right.
- Verdict: ``NEEDS_HUMAN`` when any reset conflict, inconsistent group or merged offset
  beyond the queue's max offset exists; else ``DIVERGED`` when any key is one-sided or
  spreads more than the tolerance; else ``IN_SYNC``.  Exit codes 0, 2, 3 (1 is an error).

Nothing here does I/O; time is an argument.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from metadata.data_version import DataVersion
from metadata.pre_online_merge import MergePlan, plan_merge

ROLE_MASTER = "master"
ROLE_SLAVE = "slave"
MASTER_BROKER_ID = 0
EMPTY_ENTRY_QUEUE_ID = -1  # flat-row marker: the replica holds a topic@group entry with no queue

STATUS_IN_SYNC = "in_sync"
STATUS_DIVERGED = "diverged"
STATUS_ONE_SIDED = "one_sided"

VERDICT_IN_SYNC = "IN_SYNC"
VERDICT_DIVERGED = "DIVERGED"
VERDICT_NEEDS_HUMAN = "NEEDS_HUMAN"
EXIT_CODES = {VERDICT_IN_SYNC: 0, VERDICT_DIVERGED: 2, VERDICT_NEEDS_HUMAN: 3}
EXIT_ERROR = 1
GATE_PRE_ONLINE = "pre-online"
GATES = (GATE_PRE_ONLINE,)
EXIT_GATE_OPEN, EXIT_GATE_CLOSED = 0, 4  # --gate pre-online: a rejoin rolls no consumer back / would roll some back


class OffsetDiffInputError(ValueError):
    """Bad user input (a file, a flag, a manifest); the message names what and where."""


@dataclass(frozen=True)
class ReplicaId:
    broker_group: str
    broker_id: int


@dataclass(frozen=True)
class Replica:
    broker_group: str
    broker_id: int
    role: str
    data_version: DataVersion
    source: str = ""
    fetched_at_ms: int = 0
    address: str = ""

    @property
    def id(self) -> ReplicaId:
        return ReplicaId(self.broker_group, self.broker_id)


@dataclass(frozen=True)
class GroupPlan:
    """What reverse sync does in one broker group, decided from the DataVersions alone: the
    broker's own pre-online plan (``metadata.pre_online_merge``) plus who is strictly newest."""

    broker_group: str
    merge: MergePlan
    newest_id: int | None  # the strictly newest DataVersion, None on a tie at the top

    @property
    def master_id(self) -> int:
        return self.merge.master_id

    @property
    def visit_order(self) -> tuple[int, ...]:  # master first, then slaves ascending
        return self.merge.visit_order

    @property
    def adopted(self) -> tuple[int, ...]:  # in visit order, master first (it starts from its own table)
        return self.merge.adopted

    @property
    def native_version(self) -> DataVersion:
        return self.merge.version

    @property
    def native_winner(self) -> int:
        return self.merge.winner

    def adopt_rank(self, broker_id: int) -> int | None:
        return self.merge.rank(broker_id)


def default_role(broker_id: int) -> str:
    return ROLE_MASTER if broker_id == MASTER_BROKER_ID else ROLE_SLAVE


def validate_replicas(replicas: Iterable[Replica]) -> dict[str, list[Replica]]:
    """Group replicas by broker group; exactly one master each, no duplicate broker id."""
    groups: dict[str, list[Replica]] = {}
    for replica in replicas:
        members = groups.setdefault(replica.broker_group, [])
        if any(member.broker_id == replica.broker_id for member in members):
            raise OffsetDiffInputError(f"broker group {replica.broker_group!r}: broker id {replica.broker_id} given twice")
        members.append(replica)
    for name, members in groups.items():
        masters = [member.broker_id for member in members if member.role == ROLE_MASTER]
        if len(masters) != 1:
            raise OffsetDiffInputError(f"broker group {name!r}: expected exactly one master replica, found {len(masters)} (broker id 0 is the master unless a role is given)")
        members.sort(key=lambda member: member.broker_id)
    return groups


def plan_group(members: list[Replica]) -> GroupPlan:
    master = next(member for member in members if member.role == ROLE_MASTER)
    merge = plan_merge(master.broker_id, {member.broker_id: member.data_version for member in members})
    top = max(member.data_version.sort_key() for member in members)
    at_top = [member.broker_id for member in members if member.data_version.sort_key() == top]
    return GroupPlan(master.broker_group, merge, at_top[0] if len(at_top) == 1 else None)


def merged_data_version(members: Iterable[Replica], now_ms: int) -> DataVersion:
    """A version newer than every replica's, so reverse sync and slaves adopt the plan."""
    newest = max((member.data_version for member in members), key=DataVersion.sort_key)
    return newest.next_version(now_ms)


@dataclass(frozen=True)
class KeyDiff:
    broker_group: str
    topic: str
    group: str
    queue_id: int
    offsets: Mapping[int, int | None]  # broker id -> offset (None: queue absent there)
    status: str
    spread: int
    ahead_id: int
    safe_offset: int
    native_offset: int | None
    master_offset: int | None
    rollback_native: int | None
    rollback_if_master_wins: int | None
    reset_conflict: bool
    beyond_max: bool


def native_offset(plan: GroupPlan, key_present: Mapping[int, bool], offsets: Mapping[int, int | None]) -> int | None:
    """The last adopted replica holding the topic@group entry decides (putAll per entry)."""
    source = plan.merge.entry_source({broker_id for broker_id, present in key_present.items() if present})
    return None if source is None else offsets.get(source)


def diff_key(plan: GroupPlan, members: list[int], topic: str, group: str, queue_id: int,
             offsets: Mapping[int, int | None], key_present: Mapping[int, bool],
             tolerance: int = 0, queue_max: int | None = None) -> KeyDiff:
    present = {broker_id: offset for broker_id, offset in offsets.items() if offset is not None}
    assert present, "a key exists because some replica holds it"
    high, low = max(present.values()), min(present.values())
    ahead = min(broker_id for broker_id, offset in present.items() if offset == high)
    status = STATUS_ONE_SIDED if len(present) < len(members) else (STATUS_IN_SYNC if high == low else STATUS_DIVERGED)
    native = native_offset(plan, key_present, offsets)
    master = present.get(plan.master_id)
    newest = present.get(plan.newest_id) if plan.newest_id is not None else None
    return KeyDiff(
        broker_group=plan.broker_group, topic=topic, group=group, queue_id=queue_id,
        offsets={broker_id: offsets.get(broker_id) for broker_id in members},
        status=status, spread=high - low, ahead_id=ahead, safe_offset=high,
        native_offset=native, master_offset=master,
        rollback_native=None if native is None else high - native,
        rollback_if_master_wins=None if master is None else high - master,
        reset_conflict=newest is not None and high - newest > tolerance,
        beyond_max=queue_max is not None and high > queue_max,
    )


def group_inconsistent(plan: GroupPlan, diffs: Iterable[KeyDiff], tolerance: int = 0) -> bool:
    """The natively chosen table is behind on some queues and ahead on others."""
    behind = ahead = False
    for diff in diffs:
        native = diff.offsets.get(plan.native_winner)
        if native is None:
            continue
        present = [offset for offset in diff.offsets.values() if offset is not None]
        behind |= max(present) - native > tolerance
        ahead |= native - min(present) > tolerance
    return behind and ahead


def verdict(keys_beyond_tolerance: int, keys_one_sided: int, reset_conflicts: int,
            inconsistent_groups: int, beyond_max: int) -> str:
    if reset_conflicts or inconsistent_groups or beyond_max:
        return VERDICT_NEEDS_HUMAN
    if keys_beyond_tolerance or keys_one_sided:
        return VERDICT_DIVERGED
    return VERDICT_IN_SYNC


@dataclass(frozen=True)
class TablesDiff:
    plans: Mapping[str, GroupPlan]
    keys: tuple[KeyDiff, ...]
    inconsistent_groups: frozenset[str]


def diff_tables(replicas: Iterable[Replica], tables: Mapping[ReplicaId, Mapping[tuple[str, str], Mapping[int, int]]],
                tolerance: int = 0, queue_max: Mapping[tuple[str, str, int], int] | None = None) -> TablesDiff:
    """The whole diff in plain Python: tables map replica -> (topic, group) -> queue -> offset."""
    groups = validate_replicas(replicas)
    plans = {name: plan_group(members) for name, members in groups.items()}
    keys: list[KeyDiff] = []
    inconsistent: set[str] = set()
    for name, members in groups.items():
        ids = [member.broker_id for member in members]
        entries = {entry for broker_id in ids for entry in tables.get(ReplicaId(name, broker_id), {})}
        group_keys: list[KeyDiff] = []
        for topic, group in sorted(entries):
            maps = {broker_id: tables.get(ReplicaId(name, broker_id), {}).get((topic, group)) for broker_id in ids}
            present = {broker_id: queues is not None for broker_id, queues in maps.items()}
            for queue_id in sorted({queue for queues in maps.values() if queues for queue in queues}):
                offsets = {broker_id: (queues or {}).get(queue_id) for broker_id, queues in maps.items()}
                limit = (queue_max or {}).get((name, topic, queue_id))
                group_keys.append(diff_key(plans[name], ids, topic, group, queue_id, offsets, present, tolerance, limit))
        if group_inconsistent(plans[name], group_keys, tolerance):
            inconsistent.add(name)
        keys.extend(group_keys)
    return TablesDiff(plans, tuple(keys), frozenset(inconsistent))
