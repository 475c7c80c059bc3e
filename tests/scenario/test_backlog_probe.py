"""The backlog probe (services/messaging/backlog_probe.py) between two containers over real gRPC
on loopback: a receive waiting on one container's broker is woken when the other container's
broker of the topic holds messages for its group, and not when it holds none or cannot be
reached; the servicer refuses malformed requests."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from metadata.route_types import BrokerAddress, BrokerRoute, QueueData, TopicRoute
from proto import backlog_pb2 as pb
from proto import backlog_pb2_grpc as pb_grpc
from scheduler.clock import SystemClock
from scheduler.pop.backlog_board import BoardSettings
from services.messaging.backlog_probe import BacklogProbe, BacklogServicer


class Pop:
    def __init__(self, counts: dict[tuple[str, str], int] | None = None):
        self.counts = counts or {}
        self.asked: list[tuple[str, str, int]] = []

    def receivable(self, group, topic, limit):
        self.asked.append((group, topic, limit))
        return min(limit, self.counts.get((topic, group), 0))


class Container:
    """What a container shows the probe: its brokers serving pop calls, and their long polls."""

    def __init__(self, brokers: dict[str, Pop]):
        self.brokers = brokers
        self.woken: list[tuple[str, str]] = []

    def serving_pop(self, broker_name):
        return self.brokers.get(broker_name)

    def wake(self, broker_name, topic):
        self.woken.append((broker_name, topic))


def route(topic: str, b_address: str, perm_b: int = 6, b_member: int = 0) -> TopicRoute:
    """``b_member``: broker-b's member id in the route (1: its master is gone and a slave acts, RIP-32)."""
    def broker(name, address, perm, member=0):
        return BrokerRoute("DefaultCluster", name, {member: BrokerAddress(address, "127.0.0.1:1")},
                           QueueData(4, 4, perm, "NORMAL"))
    return TopicRoute(topic, (broker("broker-a", "127.0.0.1:10911", 6), broker("broker-b", b_address, perm_b, b_member)))


async def serve(container: Container) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    pb_grpc.add_BacklogServiceServicer_to_server(BacklogServicer(container), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def until(condition, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)


SETTINGS = BoardSettings(probe_interval_ms=50, fresh_ms=200)


@pytest.mark.parametrize("b_member", [0, 1])
def test_a_waiting_receive_is_woken_when_the_other_container_holds_the_groups_backlog(b_member):
    """Broker-b served by its master, or by a slave acting for it (the route then names no id 0)."""
    async def scenario():
        remote = Container({"broker-b": Pop({("T", "G"): 40})})
        server, address = await serve(remote)
        here = Container({"broker-a": Pop()})
        probe = BacklogProbe(SETTINGS, SystemClock(), lambda topic: _async(route(topic, address, b_member=b_member)), here)
        probe.start()
        try:
            assert not probe.elsewhere("T", "G", "broker-a")
            probe.waiting("T", "G", "broker-a", +1)
            await until(lambda: here.woken)
            assert here.woken[0] == ("broker-a", "T")
            assert probe.elsewhere("T", "G", "broker-a") and not probe.elsewhere("T", "G", "broker-b")
            assert remote.brokers["broker-b"].asked[0][:2] == ("G", "T")
            assert here.brokers["broker-a"].asked  # its own broker answered in process
            probe.waiting("T", "G", "broker-a", -1)
        finally:
            await probe.stop()
            await server.stop(None)
    asyncio.run(scenario())


@pytest.mark.parametrize("case", ["empty", "unreachable", "not-readable", "no-route"])
def test_no_backlog_elsewhere_wakes_nobody(case):
    """Nothing there, a broker that does not answer, one whose queues are not readable, or no
    route: the long poll goes on as upstream's (an unreachable broker never ends waits)."""
    async def scenario():
        remote = Container({"broker-b": Pop({("T", "G"): 0 if case == "empty" else 40})})
        server, address = await serve(remote)
        if case == "unreachable":
            await server.stop(None)
        here = Container({"broker-a": Pop()})
        topic_route = None if case == "no-route" else route("T", address, perm_b=2 if case == "not-readable" else 6)
        probe = BacklogProbe(SETTINGS, SystemClock(), lambda topic: _async(topic_route), here, timeout_ms=200)
        probe.start()
        try:
            probe.waiting("T", "G", "broker-a", +1)
            await asyncio.sleep(0.6)  # several probe intervals
            assert here.woken == [] and not probe.elsewhere("T", "G", "broker-a")
        finally:
            await probe.stop()
            await server.stop(None)
    asyncio.run(scenario())


@pytest.mark.parametrize("change, words", [
    (dict(broker_name=""), "broker_name"),
    (dict(limit=0), "limit"),
    (dict(keys=[pb.BacklogKey(topic="bad topic!", group="G")]), "not a valid topic"),
    (dict(keys=[pb.BacklogKey(topic="T", group="")]), "not a valid topic"),
    (dict(keys=[pb.BacklogKey(topic="T", group="G")] * 1025), "at most 1024"),
])
def test_the_servicer_refuses_malformed_requests(change, words):
    async def scenario():
        server, address = await serve(Container({"broker-b": Pop({("T", "G"): 3})}))
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                stub = pb_grpc.BacklogServiceStub(channel)
                good = dict(broker_name="broker-b", limit=10, keys=[pb.BacklogKey(topic="T", group="G")])
                assert list((await stub.Backlog(pb.BacklogRequest(**good))).receivable) == [3]
                other = await stub.Backlog(pb.BacklogRequest(**{**good, "broker_name": "broker-x"}))
                assert list(other.receivable) == [0]  # a broker not served here: nothing
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.Backlog(pb.BacklogRequest(**{**good, **change}))
                assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT and words in refused.value.details()
        finally:
            await server.stop(None)
    asyncio.run(scenario())


async def _async(value):
    return value


def test_an_idle_wait_is_asked_about_once_per_interval_while_it_lasts():
    """With nothing anywhere, a receive waiting here makes the probe ask the other container once
    per interval, for as long as it waits, and not after."""
    async def scenario():
        remote = Container({"broker-b": Pop()})
        server, address = await serve(remote)
        here = Container({"broker-a": Pop()})
        probe = BacklogProbe(SETTINGS, SystemClock(), lambda topic: _async(route(topic, address)), here)
        probe.start()
        try:
            probe.waiting("T", "G", "broker-a", +1)
            probe.waiting("T", "other", "broker-a", +1)
            await asyncio.sleep(0.52)  # about ten intervals of 50 ms
            asked = len(remote.brokers["broker-b"].asked)
            assert 6 <= asked <= 30, asked  # both keys, in step, again and again (about 20), never in a busy loop
            probe.waiting("T", "G", "broker-a", -1)
            probe.waiting("T", "other", "broker-a", -1)
            await asyncio.sleep(0.1)
            settled = len(remote.brokers["broker-b"].asked)
            await asyncio.sleep(0.3)
            assert len(remote.brokers["broker-b"].asked) == settled  # nobody waits: nothing asked
            assert here.woken == []
        finally:
            await probe.stop()
            await server.stop(None)
    asyncio.run(scenario())
