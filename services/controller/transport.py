"""Raft messages between controller peers over gRPC (service ``RaftTransport``).

Rules:
- Fire-and-forget: ``send`` never blocks the Raft loop.  Each peer has one bounded queue
  (``controllerPeerQueueCapacity``) and one sender task that ships batches; when the queue
  is full the oldest message is dropped, and a failed call drops its batch (Raft
  retransmits what matters).
- Incoming messages are validated here (kinds, the group name, the destination) and bad
  ones are dropped with a log line: a peer's bad input never reaches the core as an error.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

import grpc

from ha.raft.types import Entry, Message, MessageKind, Snapshot, VoteRejection
from proto import controller_pb2 as pb
from proto import controller_pb2_grpc as pb_grpc
from services.controller.shutdown import cancel_and_wait
from services.cluster_auth import internal_channel

log = logging.getLogger(__name__)
BATCH_MAX = 64
SEND_TIMEOUT_S = 1.0
# a restarted peer must be reachable again within a heartbeat or two, not after gRPC's
# default reconnect backoff (up to 120 s), during which every batch would be dropped
CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 1000)]


def message_to_proto(message: Message, group: str) -> pb.RaftMessage:
    out = pb.RaftMessage(kind=message.kind.value, src=message.src, dst=message.dst, term=message.term,
                         log_term=message.log_term, index=message.index, commit=message.commit,
                         reject=message.reject, hint=message.hint, hint_term=message.hint_term, group=group,
                         reject_reason=message.reject_reason.value if message.reject_reason else 0,
                         entries=[pb.RaftEntry(term=e.term, index=e.index, data=e.data) for e in message.entries])
    if message.snapshot is not None:
        s = message.snapshot
        out.snapshot.CopyFrom(pb.RaftSnapshot(index=s.index, term=s.term, data=s.data, peers=list(s.peers)))
    return out


def message_from_proto(raw: pb.RaftMessage) -> Message:
    """Raises ValueError for a message no honest peer sends."""
    snapshot = None
    if raw.HasField("snapshot"):
        s = raw.snapshot
        snapshot = Snapshot(s.index, s.term, s.data, tuple(s.peers))
    return Message(kind=MessageKind(raw.kind), src=raw.src, dst=raw.dst, term=raw.term, log_term=raw.log_term,
                   index=raw.index, entries=tuple(Entry(e.term, e.index, e.data) for e in raw.entries),
                   commit=raw.commit, reject=raw.reject,
                   reject_reason=VoteRejection(raw.reject_reason) if raw.reject_reason else None,
                   hint=raw.hint, hint_term=raw.hint_term, snapshot=snapshot)


class PeerSender:
    def __init__(self, address: str, group: str, capacity: int) -> None:
        self.address = address
        self.group = group
        self._queue: asyncio.Queue = asyncio.Queue(maxsize=capacity)
        self._channel = internal_channel(address, options=CHANNEL_OPTIONS)
        self._stub = pb_grpc.RaftTransportStub(self._channel)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"raft-send-{address}")
        self.dropped = 0

    def enqueue(self, message: Message) -> None:
        if self._queue.full():
            self._queue.get_nowait()
            self.dropped += 1
        self._queue.put_nowait(message)

    async def _run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < BATCH_MAX and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self._stub.Send(pb.RaftBatch(messages=[message_to_proto(m, self.group) for m in batch]),
                                      timeout=SEND_TIMEOUT_S)
            except grpc.aio.AioRpcError as exc:
                self.dropped += len(batch)
                log.debug("raft send to %s failed: %s", self.address, exc.code())

    async def close(self) -> None:
        try:
            await cancel_and_wait([self._task])
        finally:
            await self._channel.close()


class RaftPeers:
    """One ``PeerSender`` per other member; ``send`` routes a Ready's messages."""

    def __init__(self, addresses: dict[int, str], group: str, capacity: int) -> None:
        self._senders = {node_id: PeerSender(address, group, capacity) for node_id, address in addresses.items()}

    def send(self, messages: tuple[Message, ...]) -> None:
        for message in messages:
            sender = self._senders.get(message.dst)
            if sender is not None:
                sender.enqueue(message)

    async def close(self) -> None:
        """Close every sender, even when the caller is cancelled while one closes."""
        cancelled = False
        for sender in self._senders.values():
            try:
                await sender.close()
            except asyncio.CancelledError:
                cancelled = True
        if cancelled:
            raise asyncio.CancelledError


class RaftTransportServicer(pb_grpc.RaftTransportServicer):
    def __init__(self, group: str, self_id: int, members: set[int], deliver: Callable[[Message], None]) -> None:
        self._group, self._self_id, self._members, self._deliver = group, self_id, members, deliver

    async def Send(self, request: pb.RaftBatch, context) -> pb.RaftAck:
        for raw in request.messages:
            if raw.group != self._group or raw.dst != self._self_id or raw.src not in self._members:
                log.warning("dropping raft message for group %r dst %s from %s", raw.group, raw.dst, raw.src)
                continue
            try:
                message = message_from_proto(raw)
            except ValueError as exc:
                log.warning("dropping malformed raft message from %s: %s", raw.src, exc)
                continue
            self._deliver(message)
        return pb.RaftAck()
