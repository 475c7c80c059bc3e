"""Bad input at the edges of issue 26: the sharedStorage key and the containers' ReassignService."""
from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from container.config import BrokerEntry, ContainerConfig
from container.hosted_broker import bind_broker
from metadata.config import ConfigError
from proto import reassign_pb2 as pb
from services.reassign.service import MAX_ENTRY_BYTES, MoveRefused, ReassignServicer


class Aborted(Exception):
    def __init__(self, code, details):
        super().__init__(details)
        self.code, self.details = code, details


class Context:
    async def abort(self, code, details):
        raise Aborted(code, details)


class Moves:
    def __init__(self):
        self.calls = []

    async def release(self, broker_name, epoch, target_endpoint=""):
        self.calls.append(("release", broker_name, epoch))
        if broker_name == "elsewhere":
            raise MoveRefused(grpc.StatusCode.NOT_FOUND, "broker elsewhere is not served by 127.0.0.1:8081")
        return 4096, {"brokerName": broker_name}

    async def open(self, broker_name, epoch, values, handed_end=None):
        self.calls.append(("open", broker_name, epoch))
        return 4096, 1 << 30


def test_shared_storage_needs_a_fixed_client_port(tmp_path):
    with pytest.raises(ConfigError) as bad:
        bind_broker(BrokerEntry({"brokerName": "broker-a", "sharedStorage": True}, "c.toml [[broker]] #1"),
                    ContainerConfig(store_path_root_dir=tmp_path, grpc_server_port=0))
    assert bad.value.key == "sharedStorage" and "fixed grpcServerPort" in str(bad.value)
    with pytest.raises(ConfigError, match="sharedStorage"):
        bind_broker(BrokerEntry({"brokerName": "broker-a", "sharedStorage": "maybe"}, "c.toml [[broker]] #1"),
                    ContainerConfig(store_path_root_dir=tmp_path))


@pytest.mark.parametrize("request_, named", [
    (pb.ReleaseRequest(broker_name="", epoch=2), "broker_name"),
    (pb.ReleaseRequest(broker_name="broker a", epoch=2), "broker_name"),
    (pb.ReleaseRequest(broker_name="broker-a", epoch=0), "epoch"),
])
def test_release_refuses_bad_requests_naming_the_field(request_, named):
    moves = Moves()
    with pytest.raises(Aborted) as refused:
        asyncio.run(ReassignServicer(moves).Release(request_, Context()))
    assert refused.value.code is grpc.StatusCode.INVALID_ARGUMENT and named in refused.value.details
    assert moves.calls == []


@pytest.mark.parametrize("entry", ["", "not json", "[1]", json.dumps({"brokerName": "broker-b"}),
                                   json.dumps({"brokerName": "broker-a", "x": "y" * MAX_ENTRY_BYTES})])
def test_open_refuses_an_entry_that_is_not_the_brokers_keys(entry):
    moves = Moves()
    with pytest.raises(Aborted) as refused:
        asyncio.run(ReassignServicer(moves).Open(pb.OpenRequest(broker_name="broker-a", epoch=2,
                                                                broker_entry_json=entry), Context()))
    assert refused.value.code is grpc.StatusCode.INVALID_ARGUMENT and "broker_entry_json" in refused.value.details
    assert moves.calls == []


def test_a_refused_step_keeps_its_status_and_a_good_one_answers():
    moves = Moves()
    servicer = ReassignServicer(moves)
    with pytest.raises(Aborted) as refused:
        asyncio.run(servicer.Release(pb.ReleaseRequest(broker_name="elsewhere", epoch=2), Context()))
    assert refused.value.code is grpc.StatusCode.NOT_FOUND and "not served" in refused.value.details
    released = asyncio.run(servicer.Release(pb.ReleaseRequest(broker_name="broker-a", epoch=2), Context()))
    assert released.sealed_end == 4096 and json.loads(released.broker_entry_json) == {"brokerName": "broker-a"}
    opened = asyncio.run(servicer.Open(pb.OpenRequest(broker_name="broker-a", epoch=2,
                                                      broker_entry_json=released.broker_entry_json), Context()))
    assert (opened.sealed_end, opened.starts_at) == (4096, 1 << 30)


class Recording:
    def __init__(self):
        self.calls = []

    async def resume(self, broker_name, epoch, values):
        self.calls.append(("resume", broker_name, epoch, values))
        return 4096, 0

    async def check_store(self, broker_name, values, owner):
        self.calls.append(("check", broker_name, owner))


@pytest.mark.parametrize("request_, named", [
    (pb.ResumeRequest(broker_name="", epoch=2), "broker_name"),
    (pb.ResumeRequest(broker_name="broker-a", epoch=0), "epoch"),
    (pb.ResumeRequest(broker_name="broker-a", epoch=2, broker_entry_json="{"), "broker_entry_json"),
])
def test_resume_refuses_bad_requests_naming_the_field(request_, named):
    moves = Recording()
    with pytest.raises(Aborted) as refused:
        asyncio.run(ReassignServicer(moves).Resume(request_, Context()))
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT and named in refused.value.details
    assert moves.calls == []
    asyncio.run(ReassignServicer(moves).Resume(pb.ResumeRequest(broker_name="broker-a", epoch=2), Context()))
    assert moves.calls == [("resume", "broker-a", 2, {})]  # a source still serving needs no keys


@pytest.mark.parametrize("request_, named", [
    (pb.CheckStoreRequest(broker_name="broker-a", broker_entry_json="[]", owner="127.0.0.1:8081"), "broker_entry_json"),
    (pb.CheckStoreRequest(broker_name="broker-a", broker_entry_json='{"brokerName": "broker-a"}', owner=""), "owner"),
    (pb.CheckStoreRequest(broker_name="bad name!", broker_entry_json='{"brokerName": "bad name!"}', owner="h:1"),
     "broker_name"),
])
def test_check_store_refuses_bad_requests_naming_the_field(request_, named):
    moves = Recording()
    with pytest.raises(Aborted) as refused:
        asyncio.run(ReassignServicer(moves).CheckStore(request_, Context()))
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT and named in refused.value.details
    assert moves.calls == []


# --- the controller's move RPCs ------------------------------------------------------------------
class _Machine:
    serving = True


class _Controller:
    machine = _Machine()


class _Moves:
    def __init__(self):
        self.calls = []

    def report(self, *args):
        self.calls.append(("report", *args))

    async def start(self, broker, to, execute):
        self.calls.append(("start", broker, to, execute))
        raise AssertionError("not reached by a bad request")


def _controller_servicer(moves):
    from services.controller.service import ControllerServicer
    return ControllerServicer(_Controller(), acl=object(), moves=moves)


@pytest.mark.parametrize("field, value, named", [
    ("endpoint", "no-port", "endpoint must be host:port"),
    ("endpoint", "127.0.0.1:70000", "endpoint must be host:port"),
    ("admin_address", "", "admin_address must be host:port"),
])
def test_report_container_refuses_a_bad_address_naming_it(field, value, named):
    from proto import controller_pb2 as cpb
    moves = _Moves()
    request = cpb.ReportContainerRequest(endpoint="127.0.0.1:8081", admin_address="127.0.0.1:10911", brokers=["broker-a"])
    setattr(request, field, value)
    reply = asyncio.run(_controller_servicer(moves).ReportContainer(request, Context()))
    assert reply.status.code == cpb.ControllerStatus.CONTROLLER_INVALID_REQUEST and named in reply.status.remark
    assert moves.calls == []


def test_report_container_refuses_an_oversized_entry_and_takes_a_good_report():
    from proto import controller_pb2 as cpb
    moves = _Moves()
    big = cpb.ContainerBroker(name="broker-a", ownership_epoch=1, entry_json="x" * (64 * 1024 + 1))
    request = cpb.ReportContainerRequest(endpoint="127.0.0.1:8081", admin_address="127.0.0.1:10911",
                                         brokers=["broker-a"], shared=[big])
    reply = asyncio.run(_controller_servicer(moves).ReportContainer(request, Context()))
    assert reply.status.code == cpb.ControllerStatus.CONTROLLER_INVALID_REQUEST and "entry_json" in reply.status.remark
    del request.shared[:]
    reply = asyncio.run(_controller_servicer(moves).ReportContainer(request, Context()))
    assert reply.status.code == cpb.ControllerStatus.SUCCESS
    assert moves.calls == [("report", "127.0.0.1:8081", "127.0.0.1:10911", ("broker-a",), {})]


def test_move_broker_refuses_a_bad_target_before_deciding_anything():
    from proto import controller_pb2 as cpb
    moves = _Moves()
    reply = asyncio.run(_controller_servicer(moves).MoveBroker(
        cpb.MoveBrokerRequest(broker_name="broker-a", to="nowhere", execute=True), Context()))
    assert reply.refused.startswith("to must be host:port") and not reply.move_json
    assert moves.calls == []


# --- the command -----------------------------------------------------------------------------------
@pytest.mark.parametrize("args, says", [
    (["--broker", "broker-a"], "--to HOST:PORT is required"),
    (["--to", "127.0.0.1:8082"], "--broker is required"),
    (["--verify"], "--broker is required with --verify"),
    (["--broker", "broker-a", "--to", "127.0.0.1:8082", "--execute", "--cancel"], "at most one of"),
    (["--broker", "broker-a", "--to", "127.0.0.1:99999"], "not HOST:PORT"),
    (["--list", "--wait-ms", "0"], "wait-ms"),
])
def test_reassign_broker_refuses_bad_arguments_before_asking_anyone(args, says, capsys):
    from container.cli import main
    try:
        code = main(["admin", "reassign-broker", *args, "-n", "127.0.0.1:1"])
    except SystemExit as exited:  # argparse's own refusals
        code = exited.code
    assert code == 2 and says in capsys.readouterr().err


def test_a_containers_report_reaches_a_new_controller_leader_listed_last_after_its_last_leader_died():
    """Three members: the leader the container last reached is dead, the next answers NOT_LEADER
    naming the third. The report must get there (before, with three attempts, it never did: the
    dead leader is asked first and again in the members' order, so a new leader listed last
    never heard of the container and could not carry a move on)."""
    from types import SimpleNamespace

    from container.moves import ContainerMoves
    from proto import controller_pb2 as cpb
    from proto import controller_pb2_grpc as cpb_grpc
    from tests.support.container_process import free_ports

    class Member(cpb_grpc.ControllerServiceServicer):
        def __init__(self, leader: str | None):
            self.leader, self.reports = leader, []

        async def ReportContainer(self, request, context):
            self.reports.append(request.endpoint)
            if self.leader is not None:
                return cpb.ReportContainerResponse(status=cpb.ControllerStatus(
                    code=cpb.ControllerStatus.CONTROLLER_NOT_LEADER, leader_address=self.leader))
            return cpb.ReportContainerResponse(status=cpb.ControllerStatus(code=cpb.ControllerStatus.SUCCESS))

    async def run():
        dead, follower_port, leader_port = free_ports(3)
        addresses = [f"127.0.0.1:{p}" for p in (dead, follower_port, leader_port)]
        follower, leader = Member(addresses[2]), Member(None)
        servers = []
        for member, port in ((follower, follower_port), (leader, leader_port)):
            server = grpc.aio.server()
            cpb_grpc.add_ControllerServiceServicer_to_server(member, server)
            server.add_insecure_port(f"127.0.0.1:{port}")
            await server.start()
            servers.append(server)
        container = SimpleNamespace(config=SimpleNamespace(controller_addr=";".join(addresses), admin_bind_address="127.0.0.1"),
                                    hosted={}, identity="127.0.0.1:8082", ports={"admin": 10921})
        moves = ContainerMoves(container)
        try:
            await moves.report()  # reaches the leader once: the client remembers it
            assert leader.reports == ["127.0.0.1:8082"]
            moves._client.leader = addresses[0]  # the leader it knew, now dead
            await moves.report()
            assert leader.reports == ["127.0.0.1:8082"] * 2, (follower.reports, leader.reports)
        finally:
            await moves.close()
            for server in servers:
                await server.stop(None)
    asyncio.run(run())
