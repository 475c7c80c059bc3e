"""The nameserver's side of acting master, in one process over real gRPC: member sets, expiry
of silent members, the min-id push (notifyMinBrokerIdChanged) and the read-only route."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from metadata.route_types import BrokerIdentity
from metadata.topic_config import PERM_READ, PERM_READ_WRITE, TopicConfig, TopicTable
from metadata.data_version import DataVersion
from proto import acting_pb2 as apb
from proto import acting_pb2_grpc as apb_grpc
from scheduler.clock import ManualClock
from services.nameserver.client import NameserverClient, NameserverRejected
from services.nameserver.config import namesrv_config
from services.nameserver.server import start_nameserver


class RecordingActing(apb_grpc.ActingServiceServicer):
    def __init__(self) -> None:
        self.notices: list[apb.ActingNotifyMinBrokerIdRequest] = []
        self.arrived = asyncio.Event()

    async def NotifyMinBrokerId(self, request, context):
        self.notices.append(request)
        self.arrived.set()
        return apb.ActingNotifyMinBrokerIdResponse()


async def _acting_server(servicer) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    apb_grpc.add_ActingServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


def _topics() -> TopicTable:
    return TopicTable(DataVersion(0, 1, 1), {"T": TopicConfig("T", 2, 2)})


async def _wait(condition, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_member_group_push_expiry_and_read_only_route():
    async def scenario():
        clock = ManualClock()
        config = namesrv_config({"listenPort": 0, "supportActingMaster": True, "notifyMinBrokerIdChanged": True,
                                 "scanNotActiveBrokerInterval": 60_000}, "test")
        nameserver = await start_nameserver(config, clock=clock)
        member_a, member_b = RecordingActing(), RecordingActing()
        server_a, address_a = await _acting_server(member_a)
        server_b, address_b = await _acting_server(member_b)
        client = NameserverClient([nameserver.address])
        try:
            master, slave = BrokerIdentity("DefaultCluster", "broker-a", 0), BrokerIdentity("DefaultCluster", "broker-a", 1)
            await client.register_broker(master, address_a, "127.0.0.1:8081", _topics(), 2_000, enable_acting_master=True)
            await client.register_broker(slave, address_b, "127.0.0.1:8082", _topics(), 2_000, enable_acting_master=True)
            group = await client.broker_member_group("broker-a")
            assert dict(group.members) == {0: address_a, 1: address_b} and group.name == "rmq_sys_SYNC_BROKER_MEMBER_broker-a"
            assert not member_b.notices, "a slave joining under a master changes no minimum"
            route = await client.query_route("T")
            assert route.brokers[0].queue_data.perm == PERM_READ_WRITE

            clock.advance(1_000)  # the slave heartbeats, the master is silent
            await client.heartbeat(slave)
            clock.advance(1_500)
            nameserver.driver.scan_not_active()  # the master expired: 2.5 s silent, timeout 2 s
            await asyncio.wait_for(member_b.arrived.wait(), 5)
            notice = member_b.notices[0]
            assert (notice.broker_name, notice.broker_id, notice.min_broker_id) == ("broker-a", 1, 1)
            assert notice.offline_broker_address == address_a and notice.min_broker_address == address_b
            assert dict((await client.broker_member_group("broker-a", "DefaultCluster")).members) == {1: address_b}
            route = await client.query_route("T")  # read-only, the slave as id 0 (reference 2.3)
            assert dict(route.brokers[0].addresses).keys() == {0} and route.brokers[0].queue_data.perm == PERM_READ
            assert route.brokers[0].addresses[0].address == address_b

            member_b.arrived.clear()
            await client.register_broker(master, address_a, "127.0.0.1:8081", _topics(), 2_000, enable_acting_master=True)
            await asyncio.wait_for(member_b.arrived.wait(), 5)  # the master is back: everyone but it is told
            assert member_b.notices[-1].min_broker_id == 0 and not member_a.notices
            assert (await client.broker_member_group("broker-x")).members == {}
        finally:
            await client.close()
            await nameserver.stop()
            await server_a.stop(0)
            await server_b.stop(0)

    asyncio.run(scenario())


def test_a_bad_member_group_request_names_the_field():
    async def scenario():
        nameserver = await start_nameserver(namesrv_config({"listenPort": 0}, "test"))
        client = NameserverClient([nameserver.address])
        try:
            with pytest.raises(NameserverRejected) as refused:
                await client.broker_member_group("bad name!")
            assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT and "broker_name" in refused.value.details
            with pytest.raises(NameserverRejected) as refused:
                await client.broker_member_group("broker-a", cluster="bad cluster")
            assert "cluster" in refused.value.details
        finally:
            await client.close()
            await nameserver.stop()

    asyncio.run(scenario())
