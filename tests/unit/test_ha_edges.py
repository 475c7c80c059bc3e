"""The replication edge: peers' frames and the replication config keys are validated before
the cores see them; a stream for an unknown broker or without a handshake is refused."""
from __future__ import annotations

import asyncio

import grpc
import pytest
from hypothesis import given, strategies as st

from container.config import BrokerEntry, ContainerConfig
from container.hosted_broker import bind_broker
from ha.replication.messages import MasterHandshake, QueueSlice, SlaveAck, SlaveHandshake, TransferBatch
from metadata.config import ConfigError
from proto import ha_pb2 as pb
from proto import ha_pb2_grpc as pb_grpc
from services.ha.converters import (BROKER_METADATA_KEY, batch_to_proto, master_frame_from_proto,
                                    master_handshake_to_proto, slave_frame_from_proto, slave_frame_to_proto)
from services.ha.service import add_ha_service

offsets = st.integers(-(2**62), 2**62)


@given(offsets, offsets, offsets, offsets, st.binary(max_size=64))
def test_batches_round_trip_or_are_refused(start, epoch_start, confirm, epoch, payload):
    epoch = max(-(2**31), min(2**31 - 1, epoch))
    frame = pb.MasterFrame(batch=pb.TransferBatch(start_offset=start, epoch=epoch, epoch_start_offset=epoch_start,
                                                   confirm_offset=confirm, payload=payload))
    decoded = master_frame_from_proto(pb.MasterFrame.FromString(frame.SerializeToString()))
    valid = min(start, epoch, epoch_start, confirm) >= 0 and epoch_start <= start
    assert (decoded is not None) == valid
    if valid:
        assert decoded == TransferBatch(start, epoch, epoch_start, confirm, payload)
        assert master_frame_from_proto(batch_to_proto(decoded)) == decoded


@given(st.lists(st.tuples(st.text(max_size=4), st.integers(-3, 3), st.integers(-3, 3), st.binary(max_size=45)),
                max_size=3), st.integers(0, 2**32 - 1))
def test_index_slices_round_trip_or_are_refused(slices, crc):
    frame = pb.MasterFrame(batch=pb.TransferBatch(start_offset=10, epoch=1, epoch_start_offset=0, payload=b"x",
                                                   crc=crc, index=[pb.QueueEntries(topic=t, queue_id=q,
                                                                                   first_queue_offset=f, entries=e)
                                                                   for t, q, f, e in slices]))
    decoded = master_frame_from_proto(pb.MasterFrame.FromString(frame.SerializeToString()))
    valid = all(t and q >= 0 and f >= 0 and len(e) % 20 == 0 for t, q, f, e in slices)
    assert (decoded is not None) == valid
    if valid:
        assert decoded.index == tuple(QueueSlice(*piece) for piece in slices) and decoded.crc == crc
        assert master_frame_from_proto(batch_to_proto(decoded)) == decoded


@given(st.lists(st.tuples(st.integers(-5, 5), st.integers(-5, 5)), max_size=4), offsets, offsets)
def test_master_handshakes_with_a_negative_value_are_refused(epochs, max_offset, min_offset):
    frame = master_handshake_to_proto(MasterHandshake(tuple(epochs), max_offset, min_offset, 0))
    decoded = master_frame_from_proto(frame)
    negative = min([max_offset, min_offset] + [v for pair in epochs for v in pair]) < 0
    assert (decoded is None) == negative


@given(st.binary(max_size=80))
def test_garbage_frames_never_crash_the_edge(data):
    for message, decode in ((pb.SlaveFrame, slave_frame_from_proto), (pb.MasterFrame, master_frame_from_proto)):
        try:
            frame = message.FromString(data)
        except Exception:  # not protobuf at all: grpc refuses it before us
            continue
        decode(frame)


def test_slave_frames():
    assert slave_frame_from_proto(slave_frame_to_proto(SlaveHandshake(2, True, False))) == SlaveHandshake(2, True, False)
    assert slave_frame_from_proto(slave_frame_to_proto(SlaveAck(7))) == SlaveAck(7)
    assert slave_frame_from_proto(pb.SlaveFrame(handshake=pb.SlaveHandshake(slave_id=0))) is None
    assert slave_frame_from_proto(pb.SlaveFrame(ack=pb.SlaveAck(max_offset=-1))) is None
    assert slave_frame_from_proto(pb.SlaveFrame()) is None


@pytest.mark.parametrize("key, value, reason", [
    ("haMasterAddress", "nohost", "host:port"),
    ("haMasterAddress", "127.0.0.1:99999", "host:port"),
    ("inSyncReplicas", "3", "exceeds totalReplicas"),
    ("brokerRole", "LEADER", "brokerRole"),
    ("haTransferBatchSize", "0", "haTransferBatchSize"),
])
def test_bad_replication_keys_name_the_file_and_key(tmp_path, key, value, reason):
    values = {"brokerName": "broker-a", "brokerId": "1", "brokerRole": "SLAVE", key: value}
    with pytest.raises(ConfigError) as failure:
        bind_broker(BrokerEntry(values, "c.toml [[broker]] 1"), ContainerConfig(store_path_root_dir=tmp_path))
    assert "c.toml" in str(failure.value) and reason in str(failure.value)


def test_streams_for_no_master_or_without_a_handshake_are_refused():
    async def scenario():
        server = grpc.aio.server()
        add_ha_service(server, lambda name: None)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                call = pb_grpc.HaServiceStub(channel).Replicate(metadata=((BROKER_METADATA_KEY, "broker-x"),))
                try:
                    await call.write(slave_frame_to_proto(SlaveHandshake(1)))
                except grpc.aio.AioRpcError:
                    pass  # the server may have refused the stream before the write
                assert await call.code() is grpc.StatusCode.NOT_FOUND
                assert "BROKER_NOT_MASTER" in await call.details()
        finally:
            await server.stop(0)
    asyncio.run(scenario())
