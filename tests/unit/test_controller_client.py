"""ControllerClient's leader search, against scripted members (no sockets)."""
from __future__ import annotations

import asyncio

import grpc

from proto import controller_pb2 as pb
from services.controller.client import ControllerClient

Code = pb.ControllerStatus


class ScriptedGroup:
    """Members by address; `leader` serves, the others redirect to `believed`; `dead` refuse."""

    def __init__(self, leader: str, believed: str, dead: set[str]) -> None:
        self.leader, self.believed, self.dead = leader, believed, dead
        self.calls: list[str] = []

    def answer(self, address: str) -> pb.ControllerReplicaResponse:
        self.calls.append(address)
        if address in self.dead:
            raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                       "connection refused")
        if address == self.leader:
            return pb.ControllerReplicaResponse(status=pb.ControllerStatus(code=Code.SUCCESS))
        return pb.ControllerReplicaResponse(status=pb.ControllerStatus(
            code=Code.CONTROLLER_NOT_LEADER, leader_address=self.believed))


class ScriptedClient(ControllerClient):
    def __init__(self, group: ScriptedGroup, addresses: list[str], **limits) -> None:
        super().__init__(addresses, **limits)
        self.group = group

    def stub(self, address: str):
        group = self

        class Stub:
            async def GetReplicaInfo(self, request, timeout):
                return group.group.answer(address)
        return Stub()


def test_after_the_leader_dies_a_redirect_to_the_new_leader_is_followed():
    """kill -9 of a, then b wins: c named the dead a (appended to the order), then b.

    Before the fix the redirect was inserted at the end of the order, the cursor wrapped to
    c, and c was asked again and again (no pause): b never was, the write never committed.
    """
    async def scenario():
        group = ScriptedGroup(leader="", believed="a", dead={"a"})
        client = ScriptedClient(group, ["c", "b"], attempts=50, deadline_s=5.0, retry_pause_s=0.0)
        original = group.answer

        def answer(address):  # b wins the election while the client is searching
            if len(group.calls) == 4:
                group.leader, group.believed = "b", "b"
            return original(address)
        group.answer = answer
        reply = await client.call("GetReplicaInfo", pb.GetReplicaInfoRequest(broker_name="x"))
        assert reply.status.code == Code.SUCCESS, group.calls
        assert client.leader == "b"
        assert len(group.calls) <= 8, group.calls

    asyncio.run(scenario())


def test_members_that_disagree_on_the_leader_are_chased_at_the_retry_pace():
    async def scenario():
        group = ScriptedGroup(leader="", believed="", dead=set())
        group.answer = lambda address: (group.calls.append(address), pb.ControllerReplicaResponse(
            status=pb.ControllerStatus(code=Code.CONTROLLER_NOT_LEADER,
                                     leader_address="b" if address == "a" else "a")))[1]
        client = ScriptedClient(group, ["a", "b"], attempts=1_000, deadline_s=0.3, retry_pause_s=0.05)
        reply = await client.call("GetReplicaInfo", pb.GetReplicaInfoRequest(broker_name="x"))
        assert reply.status.code == Code.CONTROLLER_NOT_LEADER
        assert len(group.calls) <= 20, f"{len(group.calls)} calls in 0.3 s: a busy loop"

    asyncio.run(scenario())
