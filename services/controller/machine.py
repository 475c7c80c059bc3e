"""The controller state machine as Raft sees it: committed entries in, tables updated.

Rules:
- Entries are applied in log order on every member.  ``b""`` (a leader's no-op) and the
  read barrier are skipped; anything else is one encoded controller event.
- Leadership is "ready" only once this member's own no-op of its current term is applied:
  then every earlier committed entry is applied too, and decisions may be taken against
  the tables (RocketMQ's RoleChangeHandler waits for the same).
- After each applied event the affected set's view goes to its watchers (every member
  notifies its own subscribers, so a broker may watch any controller).
- Every applied election is logged with its index, master and epoch, on every member.
- The users and ACLs (``acl``, :mod:`metadata.acl_replication`) change only by an applied
  ``AclDocument``; ``acl_applied`` is told after each (the controller wakes waiting syncs).
  Snapshots carry them under the key ``acl`` next to the replica tables (an older snapshot
  without it restores to no users and ACLs).
- Broker moves (``reassignments``, :mod:`ha.reassign.table`, issue 26) change only by an
  applied ``MoveRecord``; snapshots carry them under ``reassignments``.
"""
from __future__ import annotations

import logging
from typing import Callable

from ha.controller.commands import group_view
import orjson

from ha.controller.events import ElectMasterEvent, decode_event
from ha.controller.liveness import BrokerLiveness
from ha.controller.replicas import ReplicasInfo
from ha.controller.requests import GroupView
from ha.raft.types import Entry, Role, SoftState
from ha.reassign.table import MoveRecord, Reassignments
from metadata.acl_files import dump_acl_toml
from metadata.acl_replication import AclDocument, ReplicatedAcl, apply_document

log = logging.getLogger(__name__)
READ_BARRIER = b"\x00\x04{}"  # RocketMQ's ReadEvent type id: proposed for consistent reads, never applied


class ControllerMachine:
    def __init__(self, liveness: BrokerLiveness, now_ms: Callable[[], int],
                 publish: Callable[[str, GroupView | None], None]) -> None:
        self.replicas = ReplicasInfo()
        self.acl = ReplicatedAcl()
        self.acl_applied: Callable[[], None] = lambda: None
        self.reassignments = Reassignments()  # broker moves (ha.reassign.table)
        self.liveness = liveness
        self._now_ms = now_ms
        self._publish = publish
        self.soft = SoftState(None, Role.FOLLOWER)
        self.term = 0
        self.ready_term: int | None = None
        self.applied_index = 0
        self.applied_events = 0
        self.elections = 0  # terms this member campaigned in, seen at role changes (metrics)
        self.leader_changes = 0  # times the known leader changed (metrics)

    @property
    def serving(self) -> bool:
        return self.soft.role == Role.LEADER and self.ready_term == self.term

    def role_changed(self, soft: SoftState, term: int) -> None:
        if term > self.term and soft.role in (Role.CANDIDATE, Role.LEADER):
            self.elections += 1  # a term this member campaigned in (a one-member group wins in the same step)
        if soft.leader_id != self.soft.leader_id and soft.leader_id is not None:
            self.leader_changes += 1
        self.soft, self.term = soft, term
        if soft.role != Role.LEADER:
            if self.ready_term is not None:
                log.info("controller stepped down in term %s", term)
            self.ready_term = None
            self.liveness.stepped_down()

    def apply_entry(self, entry: Entry) -> None:
        self.applied_index = entry.index
        if entry.data == b"":
            if self.soft.role == Role.LEADER and entry.term == self.term and self.ready_term != self.term:
                self.ready_term = self.term
                self.liveness.became_leader(self._now_ms())
                log.info("controller leader ready in term %s at index %s", self.term, entry.index)
            return
        if entry.data == READ_BARRIER:
            return
        event = decode_event(entry.data)
        if isinstance(event, AclDocument):
            self.acl = apply_document(self.acl, event)
            self.applied_events += 1
            log.info("applied users and ACLs at index %s: %s, %d users, %d ACL entries", entry.index, self.acl.stamp,
                     len(self.acl.state.users), self.acl.state.entry_count)
            self.acl_applied()
            return
        if isinstance(event, MoveRecord):
            self.reassignments = self.reassignments.apply(event)
            self.applied_events += 1
            log.info("applied move of %s at index %s: %s (epoch %s, %s -> %s)", event.move.broker, entry.index,
                     event.move.step.value, event.move.epoch, event.move.source, event.move.target)
            return
        self.replicas.apply(event)
        self.applied_events += 1
        name = event.broker_name
        view = group_view(self.replicas, name) if self.replicas.exists(name) else None
        if view is not None and isinstance(event, ElectMasterEvent) and event.new_master_elected:
            # every member logs every election it applies (replayed ones again after a restart):
            # the record an auditor checks for one master per group and epoch (bench/chaos.py)
            log.info("applied election at index %s: %s master %s epoch %s", entry.index, name,
                     view.master_broker_id, view.master_epoch)
        self._publish(name, view)

    def snapshot_encoder(self) -> Callable[[], bytes]:
        """The tables as they are now, to encode in a worker thread (values are frozen)."""
        tables, acl, moves = self.replicas.detached().snapshot, self.acl, self.reassignments

        def encode() -> bytes:
            data = tables()
            if moves.active or moves.finished:
                data = data[:-1] + b',"reassignments":' + orjson.dumps(moves.to_json()) + b"}"
            if not acl.origin:
                return data
            document = {"origin": acl.origin, "version": acl.state.version, "document": dump_acl_toml(acl.state)}
            return data[:-1] + b',"acl":' + orjson.dumps(document) + b"}"
        return encode

    def restore(self, data: bytes) -> None:
        self.replicas = ReplicasInfo.restore(data)
        whole = orjson.loads(data) if data else {}
        moves = whole.get("reassignments")
        self.reassignments = Reassignments() if moves is None else Reassignments.from_json(moves)
        body = whole.get("acl")
        self.acl = ReplicatedAcl() if body is None else apply_document(
            ReplicatedAcl(), AclDocument(body["origin"], int(body["version"]), body["document"]))
        self.acl_applied()

