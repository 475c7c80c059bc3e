"""What ``relaymq admin`` shows when part of the cluster is down: pure functions over the
nameserver's view and each replica's answer (or failure).

Rules:
- Every query answers with what it reached.  A replica is ``OK`` (it answered),
  ``UNREACHABLE`` (registered, but its container did not answer) or ``NOT_REGISTERED`` (the
  nameserver has no such member: every broker group has a master, id 0, so a group without
  one is missing its master).  Replicas are named by their own ids (the nameserver's members,
  not a route the acting-master rewrite moved to id 0).
- A group whose master is ``OK`` is writable and servable.  Without one, a slave that answered
  that it acts for the master (RIP-32) serves the group's reads and receives: the group is
  servable, not writable, and its queues are reported from that slave, marked so.  Otherwise
  the group cannot be written or consumed: its messages are *stranded* until the master returns.
- Lag on a group served by an acting slave is that slave's and is not stranded.  Lag on a
  group nobody serves is not 0: it is read from the slave that holds the most (its replicated
  offsets and max offsets, as of its last sync with the master) and counted as stranded; a
  group with no replica that answered has an unknown lag, said so.
- A name nobody knows is an error, not an empty table: :func:`unknown_group` decides it from
  the replicas that answered.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Mapping, Sequence

OK, UNREACHABLE, NOT_REGISTERED = "OK", "UNREACHABLE", "NOT_REGISTERED"
MASTER_ID = 0


@dataclass(frozen=True)
class Group:
    """One broker group as the nameserver sees it: registered members, id -> admin address."""

    cluster: str
    broker_name: str
    members: Mapping[int, str]


@dataclass(frozen=True)
class Failure:
    """A replica's call did not get an answer (``detail`` says why)."""

    detail: str


@dataclass
class GroupState:
    cluster: str
    broker_name: str
    master: str  # OK | UNREACHABLE | NOT_REGISTERED
    replicas: list[dict] = field(default_factory=list)
    acting_id: int | None = None  # the slave that answered it acts for the master, when the master is not OK

    @property
    def writable(self) -> bool:
        return self.master == OK

    @property
    def servable(self) -> bool:
        """Its queues can be consumed: by the master, or by a slave acting for it."""
        return self.writable or self.acting_id is not None

    @property
    def served_by(self) -> str:
        if self.writable:
            return "master"
        return f"acting slave {self.acting_id}" if self.acting_id is not None else ""

    def to_json(self) -> dict:
        return {"cluster": self.cluster, "brokerName": self.broker_name, "master": self.master,
                "servable": self.servable, "writable": self.writable, "actingSlave": self.acting_id,
                "servedBy": self.served_by, "replicas": self.replicas}


def replica_states(group: Group, answers: Mapping[int, Any], acting: Collection[int] = ()) -> GroupState:
    """Each registered replica's state from ``answers`` (id -> reply or :class:`Failure`), plus
    the master as NOT_REGISTERED when the nameserver has none.  ``acting``: the ids whose
    answer said they act for their master; the smallest that answered serves a group whose
    master is not OK."""
    replicas = []
    for broker_id, address in sorted(group.members.items()):
        answer = answers.get(broker_id)
        state = UNREACHABLE if isinstance(answer, Failure) or answer is None else OK
        replicas.append({"brokerId": broker_id, "address": address, "state": state,
                         "detail": answer.detail if isinstance(answer, Failure) else ""})
    if MASTER_ID not in group.members:
        replicas.insert(0, {"brokerId": MASTER_ID, "address": "", "state": NOT_REGISTERED,
                            "detail": "no master registered at the nameserver (down, or expired after its heartbeats stopped)"})
    master = next(r["state"] for r in replicas if r["brokerId"] == MASTER_ID)
    answered = {r["brokerId"] for r in replicas if r["state"] == OK}
    acting_id = None if master == OK else min((i for i in acting if i != MASTER_ID and i in answered), default=None)
    return GroupState(group.cluster, group.broker_name, master, replicas, acting_id)


def _offset_total(rows: Sequence[dict]) -> int:
    return sum(row["brokerOffset"] for row in rows)


def choose_progress(state: GroupState, rows_by_id: Mapping[int, list[dict]]) -> tuple[str, list[dict]]:
    """(source, rows) for one group: the master's rows when it answered, else the acting
    slave's, else the rows of the slave that holds the most messages (stranded), else
    ("", []) when no replica answered."""
    if state.writable and MASTER_ID in rows_by_id:
        return "master", rows_by_id[MASTER_ID]
    if state.acting_id is not None and state.acting_id in rows_by_id:
        return state.served_by, rows_by_id[state.acting_id]
    slaves = [(broker_id, rows) for broker_id, rows in rows_by_id.items() if broker_id != MASTER_ID]
    if not slaves:
        return "", []
    broker_id, rows = max(slaves, key=lambda pair: (_offset_total(pair[1]), -pair[0]))
    return f"slave {broker_id}", rows


def progress_document(group_name: str, topic: str | None, states: Sequence[GroupState],
                      rows: Mapping[str, Mapping[int, list[dict]]]) -> dict:
    """The consumer-progress document: rows per queue with their source, lag totals (stranded
    counted apart) and the groups whose lag is unknown.  ``complete``: every group is served
    (by its master or an acting slave) and its lag was read there."""
    queues, groups = [], []
    total = stranded = 0
    for state in states:
        source, chosen = choose_progress(state, rows.get(state.broker_name, {}))
        lag = sum(row["lag"] for row in chosen)
        is_stranded = bool(source) and not state.servable
        queues += [dict(row, source=source, stranded=is_stranded) for row in chosen]
        total += lag
        stranded += lag if is_stranded else 0
        groups.append(dict(state.to_json(), source=source, lag=lag if source else None))
    return {"group": group_name, "topic": topic, "queues": queues, "totalLag": total, "strandedLag": stranded,
            "complete": all(g["servable"] for g in groups), "groups": groups}


def unknown_group(answers: Sequence[tuple[bool, int]]) -> bool:
    """True when at least one replica answered and none knows the group: ``answers`` holds
    (group known by that broker, rows it returned) per replica that answered."""
    return bool(answers) and not any(known or rows for known, rows in answers)


def progress_footer(document: dict) -> list[str]:
    """The lines under the consumer-progress table that say what the totals include."""
    lines = [f"total lag: {document['totalLag']}"]
    for group in document["groups"]:
        if group["writable"]:
            continue
        if group["servable"]:
            lines.append(f"{group['brokerName']}: master {group['master'].lower().replace('_', ' ')}; "
                         f"slave {group['actingSlave']} acts for it and serves its {group['lag']} messages "
                         f"(consumable there; it takes no sends)")
            continue
        if group["source"]:
            lines.append(f"{group['brokerName']}: master {group['master'].lower().replace('_', ' ')}; "
                         f"{group['lag']} messages stranded there (read from {group['source']}, as of its last sync), "
                         f"not consumable until the master returns")
        else:
            lines.append(f"{group['brokerName']}: no replica answered; its lag is unknown and not in the total")
    if document["strandedLag"]:
        lines.append(f"stranded lag: {document['strandedLag']} of {document['totalLag']}")
    return lines


def unreachable_lines(states: Sequence[GroupState]) -> list[str]:
    """One line per replica that did not answer or is not registered."""
    lines = []
    for state in states:
        for replica in state.replicas:
            if replica["state"] == OK:
                continue
            where = f" at {replica['address']}" if replica["address"] else ""
            lines.append(f"{state.broker_name} id {replica['brokerId']}{where}: {replica['state']}"
                         + (f" ({replica['detail']})" if replica["detail"] else ""))
        if state.acting_id is not None and not state.writable:
            lines.append(f"{state.broker_name}: no reachable master; slave {state.acting_id} acts for it: "
                         "its queues are read and consumed there, not written")
        elif not state.servable:
            lines.append(f"{state.broker_name}: no reachable master; its queues cannot be written or consumed")
    return lines
