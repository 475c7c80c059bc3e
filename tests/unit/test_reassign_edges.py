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
