"""An in-memory network of RaftNodes for scenario, transcript and simulation tests.

Rules:
- Deterministic: no clock, no threads; one seeded random.Random per node.
- Each node has a MemoryStorage that models the durable side exactly like
  store.raft_storage.RaftStorage (hard state, snapshot, log with suffix truncation);
  crash() throws away everything else, restart() recovers from it.
- The Ready contract is followed literally: persist, then queue messages, then
  restore the snapshot and apply committed entries, then advance.
- Links are cut per direction (drop) or both ways (cut); isolate cuts a node off.

Reusable by the controller's tests: pass `apply` to observe committed entries.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ha.raft.node import RaftNode
from ha.raft.types import (
    Entry, HardState, Message, NodeId, RaftConfig, Ready, RecoveredState, Role, Snapshot,
)


@dataclass
class MemoryStorage:
    """What survives a crash: the durable state RaftStorage would hold."""

    hard_state: HardState = HardState(0, None, 0)
    snapshot: Snapshot | None = None
    entries: list[Entry] = field(default_factory=list)

    def save(self, ready: Ready) -> None:
        for snapshot in (ready.snapshot, ready.compaction):
            if snapshot is not None:
                self._save_snapshot(snapshot)
        if ready.entries:
            first = ready.entries[0].index
            self.entries = [e for e in self.entries if e.index < first] + list(ready.entries)
        if ready.hard_state is not None:
            self.hard_state = ready.hard_state

    def _save_snapshot(self, snapshot: Snapshot) -> None:
        if self.snapshot is not None and snapshot.index <= self.snapshot.index:
            return
        keep = any(e.index == snapshot.index and e.term == snapshot.term for e in self.entries)
        self.entries = [e for e in self.entries if e.index > snapshot.index] if keep else []
        self.snapshot = snapshot

    def recovered(self) -> RecoveredState:
        return RecoveredState(self.hard_state, self.snapshot, tuple(self.entries))


def encode_state(applied: list[tuple[int, bytes]]) -> bytes:
    return json.dumps([[i, d.decode("latin-1")] for i, d in applied]).encode()


def decode_state(data: bytes) -> list[tuple[int, bytes]]:
    return [(i, d.encode("latin-1")) for i, d in json.loads(data.decode())]


@dataclass
class NetworkOptions:
    heartbeat_ticks: int = 1
    max_heartbeat_leak: int = 3
    election_jitter_ticks: int = 3
    pre_vote: bool = True
    check_quorum: bool = True
    max_entries_per_message: int = 64
    max_inflight_messages: int = 256
    max_uncommitted_entries: int = 10_000


class RaftNetwork:
    def __init__(self, ids: tuple[NodeId, ...], seed: int = 0,
                 options: NetworkOptions | None = None,
                 apply: Callable[[NodeId, Entry], None] | None = None,
                 on_ready: Callable[[NodeId, Ready], None] | None = None) -> None:
        self.ids = ids
        self.seed = seed
        self.options = options or NetworkOptions()
        self.apply_hook = apply
        self.on_ready = on_ready  # sees each Ready before it is persisted
        self.storages: dict[NodeId, MemoryStorage] = {i: MemoryStorage() for i in ids}
        self.nodes: dict[NodeId, RaftNode | None] = {}
        self.applied: dict[NodeId, list[tuple[int, bytes]]] = {}
        self.in_flight: list[Message] = []
        self.blocked: set[tuple[NodeId, NodeId]] = set()
        self.restarts: dict[NodeId, int] = {i: 0 for i in ids}
        for node_id in ids:
            self.restart(node_id)

    # --------------------------------------------------------------- nodes
    def config(self, node_id: NodeId) -> RaftConfig:
        o = self.options
        return RaftConfig(node_id=node_id, peers=self.ids, heartbeat_ticks=o.heartbeat_ticks,
                          max_heartbeat_leak=o.max_heartbeat_leak,
                          election_jitter_ticks=o.election_jitter_ticks, pre_vote=o.pre_vote,
                          check_quorum=o.check_quorum,
                          max_entries_per_message=o.max_entries_per_message,
                          max_inflight_messages=o.max_inflight_messages,
                          max_uncommitted_entries=o.max_uncommitted_entries)

    def node(self, node_id: NodeId) -> RaftNode:
        node = self.nodes[node_id]
        assert node is not None, f"node {node_id} is down"
        return node

    def up(self) -> list[NodeId]:
        return [i for i in self.ids if self.nodes[i] is not None]

    def crash(self, node_id: NodeId) -> None:
        """Lose everything not persisted, and every message to the node still in flight."""
        self.nodes[node_id] = None
        self.applied[node_id] = []
        self.in_flight = [m for m in self.in_flight if m.dst != node_id]

    def restart(self, node_id: NodeId) -> None:
        rng = random.Random(self.seed * 1_000_003 + node_id * 7919 + self.restarts[node_id])
        self.restarts[node_id] += 1
        recovered = self.storages[node_id].recovered()
        self.nodes[node_id] = RaftNode(self.config(node_id), rng, recovered)
        self.applied[node_id] = []

    # --------------------------------------------------------------- links
    def drop(self, src: NodeId, dst: NodeId) -> None:
        self.blocked.add((src, dst))

    def cut(self, a: NodeId, b: NodeId) -> None:
        self.blocked |= {(a, b), (b, a)}

    def isolate(self, node_id: NodeId) -> None:
        for other in self.ids:
            if other != node_id:
                self.cut(node_id, other)

    def heal(self) -> None:
        self.blocked.clear()

    def partition(self, *groups: tuple[NodeId, ...]) -> None:
        self.heal()
        for group in groups:
            for a in group:
                for b in self.ids:
                    if b not in group:
                        self.drop(a, b)

    # --------------------------------------------------------------- driving
    def process(self, node_id: NodeId) -> list[Message]:
        """Drive one node's Ready loop until it has nothing to do; returns what it sent."""
        node = self.nodes[node_id]
        sent: list[Message] = []
        while node is not None and node.has_ready():
            ready = node.ready()
            if self.on_ready is not None:
                self.on_ready(node_id, ready)
            self.storages[node_id].save(ready)
            for message in ready.messages:
                if (message.src, message.dst) not in self.blocked:
                    self.in_flight.append(message)
                    sent.append(message)
            self._apply(node_id, ready)
            node.advance(ready)
        return sent

    def _apply(self, node_id: NodeId, ready: Ready) -> None:
        applied = self.applied[node_id]
        if ready.snapshot is not None:
            applied[:] = decode_state(ready.snapshot.data) if ready.snapshot.data else []
        for entry in ready.committed_entries:
            if entry.data:
                applied.append((entry.index, entry.data))
            if self.apply_hook is not None:
                self.apply_hook(node_id, entry)

    def process_all(self) -> list[Message]:
        sent: list[Message] = []
        for node_id in self.ids:
            sent.extend(self.process(node_id))
        return sent

    def deliver_one(self, message: Message) -> None:
        node = self.nodes[message.dst]
        if node is not None and (message.src, message.dst) not in self.blocked:
            node.step(message)

    def deliver(self) -> list[Message]:
        """Deliver every message in flight (not those they cause); returns them."""
        batch, self.in_flight = self.in_flight, []
        for message in batch:
            self.deliver_one(message)
        return batch

    def stabilize(self, max_rounds: int = 100) -> list[Message]:
        """Process and deliver until nothing moves."""
        delivered: list[Message] = []
        for _ in range(max_rounds):
            self.process_all()
            if not self.in_flight:
                return delivered
            delivered.extend(self.deliver())
        raise AssertionError("network did not stabilize")

    def tick(self, node_id: NodeId, times: int = 1) -> None:
        for _ in range(times):
            node = self.nodes[node_id]
            if node is not None:
                node.tick()

    def tick_all(self, times: int = 1) -> None:
        for _ in range(times):
            for node_id in self.up():
                self.node(node_id).tick()

    def run(self, ticks: int) -> None:
        """Tick everyone and stabilize after each tick: a well-behaved, fast network."""
        for _ in range(ticks):
            self.tick_all()
            self.stabilize()

    def elect(self, node_id: NodeId) -> None:
        self.node(node_id).campaign()
        self.stabilize()
        assert self.node(node_id).leader_id == node_id, f"{node_id} did not win"

    def leaders(self) -> list[NodeId]:
        return [i for i in self.up() if self.node(i).role is Role.LEADER]

    def compact(self, node_id: NodeId) -> None:
        node = self.node(node_id)
        node.compact(node.applied_index, encode_state(self.applied[node_id]))
