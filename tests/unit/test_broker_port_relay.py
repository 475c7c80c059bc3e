"""A broker's own endpoint relaying unary calls to its group's master (services.messaging.broker_port),
over real grpc.aio servers on loopback: the bytes pass unchanged, a master's failure reaches the
caller as its status, and a replica promoted while its relay hangs on a stopped master serves the
call itself; the relay leaves no listener behind on the replica."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from services.messaging.broker_port import BrokerPortHandler, Relays

METHOD = "/apache.rocketmq.v2.MessagingService/SendMessage"
SERVICE, NAME = METHOD[1:].split("/")


class Replica:
    """What the handler asks of a replica, with a promotion the test triggers."""

    def __init__(self, relay: str):
        self.name, self.is_master, self.fence, self._relay = "broker-a", False, None, relay
        self.listeners: set = set()

    def relay_endpoint(self):
        return None if self.is_master else self._relay

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


def _scenario(master_behaviour, body):
    async def run():
        master, master_address = await _serve(_unary(master_behaviour))
        replica, relays = Replica(master_address), Relays([])
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
            await master.stop(None)
    return asyncio.run(run())


def test_a_relayed_call_reaches_the_master_and_its_answer_comes_back_unchanged():
    async def master(raw: bytes, context) -> bytes:
        return b"master:" + raw

    async def body(call, replica):
        answers = await asyncio.gather(*(call(b"m%d" % i, timeout=10) for i in range(50)))
        assert answers == [b"master:m%d" % i for i in range(50)]
        await _no_listeners_left(replica)  # every relay took its listener back
    _scenario(master, body)


def test_a_masters_failure_reaches_the_caller_as_its_status_naming_the_relay():
    async def master(raw: bytes, context) -> bytes:
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "disk full")

    async def body(call, replica):
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            await call(b"m", timeout=10)
        assert failure.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "relayed to 127.0.0.1:" in failure.value.details() and "disk full" in failure.value.details()
        await _no_listeners_left(replica)
    _scenario(master, body)


def test_a_replica_promoted_while_its_relay_hangs_serves_the_call_itself():
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
    _scenario(master, body)


def test_a_change_that_is_no_promotion_leaves_the_relay_running():
    async def master(raw: bytes, context) -> bytes:
        await asyncio.sleep(0.3)
        return b"master:" + raw

    async def body(call, replica):
        pending = asyncio.ensure_future(call(b"m", timeout=20))
        await asyncio.sleep(0.1)
        for listener in list(replica.listeners):  # e.g. the copy reconnected: still a slave
            listener()
        assert await asyncio.wait_for(pending, 10) == b"master:m"
    _scenario(master, body)
