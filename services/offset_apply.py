"""Apply an offset-diff plan made from live replicas: a compare-and-set write on each master.

Rules:
- Input: a folder written by ``relaymq offset-diff --replica ... --output DIR``.  From
  ``summary.json``: ``plan`` (per broker group, each replica's address and the DataVersion
  it had when fetched) and ``replicas`` (roles); from ``plan/<group>/consumerOffset.json``:
  the safe table.  A plan made from files is not this module's (:func:`read_live_plan`
  returns None and ``spark_tools/offset_apply.py`` writes the files); a plan mixing both
  is refused.
- Only each group's master is written: its table is the authoritative one, and its slaves
  adopt it by metadata sync (``slaveSynchronizePeriod``), because the write bumps its
  DataVersion.  Slaves are not contacted.
- Check, then write.  Check: every master is read (``GetConsumerOffsets``); if one moved
  since the plan, is no longer that group's master or cannot be read (as a replica file that
  is gone in the file apply), the run is NOT APPLIED (exit 3) and nothing is written
  anywhere.  Write: broker groups in name order, one ``WriteConsumerOffsets`` each, carrying
  the queues where the safe table differs from the master's (raise and add) and the planned
  DataVersion as the expected one: the broker writes all of them or none.  The first group
  that is refused or does not answer stops the run; the groups written before it are listed.
- Exit codes, as the file apply's: 0 every master now holds its plan (written, or nothing to
  raise); 1 the plan folder is unusable (:class:`LiveApplyError`), nothing written; 3 needs a
  human (moved, not the master, unreadable, refused, or a write whose outcome is unknown
  because it did not answer in time): re-run the diff.
- Every call has a deadline (``timeout_ms``).  The gRPC calls go through an
  :class:`OffsetAdmin` (the admin API here, a fake in tests); the rest are plain functions.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence, TextIO

from metadata.consumer_offsets import ConsumerOffsetTable, OffsetFileError, loads
from metadata.data_version import DataVersion, DataVersionFormatError
from metadata.offset_write import QueueOffset

EXIT_OK = 0
EXIT_NEEDS_HUMAN = 3
LISTED_QUEUES_MAX = 20  # queues listed per broker group in the report; plan.csv has every key
_NO_ANSWER = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "UNKNOWN", "INTERNAL"}


class LiveApplyError(Exception):
    """The plan cannot be applied and nothing was written; the message names why."""


class AdminCallFailed(Exception):
    def __init__(self, code: str, details: str):
        super().__init__(f"{code}: {details}")
        self.code, self.details = code, details

    @property
    def no_answer(self) -> bool:
        return self.code in _NO_ANSWER


@dataclass(frozen=True)
class MasterTarget:
    broker_group: str
    broker_id: int
    address: str
    planned: DataVersion
    slaves: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.broker_group}:{self.broker_id} ({self.address})"


@dataclass(frozen=True)
class MasterState:
    broker_id: int
    role: str  # "MASTER" | "SLAVE"
    table: ConsumerOffsetTable


@dataclass(frozen=True)
class WriteReply:
    written: bool
    data_version: DataVersion
    offsets: tuple[QueueOffset, ...]
    detail: str


class OffsetAdmin(Protocol):
    def read(self, target: MasterTarget, timeout_s: float) -> MasterState: ...

    def write(self, target: MasterTarget, offsets: Sequence[QueueOffset], timeout_s: float) -> WriteReply: ...


@dataclass(frozen=True)
class LivePlan:
    plan_dir: str
    targets: tuple[MasterTarget, ...]

    def safe_table(self, broker_group: str) -> ConsumerOffsetTable:
        path = os.path.join(self.plan_dir, "plan", broker_group, "consumerOffset.json")
        try:
            with open(path, "rb") as handle:
                return loads(handle.read(), where=path)
        except OSError as exc:
            raise LiveApplyError(f"{path}: {exc.strerror}") from None
        except OffsetFileError as exc:
            raise LiveApplyError(str(exc)) from None


def _read_summary(plan_dir: str) -> Mapping[str, Any] | None:
    try:
        with open(os.path.join(plan_dir, "summary.json"), encoding="utf-8") as handle:
            summary = json.load(handle)
    except (OSError, ValueError):
        return None  # the file apply reports an unreadable summary
    return summary if isinstance(summary, dict) and isinstance(summary.get("plan"), dict) else None


def _target(broker_group: str, record: Mapping[str, Any], roles: Mapping[tuple[str, int], str]) -> MasterTarget:
    members = record["replicas"]
    masters = [member for member in members if roles.get((broker_group, member["broker_id"])) == "master"]
    if len(masters) != 1:
        raise LiveApplyError(f"plan {broker_group}: expected one master replica in summary.json, found {len(masters)}")
    master = masters[0]
    try:
        planned = DataVersion.from_json(master["data_version"], f"plan {broker_group}:{master['broker_id']} data_version")
    except DataVersionFormatError as exc:
        raise LiveApplyError(str(exc)) from None
    slaves = tuple(sorted(member["broker_id"] for member in members if member is not master))
    return MasterTarget(broker_group, int(master["broker_id"]), str(master["address"]), planned, slaves)


def read_live_plan(plan_dir: str) -> LivePlan | None:
    """The plan's masters when it was made from live replicas; None for a plan made from files."""
    summary = _read_summary(plan_dir)
    if summary is None:
        return None
    plan = summary["plan"]
    try:
        members = [member for record in plan.values() for member in record["replicas"]]
        live = [bool(member.get("address")) and not member.get("source") for member in members]
        if not any(live):
            return None
        if not all(live):
            raise LiveApplyError(f"{plan_dir}: the plan mixes files and live replicas; apply cannot write both")
        roles = {(r["broker_group"], r["broker_id"]): r["role"] for r in summary.get("replicas", [])}
        return LivePlan(plan_dir, tuple(_target(group, plan[group], roles) for group in sorted(plan)))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise LiveApplyError(f"{plan_dir}/summary.json: malformed plan ({type(exc).__name__}: {exc})") from None


def raises(safe: ConsumerOffsetTable, current: ConsumerOffsetTable) -> list[QueueOffset]:
    """The queues where the master's table differs from the safe one (``raise`` and ``add``)."""
    return [QueueOffset(topic, group, queue_id, offset) for topic, group, queue_id, offset in safe.rows()
            if current.get(topic, group, queue_id) != offset]


def check_masters(plan: LivePlan, admin: OffsetAdmin, timeout_s: float) -> tuple[dict[str, MasterState], list[str]]:
    """Each master's state, and why a master may not be written (moved, no longer the master,
    cannot be read: like a replica file that is gone in the file apply)."""
    states, moved = {}, []
    for target in plan.targets:
        try:
            state = admin.read(target, timeout_s)
        except AdminCallFailed as exc:
            moved.append(f"{target.name}: cannot be read: {exc}")
            continue
        if state.broker_id != target.broker_id or state.role != "MASTER":
            moved.append(f"{target.name}: answers as broker id {state.broker_id} ({state.role}), planned as the master")
        elif state.table.data_version != target.planned:
            moved.append(f"{target.name}: dataVersion {target.planned.to_json()} -> {state.table.data_version.to_json()}")
        states[target.broker_group] = state
    return states, moved


def _written_lines(target: MasterTarget, before: ConsumerOffsetTable, reply: WriteReply) -> list[str]:
    lines = [f"applied {target.name}: {len(reply.offsets)} queues, dataVersion "
             f"{target.planned.to_json()} -> {reply.data_version.to_json()}"]
    for item in reply.offsets[:LISTED_QUEUES_MAX]:
        old = before.get(item.topic, item.group, item.queue_id)
        lines.append(f"  {item.describe()}: {'(none)' if old is None else old} -> {item.offset}")
    if len(reply.offsets) > LISTED_QUEUES_MAX:
        lines.append(f"  ... and {len(reply.offsets) - LISTED_QUEUES_MAX} more (plan.csv lists every key)")
    if target.slaves:
        lines.append(f"  slaves follow by metadata sync: {', '.join(f'{target.broker_group}:{s}' for s in target.slaves)}")
    return lines


def _write_one(target: MasterTarget, state: MasterState, updates: list[QueueOffset], admin: OffsetAdmin,
               timeout_s: float) -> tuple[bool, list[str]]:
    try:
        reply = admin.write(target, updates, timeout_s)
    except AdminCallFailed as exc:
        if exc.no_answer:
            return False, [f"UNKNOWN {target.name}: {exc}; the write may or may not have happened: re-run the diff"]
        return False, [f"NOT APPLIED {target.name}: {exc.details}"]
    if not reply.written:
        return False, [f"NOT APPLIED {target.name}: moved since the check: {reply.detail}"]
    return True, _written_lines(target, state.table, reply)


def apply_live_plan(plan: LivePlan, admin: OffsetAdmin, timeout_ms: int, out: TextIO) -> int:
    timeout_s = timeout_ms / 1000
    states, moved = check_masters(plan, admin, timeout_s)
    if moved:
        out.write("NOT APPLIED: replicas moved since the plan was made; re-run the diff\n")
        out.writelines(f"  {line}\n" for line in moved)
        return EXIT_NEEDS_HUMAN
    done = 0
    for index, target in enumerate(plan.targets):
        state = states[target.broker_group]
        updates = raises(plan.safe_table(target.broker_group), state.table)
        if not updates:
            out.write(f"unchanged {target.name}: already holds the plan, nothing written\n")
            done += 1
            continue
        ok, lines = _write_one(target, state, updates, admin, timeout_s)
        out.writelines(f"{line}\n" for line in lines)
        if not ok:
            rest = [t.broker_group for t in plan.targets[index + 1:]]
            if rest:
                out.write(f"not attempted: {', '.join(rest)}\n")
            out.write(f"PARTIAL: {done} of {len(plan.targets)} broker groups hold their plan; re-run the diff\n")
            return EXIT_NEEDS_HUMAN
        done += 1
    out.write(f"APPLIED: {done} broker groups\n")
    return EXIT_OK


class AdminOffsetApi:
    """:class:`OffsetAdmin` over the broker admin gRPC API of each master's container."""

    def __init__(self, channel_factory: Callable[[str], Any] | None = None, credentials=None):
        """``credentials``: what each call is signed with (default: the caller's, which
        ``relaymq offset-diff --access-key/--secret-key`` sets)."""
        from services.admin.client import CALLER_CREDENTIALS

        self._channel_factory = channel_factory
        self._credentials = credentials or CALLER_CREDENTIALS.get()

    def _call(self, address: str, method: str, request: Any, timeout_s: float) -> Any:
        import grpc

        from services.cluster_auth import internal_sync_channel

        from proto import admin_pb2_grpc as pb_grpc
        from services.ha.converters import MAX_FRAME_BYTES

        options = [("grpc.max_send_message_length", MAX_FRAME_BYTES), ("grpc.max_receive_message_length", MAX_FRAME_BYTES)]
        channel = self._channel_factory(address) if self._channel_factory else internal_sync_channel(address, options=options)
        try:
            signed = self._credentials.metadata() if self._credentials is not None else None
            return getattr(pb_grpc.BrokerAdminStub(channel), method)(request, timeout=timeout_s, metadata=signed)
        except grpc.RpcError as exc:
            raise AdminCallFailed(exc.code().name, exc.details() or exc.code().name) from None
        finally:
            channel.close()

    def read(self, target: MasterTarget, timeout_s: float) -> MasterState:
        from proto import admin_pb2 as pb

        reply = self._call(target.address, "GetConsumerOffsets",
                           pb.AdminGetConsumerOffsetsRequest(broker_name=target.broker_group), timeout_s)
        try:
            table = loads(reply.document, where=f"{target.name} consumerOffset.json")
        except OffsetFileError as exc:
            raise AdminCallFailed("BAD_REPLY", str(exc)) from None
        return MasterState(int(reply.broker_id), reply.role.upper(), table)

    def write(self, target: MasterTarget, offsets: Sequence[QueueOffset], timeout_s: float) -> WriteReply:
        from proto import admin_pb2 as pb

        version = target.planned
        request = pb.AdminWriteConsumerOffsetsRequest(
            broker_name=target.broker_group, broker_id=target.broker_id,
            expected_data_version=pb.AdminDataVersion(state_version=version.state_version, timestamp_ms=version.timestamp_ms,
                                                      counter=version.counter),
            offsets=[pb.AdminQueueOffset(topic=o.topic, group=o.group, queue_id=o.queue_id, offset=o.offset) for o in offsets])
        reply = self._call(target.address, "WriteConsumerOffsets", request, timeout_s)
        data_version = DataVersion(reply.data_version.state_version, reply.data_version.timestamp_ms, reply.data_version.counter)
        written = tuple(QueueOffset(o.topic, o.group, o.queue_id, o.offset) for o in reply.offsets)
        return WriteReply(reply.written, data_version, written, reply.detail)
