"""Relay links (services.messaging.relay_link) between real replication listeners and clients on
loopback: calls multiplexed and answered by number, deadlines, cancels, a lost link, bad input at
the master's edge, and the cluster secret."""
from __future__ import annotations

import asyncio
import socket

import grpc
import pytest

from metadata.cluster_auth import ClusterSecret
from proto import ha_pb2 as pb
from services import cluster_auth
from services.cluster_auth import ClusterCredential
from services.ha.service import HaListener
from services.ha.wire import Link
from services.messaging.relay_link import RELAY_PREAMBLE, RelayFailed, RelayLinks

METHOD = "/apache.rocketmq.v2.MessagingService/SendMessage"


def run(coro):
    return asyncio.run(coro)


async def _listener(behaviours: dict) -> tuple[HaListener, str]:
    """A replication listener taking relay links; ``behaviours``: (broker, method) -> behaviour."""
    listener = HaListener(lambda name: None, lambda broker, method, streamed: behaviours.get((broker, method, streamed)))
    port = listener.bind("127.0.0.1", 0)
    listener.start()
    return listener, f"127.0.0.1:{port}"


def test_calls_are_answered_by_number_whatever_order_they_end_in():
    async def slow_first(raw: bytes, context) -> bytes:
        await asyncio.sleep(0.05 if raw == b"0" else 0)
        return b"re:" + raw

    async def scenario():
        listener, address = await _listener({("broker-a", METHOD, False): slow_first})
        links = RelayLinks()
        try:
            answers = await asyncio.gather(*(links.call(address, "broker-a", METHOD, str(i).encode(), (), 5)
                                             for i in range(20)))
            assert answers == [b"re:%d" % i for i in range(20)]
        finally:
            await links.close()
            await listener.stop()
    run(scenario())


def test_an_unknown_group_or_method_is_unimplemented_and_the_link_goes_on():
    async def echo(raw: bytes, context) -> bytes:
        return raw

    async def scenario():
        listener, address = await _listener({("broker-a", METHOD, False): echo})
        links = RelayLinks()
        try:
            with pytest.raises(RelayFailed) as failure:
                await links.call(address, "broker-z", METHOD, b"x", (), 5)
            assert failure.value.code is grpc.StatusCode.UNIMPLEMENTED and "broker-z" in failure.value.details
            assert await links.call(address, "broker-a", METHOD, b"y", (), 5) == b"y"
        finally:
            await links.close()
            await listener.stop()
    run(scenario())


def test_a_call_past_its_deadline_is_deadline_exceeded_and_a_cancel_stops_it_on_the_master():
    stopped = asyncio.Event

    async def scenario():
        cancelled, reached = stopped(), stopped()

        async def hang(raw: bytes, context) -> bytes:
            reached.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return raw

        listener, address = await _listener({("broker-a", METHOD, False): hang})
        links = RelayLinks()
        try:
            with pytest.raises(RelayFailed) as failure:
                await links.call(address, "broker-a", METHOD, b"x", (), 0.2)
            assert failure.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
            cancelled.clear()
            reached.clear()
            call = asyncio.ensure_future(links.call(address, "broker-a", METHOD, b"y", (), None))
            await asyncio.wait_for(reached.wait(), 5)   # the master's container is serving it
            call.cancel()
            await asyncio.wait_for(cancelled.wait(), 5)   # the master's container stopped serving it
        finally:
            await links.close()
            await listener.stop()
    run(scenario())


def test_a_lost_link_fails_its_calls_unavailable_and_the_next_call_makes_a_new_one():
    async def hang(raw: bytes, context) -> bytes:
        await asyncio.sleep(30)

    async def scenario():
        listener, address = await _listener({("broker-a", METHOD, False): hang})
        links = RelayLinks()
        pending = asyncio.ensure_future(links.call(address, "broker-a", METHOD, b"x", (), None))
        await asyncio.sleep(0.1)
        await listener.stop()   # the master's container goes away: its connections close
        with pytest.raises(RelayFailed) as failure:
            await asyncio.wait_for(pending, 5)
        assert failure.value.code is grpc.StatusCode.UNAVAILABLE
        listener, address2 = await _listener({("broker-a", METHOD, False): _echo})
        try:
            assert await links.call(address2, "broker-a", METHOD, b"again", (), 5) == b"again"
        finally:
            await links.close()
            await listener.stop()
    run(scenario())


async def _echo(raw: bytes, context) -> bytes:
    return raw


def test_a_request_that_does_not_parse_closes_the_link_with_one_warning(caplog):
    async def scenario():
        listener, address = await _listener({("broker-a", METHOD, False): _echo})
        host, port = address.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)))
        link = Link(sock)
        try:
            await link.send_preamble(RELAY_PREAMBLE)
            await link.send(b"\xff\xff\xff garbage", b"")
            assert await asyncio.wait_for(link.receive(), 5) is None
        finally:
            await link.aclose()
            await listener.stop()
    run(scenario())
    assert any("does not parse" in r.getMessage() for r in caplog.records)


@pytest.fixture
def installed_secret():
    cluster_auth.install(ClusterCredential(ClusterSecret(b"right-cluster-secret-0001")))
    yield
    cluster_auth.install(None)


def test_with_a_cluster_secret_members_relay_and_others_are_closed(installed_secret):
    async def scenario():
        listener, address = await _listener({("broker-a", METHOD, False): _echo})
        links = RelayLinks()
        host, port = address.rsplit(":", 1)
        stranger = Link(socket.create_connection((host, int(port))))
        try:
            assert await links.call(address, "broker-a", METHOD, b"member", (), 5) == b"member"
            await stranger.send_preamble(RELAY_PREAMBLE)   # no proof: its request is not served
            await stranger.send(pb.RelayRequest(id=1, broker_name="broker-a", method=METHOD).SerializeToString(), b"x")
            assert await asyncio.wait_for(stranger.receive(), 5) is None
        finally:
            await stranger.aclose()
            await links.close()
            await listener.stop()
    run(scenario())


RECEIVE = "/apache.rocketmq.v2.MessagingService/ReceiveMessage"


def test_a_streamed_answer_comes_response_by_response_then_its_status():
    async def responses(raw: bytes, context):
        for i in range(5):
            yield b"%s-%d" % (raw, i)
            await asyncio.sleep(0)

    async def refused(raw: bytes, context):
        yield b"first"
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, "no")

    async def scenario():
        listener, address = await _listener({("broker-a", RECEIVE, True): responses,
                                             ("broker-b", RECEIVE, True): refused})
        links = RelayLinks()
        try:
            got = [chunk async for chunk in links.stream(address, "broker-a", RECEIVE, b"r", (), 5)]
            assert got == [b"r-%d" % i for i in range(5)]
            seen = []
            with pytest.raises(RelayFailed) as failure:
                async for chunk in links.stream(address, "broker-b", RECEIVE, b"r", (), 5):
                    seen.append(chunk)
            assert seen == [b"first"] and failure.value.code is grpc.StatusCode.PERMISSION_DENIED
            with pytest.raises(RelayFailed) as failure:   # a unary method is not a stream
                async for _ in links.stream(address, "broker-a", METHOD, b"r", (), 5):
                    pass
            assert failure.value.code is grpc.StatusCode.UNIMPLEMENTED
        finally:
            await links.close()
            await listener.stop()
    run(scenario())


def test_a_stream_whose_caller_goes_away_is_stopped_on_the_master():
    async def scenario():
        stopped = asyncio.Event()

        async def endless(raw: bytes, context):
            try:
                while True:
                    yield b"more"
                    await asyncio.sleep(0.01)
            finally:
                stopped.set()

        listener, address = await _listener({("broker-a", RECEIVE, True): endless})
        links = RelayLinks()
        try:
            stream = links.stream(address, "broker-a", RECEIVE, b"r", (), None)
            assert await stream.__anext__() == b"more"
            await stream.aclose()
            await asyncio.wait_for(stopped.wait(), 5)
        finally:
            await links.close()
            await listener.stop()
    run(scenario())


def test_a_link_that_answers_nothing_by_a_calls_deadline_is_closed_and_the_next_call_makes_a_new_one():
    """A master's host gone without closing its connections: bytes go out, nothing comes back."""
    async def scenario():
        accepted = []

        async def silent(reader, writer):
            accepted.append(writer)
            while await reader.read(65536):
                pass
        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        links = RelayLinks()
        try:
            began = asyncio.get_running_loop().time()
            with pytest.raises(RelayFailed) as failure:
                await links.call(address, "broker-a", METHOD, b"x", (), 0.2)
            assert failure.value.code is grpc.StatusCode.DEADLINE_EXCEEDED
            assert asyncio.get_running_loop().time() - began < 3
            with pytest.raises(RelayFailed):
                await links.call(address, "broker-a", METHOD, b"y", (), 0.2)
            assert len(accepted) == 2   # the silent link was closed; the second call made a new one
        finally:
            await links.close()
            for writer in accepted:
                writer.close()
            server.close()
    run(scenario())


def test_the_peer_of_a_relayed_call_is_named_as_grpc_names_it():
    from services.messaging.relay_link import grpc_peer
    from services.request_guard import peer_host
    assert grpc_peer("127.0.0.1:5432") == "ipv4:127.0.0.1:5432" and peer_host(grpc_peer("127.0.0.1:5432")) == "127.0.0.1"
    assert grpc_peer("::1:5432") == "ipv6:[::1]:5432" and peer_host(grpc_peer("::1:5432")) == "[::1]"
