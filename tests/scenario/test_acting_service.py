"""The ActingService refuses malformed requests naming the field, an unknown broker by name,
and a broker's refusal by its reason; over real gRPC on loopback with a fake container."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from metadata.status import Code, RequestRejected
from proto import acting_pb2 as pb
from proto import acting_pb2_grpc as pb_grpc
from services.acting.client import ActingClient, ActingRejected
from services.acting.service import ActingServicer, BadActingRequest, NotASlave, escaped_items, queue_keys


def message(**fields) -> pb.ActingEscapedMessage:
    values = {"topic": "T", "queue_id": 0, "body": b"x", "escape_key": "broker-a:timer:1", "kind": "DELAY", **fields}
    return pb.ActingEscapedMessage(**values)


@pytest.mark.parametrize("fields, named", [
    ({"topic": "bad topic!"}, "messages[0].topic"),
    ({"kind": "LATER"}, "messages[0].kind"),
    ({"escape_key": ""}, "messages[0].escape_key"),
    ({"escape_key": "k" * 1025}, "messages[0].escape_key"),
    ({"queue_id": -1}, "messages[0].queue_id"),
])
def test_escaped_messages_are_checked_field_by_field(fields, named):
    with pytest.raises(BadActingRequest) as refused:
        escaped_items(pb.ActingEscapePutRequest(broker_name="broker-b", messages=[message(**fields)]))
    assert named in str(refused.value)


def test_an_escape_of_nothing_or_too_much_is_refused():
    with pytest.raises(BadActingRequest, match="messages"):
        escaped_items(pb.ActingEscapePutRequest(broker_name="broker-b"))
    items = escaped_items(pb.ActingEscapePutRequest(broker_name="broker-b", messages=[message(properties={"a": "1"})]))
    assert items[0].draft.properties == {"a": "1"} and items[0].key == "broker-a:timer:1"


@pytest.mark.parametrize("queue, named", [
    (pb.ActingQueueKey(group="", topic="T", queue_id=0), "queues[0].group"),
    (pb.ActingQueueKey(group="g", topic="", queue_id=0), "queues[0].topic"),
    (pb.ActingQueueKey(group="g", topic="T", queue_id=-2), "queues[0].queue_id"),
])
def test_lock_requests_name_the_bad_queue(queue, named):
    with pytest.raises(BadActingRequest) as refused:
        queue_keys([queue])
    assert named in str(refused.value)


class FakeBroker:
    name = "broker-b"

    async def escape_put(self, items):
        raise RequestRejected(Code.FORBIDDEN, "broker broker-b-1 is a slave")


class FakeContainer:
    def __init__(self):
        self.offers = []

    def acting_broker(self, broker_name, broker_id):
        return (FakeBroker(), None) if broker_name == "broker-b" else None

    def offer_master(self, broker_name, broker_id, master_address):
        if broker_name != "broker-b":
            return None
        if broker_id == 2:
            raise NotASlave("broker-b member 2 is master, not a slave")
        self.offers.append((broker_name, broker_id, master_address))
        return "HANDSHAKE"


def test_refusals_over_grpc_carry_the_code_and_the_named_reason():
    async def scenario():
        server = grpc.aio.server()
        container = FakeContainer()
        pb_grpc.add_ActingServiceServicer_to_server(ActingServicer(container), server)
        address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        await server.start()
        client = ActingClient()
        try:
            cases = [
                ("NotifyMinBrokerId", pb.ActingNotifyMinBrokerIdRequest(broker_name="broker-x", min_broker_id=1),
                 grpc.StatusCode.NOT_FOUND, "BROKER_NOT_EXIST"),
                ("NotifyMinBrokerId", pb.ActingNotifyMinBrokerIdRequest(broker_name="broker-b", min_broker_id=-1),
                 grpc.StatusCode.INVALID_ARGUMENT, "BAD_REQUEST"),
                ("HandOver", pb.ActingHandOverRequest(broker_name="no such!"), grpc.StatusCode.INVALID_ARGUMENT,
                 "BAD_REQUEST"),
                ("EscapePut", pb.ActingEscapePutRequest(broker_name="broker-b", messages=[message()]),
                 grpc.StatusCode.FAILED_PRECONDITION, "FORBIDDEN"),
                ("LockQueues", pb.ActingLockQueuesRequest(broker_name="broker-b", lease_ms=0),
                 grpc.StatusCode.INVALID_ARGUMENT, "BAD_REQUEST"),
                *[("OfferMaster", pb.ActingOfferMasterRequest(**fields), code, reason) for fields, code, reason in [
                    ({"broker_name": "broker-b", "broker_id": 1, "master_address": "nohostport"},
                     grpc.StatusCode.INVALID_ARGUMENT, "BAD_REQUEST"),
                    ({"broker_name": "broker-b", "broker_id": 1, "master_address": "h:70000"},
                     grpc.StatusCode.INVALID_ARGUMENT, "BAD_REQUEST"),
                    ({"broker_name": "broker-b", "broker_id": 0, "master_address": "h:1"},
                     grpc.StatusCode.INVALID_ARGUMENT, "BAD_REQUEST"),
                    ({"broker_name": "broker-b", "broker_id": 1, "master_address": "h:1", "master_broker_id": -1},
                     grpc.StatusCode.INVALID_ARGUMENT, "BAD_REQUEST"),
                    ({"broker_name": "broker-x", "broker_id": 1, "master_address": "h:1"},
                     grpc.StatusCode.NOT_FOUND, "BROKER_NOT_EXIST"),
                    ({"broker_name": "broker-b", "broker_id": 2, "master_address": "h:1"},
                     grpc.StatusCode.FAILED_PRECONDITION, "NOT_A_SLAVE")]],
            ]
            for method, request, code, reason in cases:
                with pytest.raises(ActingRejected) as refused:
                    await client.call(address, method, request, 5_000)
                assert (refused.value.code, refused.value.reason) == (code, reason), (method, refused.value.details)
            offered = await client.call(address, "OfferMaster", pb.ActingOfferMasterRequest(
                broker_name="broker-b", broker_id=1, master_address="127.0.0.1:10911"), 5_000)
            assert offered.replication_state == "HANDSHAKE" and container.offers == [("broker-b", 1, "127.0.0.1:10911")]
        finally:
            await client.close()
            await server.stop(0)

    asyncio.run(scenario())
