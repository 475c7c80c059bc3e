"""In-memory replication harness: a master and slaves as pure cores over droppable pipes.

Logs are ``FakeLog``s of length-prefixed records (whole records are read and appended like
``MessageStore.read_raw`` / ``append_raw``); the loop plays the drivers' part in the order
the cores prescribe (truncate, persist epochs, append, confirm, send).
"""
from __future__ import annotations

import dataclasses
import struct
from collections import deque
from dataclasses import dataclass, field

from ha.epochs import EpochHistory
from ha.replication.master import MasterCloseReason, MasterLogView, MasterSession, MasterSettings
from ha.replication.messages import MasterHandshake, QueueSlice, SlaveHandshake, TransferBatch
from ha.replication.slave import SlaveOutput, SlaveSession, SlaveState
from ha.replication.sync_state import SyncStateTracker
from ha.replication.transfer import BatchPlan


class FakeLog:
    def __init__(self, base: int = 0):
        self.base = base
        self.data = bytearray()

    @property
    def min_offset(self) -> int:
        return self.base

    @property
    def max_offset(self) -> int:
        return self.base + len(self.data)

    def put(self, body: bytes) -> int:
        self.data += struct.pack(">I", len(body)) + body
        return self.max_offset

    def fill_to(self, offset: int, tag: str) -> None:
        """Append tagged 50-byte records (the last one shorter) until the log ends at ``offset``."""
        while self.max_offset < offset:
            room = offset - self.max_offset
            size = 50 if room >= 54 or room == 50 else room
            assert size >= 4, room
            self.put(f"{tag}@{self.max_offset}".encode().ljust(size - 4, b".")[:size - 4])

    def read_raw(self, offset: int, max_bytes: int) -> bytes:
        position, end = offset - self.base, offset - self.base
        while end < len(self.data):
            size = 4 + struct.unpack_from(">I", self.data, end)[0]
            if end + size - position > max_bytes:
                break
            end += size
        return bytes(self.data[position:end])

    def append_raw(self, offset: int, data: bytes) -> None:
        assert offset == self.max_offset, (offset, self.max_offset)
        self.data += data

    def truncate(self, offset: int) -> None:
        assert self.base <= offset <= self.max_offset
        del self.data[offset - self.base:]

    def bytes_between(self, low: int, high: int) -> bytes:
        return bytes(self.data[low - self.base:high - self.base])


@dataclass
class MasterNode:
    log: FakeLog
    epochs: EpochHistory
    tracker: SyncStateTracker
    settings: MasterSettings = field(default_factory=MasterSettings)
    last_file_start: int = 0

    def view(self) -> MasterLogView:
        return MasterLogView(self.epochs, self.log.min_offset, self.log.max_offset, self.last_file_start,
                             self.tracker.confirm_offset)

    def begin_epoch(self, epoch: int) -> None:
        self.epochs = self.epochs.append(epoch, self.log.max_offset)


@dataclass
class SlaveNode:
    slave_id: int
    log: FakeLog
    session: SlaveSession
    persisted_epochs: EpochHistory
    confirm_history: list[int] = field(default_factory=list)
    truncations: list[int] = field(default_factory=list)

    def carry_out(self, out: SlaveOutput) -> list:
        """The driver's order: truncate, persist epochs, append, confirm, then send."""
        if out.truncate_to is not None:
            self.log.truncate(out.truncate_to)
            self.truncations.append(out.truncate_to)
        if out.epochs is not None:
            self.persisted_epochs = out.epochs
        if out.append is not None:
            if self.log.max_offset == self.log.min_offset == 0 and out.append.start_offset > 0:
                self.log.base = out.append.start_offset
            self.log.append_raw(out.append.start_offset, out.append.payload)
        if out.confirm_offset is not None:
            self.confirm_history.append(out.confirm_offset)
        return list(out.send)


class Link:
    """One connection: two directions, each a queue that can drop the next message."""

    def __init__(self):
        self.to_master: deque = deque()
        self.to_slave: deque = deque()
        self.drop_next_batch = 0
        self.corrupt_next_batch = ""  # "payload": flip a byte; "index": add an entry the CRC does not cover


class Cluster:
    def __init__(self, master: MasterNode, slaves: list[SlaveNode]):
        self.master = master
        self.slaves = {s.slave_id: s for s in slaves}
        self.links: dict[int, Link] = {}
        self.sessions: dict[int, MasterSession] = {}
        self.batches: list[TransferBatch] = []
        self.master_confirms: list[int] = []
        self.now_ms = 1000

    def connect(self, slave_id: int) -> None:
        slave = self.slaves[slave_id]
        self.links[slave_id] = Link()
        self.sessions[slave_id] = MasterSession(self.master.settings, self.now_ms)
        for message in slave.carry_out(slave.session.connected(self.now_ms)):
            self.links[slave_id].to_master.append(message)

    def disconnect(self, slave_id: int) -> None:
        self.links.pop(slave_id, None)
        self.sessions.pop(slave_id).connection_lost()
        self.master.tracker.slave_disconnected(slave_id)
        slave = self.slaves[slave_id]
        if slave.session.state is not SlaveState.READY:
            slave.session.connection_lost()

    def _to_master(self, slave_id: int, message) -> None:
        session, tracker, view = self.sessions[slave_id], self.master.tracker, self.master.view()
        if isinstance(message, SlaveHandshake):
            tracker.slave_connected(slave_id, message.async_learner)
            reply = session.on_handshake(message, view, self.now_ms)
        else:
            reply = session.on_ack(message, view, self.now_ms)
            if isinstance(reply, int):
                last = self.master.epochs.last
                tracker.on_ack(slave_id, reply, view.max_offset, last.start_offset if last else 0, self.now_ms)
                self.master_confirms.append(tracker.confirm_offset)
                reply = None
        if isinstance(reply, MasterCloseReason):
            self.disconnect(slave_id)
        elif reply is not None:
            self.links[slave_id].to_slave.append(reply)

    def _to_slave(self, slave_id: int, message) -> None:
        slave = self.slaves[slave_id]
        if isinstance(message, MasterHandshake):
            out = slave.session.on_master_handshake(message, self.now_ms)
        else:
            out = slave.session.on_batch(message, self.now_ms)
        for reply in slave.carry_out(out):
            self.links[slave_id].to_master.append(reply)
        if out.closed is not None:
            self.disconnect(slave_id)

    def _send_batches(self, slave_id: int) -> None:
        session = self.sessions[slave_id]
        plan = session.next_batch(self.master.view(), self.now_ms)
        if isinstance(plan, MasterCloseReason):
            self.disconnect(slave_id)
            return
        if isinstance(plan, BatchPlan):
            payload = self.master.log.read_raw(plan.start_offset, plan.max_bytes)
            batch = session.sent(plan, payload, self.master.tracker.confirm_offset, self.now_ms)
            self.master.tracker.on_transfer(slave_id, self.master.log.max_offset, self.now_ms)
            link = self.links[slave_id]
            if link.drop_next_batch:
                link.drop_next_batch -= 1
                return
            if link.corrupt_next_batch and batch.payload:
                if link.corrupt_next_batch == "payload":
                    flipped = bytes([batch.payload[0] ^ 1]) + batch.payload[1:]
                    batch = dataclasses.replace(batch, payload=flipped)
                else:
                    batch = dataclasses.replace(batch, index=(QueueSlice("T", 0, 0, bytes(20)),))
                link.corrupt_next_batch = ""
            self.batches.append(batch)
            link.to_slave.append(batch)

    def step(self) -> bool:
        """Deliver one message per direction per link and send one batch each; True if anything moved."""
        moved = False
        self.now_ms += 1
        for slave_id in list(self.links):
            for queue, handler in (("to_master", self._to_master), ("to_slave", self._to_slave)):
                link = self.links.get(slave_id)
                if link is not None and getattr(link, queue):
                    handler(slave_id, getattr(link, queue).popleft())
                    moved = True
            if slave_id in self.links:
                before = len(self.batches)
                self._send_batches(slave_id)
                moved = moved or (len(self.batches) > before and bool(self.batches[-1].payload))
        return moved

    def run(self, max_steps: int = 10_000) -> None:
        idle = 0
        for _ in range(max_steps):
            idle = 0 if self.step() else idle + 1
            if idle >= 3:
                return
        raise AssertionError("the cluster did not settle")
