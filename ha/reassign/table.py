"""The controller's replicated table of broker moves (issue 26): what a new leader resumes from.

Rules:
- A move changes only by a committed :class:`MoveRecord`: the whole record of one move after
  a decision of :mod:`ha.reassign.move` (replace semantics, like the users and ACLs: replay
  and snapshots are trivial, and a record is never half applied).
- :class:`Reassignments` holds the moves in progress, by broker, and the last
  :data:`FINISHED_KEPT` finished ones (``reassign-broker --list`` and ``--verify`` read them).
  A record for a broker whose current move has another epoch replaces it only when newer.
- The JSON form (:func:`move_to_json`, :func:`move_from_json`) is the Raft entry's body and the
  snapshot's; reading it checks every field and names the one that is wrong.
- Pure: values in, values out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from ha.reassign.move import FINAL, Move, Step

FINISHED_KEPT = 64


@dataclass(frozen=True)
class MoveRecord:
    """The Raft entry: one move's record as it is now."""
    move: Move


@dataclass(frozen=True)
class Reassignments:
    active: Mapping[str, Move] = field(default_factory=lambda: MappingProxyType({}))
    finished: tuple[Move, ...] = ()

    def apply(self, record: MoveRecord) -> "Reassignments":
        move = record.move
        current = self.active.get(move.broker)
        if current is not None and move.epoch < current.epoch:
            return self  # an older move's record, replayed after a newer one began
        active = dict(self.active)
        if move.step in FINAL:
            active.pop(move.broker, None)
            finished = (*[m for m in self.finished if (m.broker, m.epoch) != (move.broker, move.epoch)], move)
            return Reassignments(MappingProxyType(active), finished[-FINISHED_KEPT:])
        active[move.broker] = move
        return Reassignments(MappingProxyType(active), self.finished)

    def moving(self) -> frozenset[str]:
        return frozenset(self.active)

    def to_json(self) -> dict:
        return {"active": [move_to_json(m) for _, m in sorted(self.active.items())],
                "finished": [move_to_json(m) for m in self.finished]}

    @staticmethod
    def from_json(body: dict) -> "Reassignments":
        if not isinstance(body, dict):
            raise ValueError("reassignments: expected an object")
        active = [move_from_json(m) for m in _list(body, "active")]
        finished = tuple(move_from_json(m) for m in _list(body, "finished"))
        return Reassignments(MappingProxyType({m.broker: m for m in active}), finished[-FINISHED_KEPT:])


def _list(body: dict, key: str) -> list:
    value = body.get(key, [])
    if not isinstance(value, list):
        raise ValueError(f"reassignments: {key} is not a list")
    return value


_FIELDS = (("broker", str), ("source", str), ("target", str), ("epoch", int), ("startedMs", int), ("sinceMs", int))


def move_to_json(move: Move) -> dict:
    return {"broker": move.broker, "source": move.source, "target": move.target, "epoch": move.epoch,
            "step": move.step.value, "startedMs": move.started_ms, "sinceMs": move.since_ms,
            "handedEnd": move.handed_end, "fenced": move.fenced, "why": move.why, "entry": move.entry}


def move_from_json(body: object) -> Move:
    if not isinstance(body, dict):
        raise ValueError("move: expected an object")
    values = {}
    for key, kind in _FIELDS:
        value = body.get(key)
        if not isinstance(value, kind) or isinstance(value, bool) or (kind is str and not value):
            raise ValueError(f"move: {key} must be a{' non-empty' if kind is str else 'n'} {kind.__name__}, got {value!r}")
        values[key] = value
    try:
        step = Step(body.get("step"))
    except ValueError:
        raise ValueError(f"move: step {body.get('step')!r} is not one of {[s.value for s in Step]}") from None
    handed = body.get("handedEnd")
    if handed is not None and (not isinstance(handed, int) or isinstance(handed, bool) or handed < 0):
        raise ValueError(f"move: handedEnd must be a non-negative int or null, got {handed!r}")
    if not isinstance(body.get("fenced", False), bool) or not isinstance(body.get("why", ""), str):
        raise ValueError("move: fenced must be a bool and why a string")
    if not isinstance(body.get("entry", ""), str):
        raise ValueError("move: entry must be a string (the broker's keys as JSON)")
    if values["epoch"] < 1:
        raise ValueError(f"move: epoch must be at least 1, got {values['epoch']}")
    return Move(values["broker"], values["source"], values["target"], values["epoch"], step, values["startedMs"],
                values["sinceMs"], handed, body.get("fenced", False), body.get("why", ""), body.get("entry", ""))
