"""The replication edge: peers' frames and the replication config keys are validated before
the cores see them; a connection for an unknown broker, without the preamble or without a
handshake is refused."""
from __future__ import annotations

import asyncio
import socket

import grpc
import pytest
from hypothesis import given, strategies as st

from container.config import BrokerEntry, ContainerConfig
from container.hosted_broker import bind_broker
from ha.replication.messages import MasterHandshake, QueueSlice, SlaveAck, SlaveHandshake, TransferBatch
from metadata.config import ConfigError
from proto import ha_pb2 as pb
from proto import ha_pb2_grpc as pb_grpc
from services.ha.converters import (Refused, batch_to_proto, decode_master_frame, decode_slave_frame,
                                    master_frame_from_proto, master_handshake_to_proto, refusal_to_proto,
                                    slave_frame_from_proto, slave_frame_to_proto)
from services.ha.service import HaListener, add_ha_service
from services.ha.wire import MAX_BODY_BYTES, MAX_HEADER_BYTES, PREAMBLE, PREFIX, WireError, frame_prefix, parse_prefix

offsets = st.integers(-(2**62), 2**62)


@given(offsets, offsets, offsets, offsets, st.binary(max_size=64))
def test_batches_round_trip_or_are_refused(start, epoch_start, confirm, epoch, payload):
    epoch = max(-(2**31), min(2**31 - 1, epoch))
    frame = pb.MasterFrame(batch=pb.TransferBatch(start_offset=start, epoch=epoch, epoch_start_offset=epoch_start,
                                                   confirm_offset=confirm))
    decoded = decode_master_frame(frame.SerializeToString(), payload)
    valid = min(start, epoch, epoch_start, confirm) >= 0 and epoch_start <= start
    assert (decoded is not None) == valid
    if valid:
        assert decoded == TransferBatch(start, epoch, epoch_start, confirm, payload)
        assert decode_master_frame(batch_to_proto(decoded).SerializeToString(), payload) == decoded


@given(st.lists(st.tuples(st.text(max_size=4), st.integers(-3, 3), st.integers(-3, 3), st.binary(max_size=45)),
                max_size=3), st.integers(0, 2**32 - 1))
def test_index_slices_round_trip_or_are_refused(slices, crc):
    frame = pb.MasterFrame(batch=pb.TransferBatch(start_offset=10, epoch=1, epoch_start_offset=0, crc=crc, index=[pb.QueueEntries(topic=t, queue_id=q,
                                                                                   first_queue_offset=f, entries=e)
                                                                   for t, q, f, e in slices]))
    decoded = decode_master_frame(frame.SerializeToString(), b"x")
    valid = all(t and q >= 0 and f >= 0 and len(e) % 20 == 0 for t, q, f, e in slices)
    assert (decoded is not None) == valid
    if valid:
        assert decoded.index == tuple(QueueSlice(*piece) for piece in slices) and decoded.crc == crc
        assert master_frame_from_proto(batch_to_proto(decoded), b"x") == decoded


@given(st.lists(st.tuples(st.integers(-5, 5), st.integers(-5, 5)), max_size=4), offsets, offsets)
def test_master_handshakes_with_a_negative_value_are_refused(epochs, max_offset, min_offset):
    frame = master_handshake_to_proto(MasterHandshake(tuple(epochs), max_offset, min_offset, 0))
    decoded = master_frame_from_proto(frame)
    negative = min([max_offset, min_offset] + [v for pair in epochs for v in pair]) < 0
    assert (decoded is None) == negative


@given(st.binary(max_size=80), st.binary(max_size=8))
def test_garbage_frames_never_crash_the_edge(header, body):
    for decoded in (decode_slave_frame(header, body), decode_master_frame(header, body)):
        assert decoded is None or not isinstance(decoded, Exception)


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_frame_prefixes_within_the_limits_round_trip_and_others_are_refused(header_size, body_size):
    prefix = frame_prefix(header_size, body_size)
    if header_size <= MAX_HEADER_BYTES and body_size <= MAX_BODY_BYTES:
        assert parse_prefix(prefix) == (header_size, body_size)
    else:
        with pytest.raises(WireError, match="at most"):
            parse_prefix(prefix)


@given(st.binary(max_size=12))
def test_short_prefixes_are_refused(data):
    if len(data) == PREFIX.size:
        return
    with pytest.raises(WireError, match="prefix"):
        parse_prefix(data)


def test_only_batches_carry_a_body_and_a_refusal_keeps_its_reason():
    handshake = master_handshake_to_proto(MasterHandshake(((1, 0),), 10, 0, 0)).SerializeToString()
    assert isinstance(decode_master_frame(handshake, b""), MasterHandshake)
    assert decode_master_frame(handshake, b"x") is None
    assert decode_master_frame(refusal_to_proto("BROKER_NOT_MASTER: x").SerializeToString(), b"") == \
        Refused("BROKER_NOT_MASTER: x")
    ack = slave_frame_to_proto(SlaveAck(3)).SerializeToString()
    assert decode_slave_frame(ack, b"") == ("", SlaveAck(3))
    assert decode_slave_frame(ack, b"x") is None
    hello = slave_frame_to_proto(SlaveHandshake(2), "broker-a").SerializeToString()
    assert decode_slave_frame(hello, b"") == ("broker-a", SlaveHandshake(2))


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


def frame(message) -> bytes:
    header = message.SerializeToString()
    return frame_prefix(len(header), 0) + header


def read_frame(sock: socket.socket):
    prefix = sock.recv(PREFIX.size, socket.MSG_WAITALL)
    if not prefix:
        return None
    header_size, body_size = parse_prefix(prefix)
    return decode_master_frame(sock.recv(header_size, socket.MSG_WAITALL) if header_size else b"",
                               sock.recv(body_size, socket.MSG_WAITALL) if body_size else b"")


@pytest.mark.parametrize("sent, answer", [
    (PREAMBLE + frame(slave_frame_to_proto(SlaveHandshake(1), "broker-x")), "BROKER_NOT_MASTER"),
    (PREAMBLE + frame(slave_frame_to_proto(SlaveAck(0))), None),                      # no handshake first
    (PREAMBLE + frame(slave_frame_to_proto(SlaveHandshake(1))), None),                # no broker name
    (b"GET / HTTP/1.1\r\n\r\n", None),                                               # not a replication peer
    (PREAMBLE + frame_prefix(MAX_HEADER_BYTES + 1, 0), None),                         # oversized header
    (PREAMBLE + frame_prefix(3, 0) + b"\xff\xff\xff", None),                          # header not protobuf
])
def test_connections_for_no_master_or_without_a_handshake_are_refused(sent, answer):
    async def scenario():
        listener = HaListener(lambda name: None)
        port = listener.bind("127.0.0.1", 0)
        listener.start()
        try:
            def talk():
                with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                    sock.sendall(sent)
                    return read_frame(sock)
            got = await asyncio.get_running_loop().run_in_executor(None, talk)
            if answer is None:
                assert got is None  # closed without a word
            else:
                assert isinstance(got, Refused) and answer in got.reason
        finally:
            await listener.stop()
    asyncio.run(scenario())


def test_locate_names_no_port_for_a_broker_this_container_does_not_master():
    async def scenario():
        server = grpc.aio.server()
        add_ha_service(server, lambda name: object() if name == "broker-a" else None, lambda: 12345)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = pb_grpc.HaServiceStub(channel)
                assert (await stub.Locate(pb.LocateRequest(broker_name="broker-a"))).ha_port == 12345
                for name in ("broker-x", ""):
                    with pytest.raises(grpc.aio.AioRpcError) as failure:
                        await stub.Locate(pb.LocateRequest(broker_name=name))
                    assert failure.value.code() is grpc.StatusCode.NOT_FOUND
                    assert "BROKER_NOT_MASTER" in failure.value.details()
        finally:
            await server.stop(0)
    asyncio.run(scenario())
