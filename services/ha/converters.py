"""ha.proto frames <-> the replication cores' values, validated at this edge.

Rules: a peer's frame that does not parse, with a negative offset or epoch, an unknown body,
a body on a frame other than a batch, a batch whose epoch starts after the batch, or an
index slice without a topic, with a negative queue id or offset, or with entries that are
not whole 20-byte entries, is bad input: :func:`decode_slave_frame` and
:func:`decode_master_frame` return None, and the driver closes the connection with a log
line; the cores never see it.  A batch's payload is the frame's body (services/ha/wire.py),
not a header field: it is never copied into or out of a protobuf message.
"""
from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import DecodeError

from ha.replication.messages import MasterHandshake, QueueSlice, SlaveAck, SlaveHandshake, TransferBatch
from proto import ha_pb2 as pb
from store.config import CQ_ENTRY_SIZE

MAX_FRAME_BYTES = 64 * 1024 * 1024   # the internal gRPC endpoint's message limit (admin, metadata sync)


@dataclass(frozen=True)
class Refused:
    """The master's answer to a handshake it cannot serve (the connection then closes)."""

    reason: str


def slave_frame_to_proto(message: SlaveHandshake | SlaveAck, broker_name: str = "") -> pb.SlaveFrame:
    """``broker_name``: the group whose master a handshake asks for."""
    if isinstance(message, SlaveHandshake):
        return pb.SlaveFrame(handshake=pb.SlaveHandshake(slave_id=message.slave_id,
                                                         sync_from_last_file=message.sync_from_last_file,
                                                         async_learner=message.async_learner,
                                                         broker_name=broker_name))
    return pb.SlaveFrame(ack=pb.SlaveAck(max_offset=message.max_offset))


def decode_slave_frame(header: bytes, body: bytes) -> tuple[str, SlaveHandshake | SlaveAck] | None:
    """(broker name of a handshake, else "", the message), or None for bad input."""
    try:
        frame = pb.SlaveFrame.FromString(header)
    except DecodeError:
        return None
    message = slave_frame_from_proto(frame)
    if message is None or body:
        return None
    return frame.handshake.broker_name, message


def slave_frame_from_proto(frame: pb.SlaveFrame) -> SlaveHandshake | SlaveAck | None:
    body = frame.WhichOneof("body")
    if body == "handshake":
        h = frame.handshake
        return SlaveHandshake(h.slave_id, h.sync_from_last_file, h.async_learner) if h.slave_id > 0 else None
    if body == "ack":
        return SlaveAck(frame.ack.max_offset) if frame.ack.max_offset >= 0 else None
    return None


def master_handshake_to_proto(message: MasterHandshake) -> pb.MasterFrame:
    return pb.MasterFrame(handshake=pb.MasterHandshake(
        epochs=[pb.EpochEntry(epoch=e, start_offset=s) for e, s in message.epochs],
        max_offset=message.max_offset, min_offset=message.min_offset, last_file_start=message.last_file_start))


def refusal_to_proto(reason: str) -> pb.MasterFrame:
    return pb.MasterFrame(refusal=pb.Refusal(reason=reason))


def batch_to_proto(batch: TransferBatch) -> pb.MasterFrame:
    """The batch's header: everything but the payload, which travels as the frame's body."""
    # filled in place: MasterFrame(batch=pb.TransferBatch(...)) would copy the sub-message
    frame = pb.MasterFrame()
    out = frame.batch
    out.start_offset, out.epoch, out.epoch_start_offset = batch.start_offset, batch.epoch, batch.epoch_start_offset
    out.confirm_offset, out.crc, out.metadata_version = batch.confirm_offset, batch.crc, batch.metadata_version
    for q in batch.index:
        out.index.add(topic=q.topic, queue_id=q.queue_id, first_queue_offset=q.first_queue_offset, entries=q.entries)
    return frame


def _slice_from_proto(q: pb.QueueEntries) -> QueueSlice | None:
    if not q.topic or q.queue_id < 0 or q.first_queue_offset < 0 or len(q.entries) % CQ_ENTRY_SIZE:
        return None
    return QueueSlice(q.topic, q.queue_id, q.first_queue_offset, q.entries)


def decode_master_frame(header: bytes, body: bytes) -> MasterHandshake | TransferBatch | Refused | None:
    try:
        frame = pb.MasterFrame.FromString(header)
    except DecodeError:
        return None
    return master_frame_from_proto(frame, body)


def master_frame_from_proto(frame: pb.MasterFrame, payload: bytes = b"") -> MasterHandshake | TransferBatch | Refused | None:
    body = frame.WhichOneof("body")
    if body != "batch" and payload:
        return None
    if body == "refusal":
        return Refused(frame.refusal.reason or "refused")
    if body == "handshake":
        h = frame.handshake
        epochs = tuple((e.epoch, e.start_offset) for e in h.epochs)
        if min([h.max_offset, h.min_offset, h.last_file_start] + [v for pair in epochs for v in pair]) < 0:
            return None
        return MasterHandshake(epochs, h.max_offset, h.min_offset, h.last_file_start)
    if body == "batch":
        b = frame.batch
        if min(b.start_offset, b.epoch, b.epoch_start_offset, b.confirm_offset) < 0:
            return None
        if b.epoch_start_offset > b.start_offset:
            return None
        index = tuple(_slice_from_proto(q) for q in b.index)
        if None in index:
            return None
        return TransferBatch(b.start_offset, b.epoch, b.epoch_start_offset, b.confirm_offset, payload,
                             b.crc, index, b.metadata_version)
    return None


def queue_offset_total(store) -> int:
    """Sum of every consume queue's max offset: the difference between two replicas is their lag in messages."""
    return sum(store.max_offset(topic, queue_id) for topic, ids in store.queues().items() for queue_id in ids)
