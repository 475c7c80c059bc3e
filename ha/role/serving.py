"""Whether a replica may serve a call, and how far its consumers may read: one table.

Rules (the broker asks :meth:`ha.role.replica_node.ReplicaNode.refusal` before every call,
instead of checking role, acting, pre-online and hand-over in four layers):

* The facts: the replica's role as writes see it (``write_refusal``: None for a MASTER whose
  switch is done and whose pause fence allows; NOT_MASTER, IN_TRANSITION or PAUSED
  otherwise) and its serving facts (:class:`ServingFacts`: a slave acting for its absent
  master, a master in pre-online, a master's hand-over from its acting members done).
* Per kind of call (:class:`Call`):
  - WRITE (send, recall): a writable master only.  An acting slave serves reads and
    receives, never sends (ACTING_READS_ONLY: the client sends to another broker).
  - RESOLVE (end-transaction): an acting slave resolves its own halves; otherwise as WRITE.
  - ESCAPE_PUT (what another group's acting slave escapes here): as WRITE, and not in
    pre-online (issue 24 defect 2: a master still taking its tables back would store a
    message the acting slave's timer already delivered).
  - POP (receive, ack, invisibility, DLQ forward): an acting slave; or a master once its
    hand-over is done (AWAITING_HANDOVER: the driver waits for it, bounded).  Not fenced by
    a pause: a pop call's records wait for the replicas like a send (services.broker.broker).
  - READ (query offset): an acting slave or a master.
  - OFFSET_WRITE (an operator's offset write or reset): as WRITE, and not in pre-online (the
    tables it takes back from its slaves would override the write).
  - TABLES (the tables a slave syncs): not in pre-online (a slave that copied them first
    would hand the stale copy back: upstream #1094's rollback).
* Read limit: consumers read up to the confirm offset, except on an acting slave (its log is
  what the group has: its master is gone) and on a master alone in its SyncStateSet (nothing
  to wait for).
* Pure: facts in, a refusal (or None) out.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Call(str, Enum):
    WRITE = "WRITE"
    RESOLVE = "RESOLVE"
    ESCAPE_PUT = "ESCAPE_PUT"
    POP = "POP"
    READ = "READ"
    OFFSET_WRITE = "OFFSET_WRITE"
    TABLES = "TABLES"


class Refusal(str, Enum):
    NOT_MASTER = "NOT_MASTER"
    IN_TRANSITION = "IN_TRANSITION"      # a new master whose switch is not done
    PAUSED = "PAUSED"                    # a master confirming with the controller after a pause
    ACTING_READS_ONLY = "ACTING_READS_ONLY"
    PRE_ONLINE = "PRE_ONLINE"
    AWAITING_HANDOVER = "AWAITING_HANDOVER"


@dataclass(frozen=True)
class ServingFacts:
    acting: bool = False          # a slave running its group's special services for its absent master
    pre_online: bool = False      # a master that has not taken its group's tables back yet
    handed_over: bool = False     # a master: the acting members handed the special state back (or none acted)


def refusal(call: Call, write_refusal: Refusal | None, facts: ServingFacts) -> Refusal | None:
    """``write_refusal``: None, NOT_MASTER, IN_TRANSITION or PAUSED (the node's role and fence)."""
    if call is Call.TABLES:
        return Refusal.PRE_ONLINE if facts.pre_online else None
    if facts.acting and call in (Call.RESOLVE, Call.POP, Call.READ):
        return None
    if call in (Call.POP, Call.READ):  # not fenced by a pause; a switch in progress is not master yet
        if write_refusal in (Refusal.NOT_MASTER, Refusal.IN_TRANSITION):
            return write_refusal
        return Refusal.AWAITING_HANDOVER if call is Call.POP and not facts.handed_over else None
    if write_refusal is Refusal.NOT_MASTER and facts.acting:
        return Refusal.ACTING_READS_ONLY
    if write_refusal is not None:
        return write_refusal
    if call in (Call.ESCAPE_PUT, Call.OFFSET_WRITE) and facts.pre_online:
        return Refusal.PRE_ONLINE
    return None


def read_limit(confirm_offset: int, *, acting: bool, master_alone: bool) -> int | None:
    """The offset consumers read up to (None: the whole log)."""
    return None if acting or master_alone else confirm_offset
