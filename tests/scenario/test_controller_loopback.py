"""Three controller members in one process on 127.0.0.1: real gRPC, real Raft files.

Not timed: every wait polls a condition with a deadline, and each test has its own
deadline (``run_scenario``), with pytest-timeout as the backstop should stopping hang.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from proto import controller_pb2 as pb
from services.controller.client import ControllerClient
from services.controller.config import controller_config
from services.controller.server import start_controller
from tests.support.container_process import free_ports

Code = pb.ControllerStatus
SCENARIO_DEADLINE_S = 30  # a healthy run takes 1-3 s; one wait below is 10-15 s at most
pytestmark = pytest.mark.timeout(SCENARIO_DEADLINE_S + 15)


def run_scenario(scenario, deadline_s: float = SCENARIO_DEADLINE_S) -> None:
    """Run one test's scenario within its own deadline, so that a stall fails in seconds."""
    async def bounded():
        async with asyncio.timeout(deadline_s):
            await scenario()
    asyncio.run(bounded())




def configs(tmp_path, **extra):
    ports = free_ports(3)
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
    return [controller_config({"controllerDLegerPeers": peers, "controllerDLegerSelfId": f"n{i}",
                               "controllerStorePath": str(tmp_path / f"n{i}"), **extra}, "test")
            for i in range(3)], [f"127.0.0.1:{p}" for p in ports]


async def wait_for(condition, timeout_s: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def serving(handles):
    return [h for h in handles if h.controller.machine.serving]


async def join(client: ControllerClient, name: str, broker_id: int):
    reply = await client.call("ApplyBrokerId", pb.ApplyBrokerIdRequest(
        cluster_name="c", broker_name=name, applied_broker_id=broker_id, register_check_code=f"h:{broker_id};1"))
    assert reply.status.code == Code.SUCCESS, reply.status.remark
    reply = await client.call("RegisterBroker", pb.RegisterBrokerRequest(
        cluster_name="c", broker_name=name, broker_id=broker_id, broker_address=f"h:{broker_id}"))
    assert reply.status.code == Code.SUCCESS, reply.status.remark


def test_three_members_elect_serve_redirect_and_recover(tmp_path):
    async def scenario():
        cfgs, addresses = configs(tmp_path)
        handles = [await start_controller(c) for c in cfgs]
        client = ControllerClient(addresses)
        try:
            (leader,) = await wait_for(lambda: serving(handles) or None, what="a serving leader")
            await join(client, "broker-a", 1)
            await join(client, "broker-a", 2)
            reply = await client.call("ElectMaster", pb.ElectMasterRequest(cluster_name="c", broker_name="broker-a",
                                                                           broker_id=1))
            assert reply.status.code == Code.SUCCESS and reply.view.master_broker_id == 1
            assert reply.view.master_epoch == 1
            # the master restarted with epoch 1 in its file: it asks for a new epoch, once
            renew = pb.ElectMasterRequest(cluster_name="c", broker_name="broker-a", broker_id=1, renew_master_epoch=1)
            reply = await client.call("ElectMaster", renew)
            assert reply.status.code == Code.SUCCESS and reply.view.master_epoch == 2
            assert list(reply.view.sync_state_set) == [1]
            reply = await client.call("ElectMaster", renew)
            assert reply.status.code == Code.CONTROLLER_FENCED_MASTER_EPOCH and reply.view.master_epoch == 2
            follower = next(h for h in handles if h is not leader)
            direct = ControllerClient([f"127.0.0.1:{follower.port}"], attempts=1)
            refused = await direct.call("GetReplicaInfo", pb.GetReplicaInfoRequest(broker_name="broker-a"))
            assert refused.status.code == Code.CONTROLLER_NOT_LEADER
            assert refused.status.leader_address == f"127.0.0.1:{leader.port}"
            await direct.close()
            meta = await client.metadata()
            assert meta.leader_address == f"127.0.0.1:{leader.port}" and len(meta.peers) == 3
            # every member applies the same events
            await wait_for(lambda: all(h.controller.machine.replicas.snapshot()
                                       == leader.controller.machine.replicas.snapshot() for h in handles),
                           what="replicated tables")
        finally:
            await client.close()
            for h in handles:
                await h.stop()
        # restart all: state recovered from disk
        handles = [await start_controller(c) for c in cfgs]
        client = ControllerClient(addresses)
        try:
            await wait_for(lambda: serving(handles) or None, what="a serving leader after restart")
            reply = await client.call("GetReplicaInfo", pb.GetReplicaInfoRequest(broker_name="broker-a"))
            assert reply.status.code == Code.SUCCESS
            assert (reply.view.master_broker_id, reply.view.master_epoch) == (1, 2)
            assert dict(reply.view.members) == {1: "h:1", 2: "h:2"}
        finally:
            await client.close()
            for h in handles:
                await h.stop()

    run_scenario(scenario)


def test_embedded_in_a_given_server_and_watchers_see_role_changes(tmp_path):
    """The nameserver path: services added to a server we do not own; the watch stream."""
    import grpc

    async def scenario():
        (port,) = free_ports(1)
        config = controller_config({"controllerDLegerPeers": f"n0-127.0.0.1:{port}", "controllerDLegerSelfId": "n0",
                                    "controllerStorePath": str(tmp_path / "solo")}, "test")
        server = grpc.aio.server()
        server.add_insecure_port(f"127.0.0.1:{port}")
        handle = await start_controller(config, server)
        await server.start()
        client = ControllerClient([f"127.0.0.1:{port}"])
        try:
            await wait_for(lambda: handle.controller.machine.serving, what="single member serving")
            await join(client, "broker-w", 1)
            stream = client.stub(f"127.0.0.1:{port}").WatchReplicaInfo(pb.WatchReplicaInfoRequest(
                broker_name="broker-w"))
            first = await stream.read()
            assert first.view.broker_name == "broker-w" and first.view.master_broker_id == -1
            reply = await client.call("ElectMaster", pb.ElectMasterRequest(cluster_name="c", broker_name="broker-w",
                                                                           broker_id=1))
            assert reply.status.code == Code.SUCCESS
            notice = await asyncio.wait_for(stream.read(), 5)
            assert (notice.view.master_broker_id, notice.view.master_epoch) == (1, 1)
            stream.cancel()
            assert handle.server is None  # not ours to stop
        finally:
            await client.close()
            await handle.stop()
            await server.stop(0)

    run_scenario(scenario)


def test_bad_requests_are_answered_with_invalid_request(tmp_path):
    async def scenario():
        cfgs, addresses = configs(tmp_path)
        handles = [await start_controller(c) for c in cfgs]
        client = ControllerClient(addresses)
        try:
            await wait_for(lambda: serving(handles) or None, what="a serving leader")
            reply = await client.call("RegisterBroker", pb.RegisterBrokerRequest(cluster_name="c", broker_name="",
                                                                                 broker_id=1, broker_address="a"))
            assert reply.status.code == Code.CONTROLLER_INVALID_REQUEST and "broker_name" in reply.status.remark
            beat = await client.call("BrokerHeartbeat", pb.BrokerHeartbeatRequest(broker_name="b", broker_id=0))
            assert beat.status.code == Code.CONTROLLER_INVALID_REQUEST
        finally:
            await client.close()
            for h in handles:
                await h.stop()

    run_scenario(scenario)
