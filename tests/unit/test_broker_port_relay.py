"""A broker's own endpoint relaying unary calls to its group's master (services.messaging.broker_port),
over real grpc.aio servers and real replication listeners on loopback, each case over gRPC and
over a relay link (services.messaging.relay_link): the bytes pass unchanged, a master's failure
reaches the caller as its status, and a replica promoted while its relay hangs on a stopped
master serves the call itself; the relay leaves no listener behind on the replica.  A master's
container that takes no relay links is asked over gRPC."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from services.ha.service import HaListener
from services.messaging.broker_port import BrokerPortHandler, Relays

METHOD = "/apache.rocketmq.v2.MessagingService/SendMessage"
SERVICE, NAME = METHOD[1:].split("/")


class Replica:
    """What the handler asks of a replica, with a promotion the test triggers."""

    def __init__(self, relay: str, link: str | None = None):
        self.name, self.is_master, self.fence, self._relay, self._link = "broker-a", False, None, relay, link
        self.listeners: set = set()

    def relay_endpoint(self):
        return None if self.is_master else self._relay

    def relay_link_address(self):
        return None if self.is_master else self._link

    async def wait_changed(self, timeout_s):
        await asyncio.sleep(timeout_s)

    def add_change_listener(self, fn) -> None:
        self.listeners.add(fn)

    def remove_change_listener(self, fn) -> None:
        self.listeners.discard(fn)

    def promote(self) -> None:
        self.is_master = True
        for listener in list(self.listeners):
            listener()


def _unary(fn) -> grpc.GenericRpcHandler:
    handler = grpc.unary_unary_rpc_method_handler(fn, request_deserializer=None, response_serializer=None)
    return grpc.method_handlers_generic_handler(SERVICE, {NAME: handler})


async def _serve(*handlers) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(handlers)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def _local(raw: bytes, context) -> bytes:
    return b"local:" + raw


async def _no_listeners_left(replica, within_s: float = 5.0) -> None:
    """Every relay took its listener back.  The caller may hold its status a moment before the
    relaying handler's last lines run (seen under load), so this waits a little."""
    deadline = asyncio.get_running_loop().time() + within_s
    while replica.listeners and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    assert replica.listeners == set()


class MasterReplica:
    name, is_master, fence = "broker-a", True, None


@pytest.fixture(params=["grpc", "link"])
def transport(request):
    return request.param


def _scenario(master_behaviour, body, transport="grpc", links_taken=True):
    """``transport``: how the replica reaches its master (a relay link needs the master's
    container to take them: ``links_taken``)."""
    async def run():
        master, master_address = await _serve(_unary(master_behaviour))
        master_port = BrokerPortHandler(MasterReplica(), {METHOD: grpc.unary_unary_rpc_method_handler(
            master_behaviour, request_deserializer=None, response_serializer=lambda raw: raw)}, Relays([]),
            hold_ms=1000, now_s=asyncio.get_running_loop().time)
        listener = HaListener(lambda name: None,
                              (lambda broker, method, streamed: master_port.relayed(method, streamed)) if links_taken else None)
        link_address = f"127.0.0.1:{listener.bind('127.0.0.1', 0)}"
        listener.start()
        replica = Replica(master_address, link_address if transport == "link" else None)
        relays = Relays([])
        local = {METHOD: grpc.unary_unary_rpc_method_handler(_local, request_deserializer=None,
                                                             response_serializer=lambda raw: raw)}
        port_handler = BrokerPortHandler(replica, local, relays, hold_ms=1000, now_s=asyncio.get_running_loop().time)
        relaying, address = await _serve(port_handler)
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                return await body(channel.unary_unary(METHOD), replica)
        finally:
            await relays.close()
            await relaying.stop(None)
            await listener.stop()
            await master.stop(None)
    return asyncio.run(run())


def test_a_relayed_call_reaches_the_master_and_its_answer_comes_back_unchanged(transport):
    seen = []

    async def master(raw: bytes, context) -> bytes:
        seen.append((dict(context.invocation_metadata()).get("x-mq-client-id"), 0 < context.time_remaining() <= 10,
                     type(context).__name__))
        return b"master:" + raw

    async def body(call, replica):
        answers = await asyncio.gather(*(call(b"m%d" % i, timeout=10, metadata=(("x-mq-client-id", f"c{i}"),))
                                         for i in range(50)))
        assert answers == [b"master:m%d" % i for i in range(50)]
        await _no_listeners_left(replica)  # every relay took its listener back
    _scenario(master, body, transport)
    over = "RelayedContext" if transport == "link" else "_ServicerContext"
    assert sorted(seen) == sorted((f"c{i}", True, over) for i in range(50))   # the caller's metadata and deadline


def test_a_masters_failure_reaches_the_caller_as_its_status_naming_the_relay(transport):
    async def master(raw: bytes, context) -> bytes:
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "disk full")

    async def body(call, replica):
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            await call(b"m", timeout=10)
        assert failure.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "relayed to 127.0.0.1:" in failure.value.details() and "disk full" in failure.value.details()
        await _no_listeners_left(replica)
    _scenario(master, body, transport)


def test_a_replica_promoted_while_its_relay_hangs_serves_the_call_itself(transport):
    reached = asyncio.Event
    state: dict = {}

    async def master(raw: bytes, context) -> bytes:  # a master that stopped answering
        state["reached"].set()
        await asyncio.sleep(60)
        return b"master:" + raw

    async def body(call, replica):
        state["reached"] = reached()
        pending = asyncio.ensure_future(call(b"m", timeout=20))
        await asyncio.wait_for(state["reached"].wait(), 10)
        assert not pending.done()
        replica.promote()
        assert await asyncio.wait_for(pending, 10) == b"local:m"
        await _no_listeners_left(replica)
    _scenario(master, body, transport)


def test_a_change_that_is_no_promotion_leaves_the_relay_running(transport):
    async def master(raw: bytes, context) -> bytes:
        await asyncio.sleep(0.3)
        return b"master:" + raw

    async def body(call, replica):
        pending = asyncio.ensure_future(call(b"m", timeout=20))
        await asyncio.sleep(0.1)
        for listener in list(replica.listeners):  # e.g. the copy reconnected: still a slave
            listener()
        assert await asyncio.wait_for(pending, 10) == b"master:m"
    _scenario(master, body, transport)


def test_a_master_container_that_takes_no_relay_links_is_asked_over_grpc():
    async def master(raw: bytes, context) -> bytes:
        return b"master:" + raw

    async def body(call, replica):
        assert [await call(f"m{i}".encode(), timeout=10) for i in range(3)] == [b"master:m0", b"master:m1", b"master:m2"]
        await _no_listeners_left(replica)
    _scenario(master, body, "link", links_taken=False)


RECEIVE = "/apache.rocketmq.v2.MessagingService/ReceiveMessage"


def test_a_streamed_answer_is_relayed_response_by_response(transport):
    kinds = []

    async def master_stream(raw: bytes, context):
        kinds.append(type(context).__name__)
        for i in range(3):
            yield b"%s:%d" % (raw, i)

    def stream_handler(fn):
        return grpc.unary_stream_rpc_method_handler(fn, request_deserializer=None, response_serializer=lambda raw: raw)

    async def local_stream(raw: bytes, context):
        yield b"local"

    async def run():
        service, name = RECEIVE[1:].split("/")
        master = grpc.aio.server()
        master.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {name: stream_handler(master_stream)}),))
        master_address = f"127.0.0.1:{master.add_insecure_port('127.0.0.1:0')}"
        await master.start()
        master_port = BrokerPortHandler(MasterReplica(), {RECEIVE: stream_handler(master_stream)}, Relays([]),
                                        hold_ms=1000, now_s=asyncio.get_running_loop().time)
        listener = HaListener(lambda n: None, lambda broker, method, streamed: master_port.relayed(method, streamed))
        link_address = f"127.0.0.1:{listener.bind('127.0.0.1', 0)}"
        listener.start()
        replica, relays = Replica(master_address, link_address if transport == "link" else None), Relays([])
        port_handler = BrokerPortHandler(replica, {RECEIVE: stream_handler(local_stream)}, relays, hold_ms=1000,
                                         now_s=asyncio.get_running_loop().time)
        relaying, address = await _serve(port_handler)
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                return [chunk async for chunk in channel.unary_stream(RECEIVE)(b"r", timeout=10)]
        finally:
            await relays.close()
            await relaying.stop(None)
            await listener.stop()
            await master.stop(None)
    assert asyncio.run(run()) == [b"r:0", b"r:1", b"r:2"]
    assert kinds == ["RelayedContext" if transport == "link" else "_ServicerContext"]
