"""The simulated network: ordered connections, one-way messages, delays, partitions.

Rules:

* Nodes are broker ids (1..n) and ``CONTROLLER`` (0).  A message is delivered after a
  random delay of 1..``max_delay`` steps; messages of one connection keep their order (TCP).
* A partition is a set of blocked (src, dst) pairs.  A connection that loses a message to a
  partition is dead from then on, silently: TCP never loses a message without the
  connection ending, and neither side is told (they find out by their silence checks).
* A process that dies closes its connections: the peer is told (``Closed``) after a delay,
  unless the partition swallows the reset too.
* A paused process receives nothing until it resumes (its socket buffers hold the bytes).
* Deterministic: one seeded ``random.Random``; delivery order is (step, sequence).
"""
from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

CONTROLLER = 0


@dataclass(frozen=True)
class Closed:
    """The connection ``connection`` ended (the peer's process died or closed it)."""
    connection: int


@dataclass(order=True)
class _Queued:
    at: int
    sequence: int
    src: int
    dst: int
    connection: int
    payload: object


class SimNetwork:
    def __init__(self, rng: random.Random, max_delay: int = 3, rpc_loss: float = 0.01):
        self.rng = rng
        self.max_delay = max_delay
        self.rpc_loss = rpc_loss
        self.step = 0
        self.blocked: set[tuple[int, int]] = set()
        self.dead: set[int] = set()          # connections that lost a message or were closed
        self.paused: set[int] = set()
        self._queue: list[_Queued] = []
        self._sequence = 0
        self._last_at: dict[int, int] = {}   # connection -> last delivery step (ordering)
        self._next_connection = 1

    def connect(self) -> int:
        connection, self._next_connection = self._next_connection, self._next_connection + 1
        return connection

    def send(self, src: int, dst: int, payload: object, connection: int = 0) -> None:
        """``connection`` 0: a datagram-like RPC message (may be lost, never kills anything)."""
        if connection and connection in self.dead:
            return
        if (src, dst) in self.blocked:
            if connection:
                self.dead.add(connection)
            return
        if not connection and self.rng.random() < self.rpc_loss:
            return
        at = self.step + self.rng.randint(1, self.max_delay)
        if connection:
            at = max(at, self._last_at.get(connection, 0))
            self._last_at[connection] = at
        self._sequence += 1
        heapq.heappush(self._queue, _Queued(at, self._sequence, src, dst, connection, payload))

    def close(self, src: int, dst: int, connection: int) -> None:
        """``src`` ends ``connection``: ``dst`` hears of it unless the link is cut."""
        if connection in self.dead:
            return
        self.send(src, dst, Closed(connection), connection)
        self.dead.add(connection)

    def due(self) -> list[tuple[int, int, int, object]]:
        """(src, dst, connection, payload) of every message due now, in order."""
        out, held = [], []
        while self._queue and self._queue[0].at <= self.step:
            item = heapq.heappop(self._queue)
            if item.dst in self.paused:
                held.append(item)
                continue
            if (item.src, item.dst) in self.blocked:
                if item.connection:
                    self.dead.add(item.connection)
                continue
            if item.connection and item.connection in self.dead and not isinstance(item.payload, Closed):
                continue
            out.append((item.src, item.dst, item.connection, item.payload))
        for item in held:
            item.at = self.step + 1
            heapq.heappush(self._queue, item)
        return out

    def drop_to(self, node: int) -> None:
        """``node`` died: what was on its way to it is gone."""
        self._queue = [q for q in self._queue if q.dst != node]
        heapq.heapify(self._queue)

    def isolate(self, node: int, nodes: tuple[int, ...]) -> None:
        for other in nodes:
            if other != node:
                self.blocked |= {(node, other), (other, node)}

    def heal(self) -> None:
        self.blocked.clear()
