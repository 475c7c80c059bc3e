"""The cluster credential on real connections, in one process: internal gRPC calls and the
replication link are served with the right secret, refused without it or with another."""
from __future__ import annotations

import asyncio
import logging
import socket

import grpc
import pytest

from metadata.cluster_auth import ClusterSecret
from proto import ha_pb2 as pb
from proto import ha_pb2_grpc as pb_grpc
from services import cluster_auth
from services.cluster_auth import ClusterCredential, internal_channel, internal_sync_channel, server_interceptors
from services.ha.link_auth import LinkAuthenticationError, prove_to_master
from services.ha.service import add_ha_service
from services.ha.wire import Link
from services.metrics import REGISTRY
from tests.integration.test_ha_drivers import Group, log_bytes, put

pytestmark = pytest.mark.integration
SECRET = ClusterSecret(b"right-cluster-secret-0001")
WRONG = ClusterSecret(b"wrong-cluster-secret-0002")


@pytest.fixture
def installed_secret():
    """This test process is a cluster member holding SECRET (as a container after its start)."""
    cluster_auth.install(ClusterCredential(SECRET))
    yield
    cluster_auth.install(None)


# -- internal gRPC --------------------------------------------------------------------------

def _echo_handlers() -> grpc.GenericRpcHandler:
    async def unary(request, context):
        return request

    async def unary_stream(request, context):
        yield request

    async def stream_unary(requests, context):
        return b"".join([r async for r in requests])

    async def stream_stream(requests, context):
        async for request in requests:
            yield request

    return grpc.method_handlers_generic_handler("test.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "UnaryStream": grpc.unary_stream_rpc_method_handler(unary_stream),
        "StreamUnary": grpc.stream_unary_rpc_method_handler(stream_unary),
        "StreamStream": grpc.stream_stream_rpc_method_handler(stream_stream)})


async def _calls(channel: grpc.aio.Channel) -> list:
    """Each kind of call once: its answer, or its error's code."""
    async def one(kind):
        try:
            if kind == "Unary":
                return await channel.unary_unary("/test.Echo/Unary")(b"x", timeout=5)
            if kind == "UnaryStream":
                return [r async for r in channel.unary_stream("/test.Echo/UnaryStream")(b"x", timeout=5)]
            if kind == "StreamUnary":
                return await channel.stream_unary("/test.Echo/StreamUnary")(iter([b"x", b"y"]), timeout=5)
            return [r async for r in channel.stream_stream("/test.Echo/StreamStream")(iter([b"x"]), timeout=5)]
        except grpc.aio.AioRpcError as failure:
            return failure.code()
    return [await one(kind) for kind in ("Unary", "UnaryStream", "StreamUnary", "StreamStream")]


def _refusals(service: str, reason: str) -> float:
    return REGISTRY.get_sample_value("relaymq_cluster_auth_refused_total", {"service": service, "reason": reason}) or 0.0


def test_an_internal_call_is_served_with_the_secret_and_refused_without_or_with_another(caplog):
    asyncio.run(_internal_calls(caplog))


async def _internal_calls(caplog):
    server = grpc.aio.server(interceptors=server_interceptors(credential=ClusterCredential(SECRET)))
    server.add_generic_rpc_handlers([_echo_handlers()])
    add_ha_service(server, lambda name: None, lambda: 1)
    address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    await server.start()
    refused = [grpc.StatusCode.UNAUTHENTICATED] * 4
    before = _refusals("test.Echo", "MISSING")
    try:
        with caplog.at_level(logging.WARNING, logger="services.cluster_auth"):
            async with grpc.aio.insecure_channel(address) as plain:
                assert await _calls(plain) == refused
            async with internal_channel(address, credential=ClusterCredential(WRONG)) as wrong:
                assert await _calls(wrong) == refused
                with pytest.raises(grpc.aio.AioRpcError) as locate:
                    await pb_grpc.HaServiceStub(wrong).Locate(pb.LocateRequest(broker_name="broker-a"), timeout=5)
                assert locate.value.code() == grpc.StatusCode.UNAUTHENTICATED
                assert "BAD_SIGNATURE" in locate.value.details()
            async with internal_channel(address, credential=ClusterCredential(SECRET)) as right:
                assert await _calls(right) == [b"x", [b"x"], b"xy", [b"x"]]
                with pytest.raises(grpc.aio.AioRpcError) as locate:  # served: this server hosts no master
                    await pb_grpc.HaServiceStub(right).Locate(pb.LocateRequest(broker_name="broker-a"), timeout=5)
                assert locate.value.code() == grpc.StatusCode.NOT_FOUND
            for secret, expected in ((SECRET, b"x"), (WRONG, grpc.StatusCode.UNAUTHENTICATED)):  # blocking channels
                assert await asyncio.to_thread(_sync_call, address, secret) == expected
        assert _refusals("test.Echo", "MISSING") == before + 4  # every refusal counted, not only the logged ones
        lines = [r.getMessage() for r in caplog.records if "cluster authentication: refused" in r.getMessage()]
        # one line per (peer host, service) per interval: test.Echo without a proof, then HaService's
        assert len(lines) == 2, lines
        assert "/test.Echo/Unary from ipv4:127.0.0.1:" in lines[0] and "MISSING" in lines[0]
        assert "HaService/Locate" in lines[1] and "BAD_SIGNATURE" in lines[1]
    finally:
        await server.stop(0)


def _sync_call(address: str, secret: ClusterSecret):
    channel = internal_sync_channel(address, credential=ClusterCredential(secret))
    try:
        return channel.unary_unary("/test.Echo/Unary")(b"x", timeout=5)
    except grpc.RpcError as failure:
        return failure.code()
    finally:
        channel.close()


# -- the replication link -------------------------------------------------------------------

def test_a_replication_connection_with_a_wrong_secret_is_refused_while_the_slave_keeps_replicating(
        tmp_path, installed_secret, caplog):
    asyncio.run(_intruders(tmp_path, caplog))


async def _connect(port: int) -> Link:
    loop = asyncio.get_running_loop()
    sock = await loop.run_in_executor(None, socket.create_connection, ("127.0.0.1", port), 5)
    return Link(sock)


async def _intruders(tmp_path, caplog):
    group = Group(tmp_path)
    await group.start()
    try:
        async with asyncio.timeout(10):
            while not group.master.streams:  # the slave connected (and proved the secret)
                await asyncio.sleep(0.02)
        await put(group, 0, 50)
        await group.caught_up()
        with caplog.at_level(logging.WARNING, logger="services.cluster_auth"):
            wrong = await _connect(group.listener.port)  # another cluster's secret: each side refuses the other's proof
            await wrong.send_preamble()
            with pytest.raises(LinkAuthenticationError, match="another cluster secret"):
                await prove_to_master(wrong, WRONG)
            await wrong.aclose()
            bare = await _connect(group.listener.port)  # no secret at all: a slave handshake straight away
            await bare.send_preamble()
            await bare.send(b"\x0a\x08broker-a")
            assert await asyncio.wait_for(bare.receive(), 5) is None  # closed, nothing said
            await bare.aclose()
            await put(group, 50, 50)  # the real slave, authenticated, still acknowledges every put
            await group.caught_up()
        assert log_bytes(group.slave_store) == log_bytes(group.master_store)
        assert len(group.master.status()["slaves"]) == 1
        lines = [r.getMessage() for r in caplog.records if "cluster authentication: refused" in r.getMessage()]
        assert len(lines) == 1 and "replication link" in lines[0] and "BAD_SIGNATURE" in lines[0], lines
    finally:
        await group.stop()
