"""Every MessagingService RPC over real gRPC on loopback, against the fake broker."""
from __future__ import annotations

import asyncio
import uuid
import zlib

import grpc
import pytest
from google.protobuf import duration_pb2

from metadata.message import MessageType
from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from proto import messaging_service_pb2_grpc as g
from tests.support.messaging_server import running_server

pytestmark = pytest.mark.integration
TOPICS = {"normal": MessageType.NORMAL, "fifo-t": MessageType.FIFO, "delay-t": MessageType.DELAY,
          "tx-t": MessageType.TRANSACTION, "mixed": None}


def run(coro):
    return asyncio.run(coro)


def meta(client_id="it@1"):
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))


def message(topic="normal", body=b"hello", **system):
    system.setdefault("message_id", uuid.uuid4().hex.upper()[:34])
    system.setdefault("message_type", d.NORMAL)
    system.setdefault("body_encoding", d.IDENTITY)
    return d.Message(topic=d.Resource(name=topic), body=body, system_properties=d.SystemProperties(**system))


def queue(topic, port, broker="broker-a", qid=-1):
    endpoints = d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host="127.0.0.1", port=port)])
    return d.MessageQueue(topic=d.Resource(name=topic), id=qid, broker=d.Broker(name=broker, id=0, endpoints=endpoints))


def receive_request(topic, port, group="g1", invisible_s=30, poll_s=1, batch=16):
    return s.ReceiveMessageRequest(group=d.Resource(name=group), message_queue=queue(topic, port),
                                   filter_expression=d.FilterExpression(type=d.TAG, expression="*"), batch_size=batch,
                                   invisible_duration=duration_pb2.Duration(seconds=invisible_s),
                                   long_polling_timeout=duration_pb2.Duration(seconds=poll_s))


async def receive_all(stub, request, timeout=10, client_id="it@1"):
    return [r async for r in stub.ReceiveMessage(request, metadata=meta(client_id), timeout=timeout)]


async def _with_stub(body, config=None):
    import dataclasses
    from services.messaging.config import MessagingConfig
    config = config or dataclasses.replace(MessagingConfig(grpc_server_port=0), min_long_polling_ms=500,
                                           min_invisible_time_ms=1_000)
    async with running_server(TOPICS, config) as handle:
        async with grpc.aio.insecure_channel(handle.target) as channel:
            await body(g.MessagingServiceStub(channel), handle)


def test_query_route_gives_every_queue_with_endpoints_and_types():
    async def body(stub, handle):
        response = await stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="fifo-t")), metadata=meta())
        assert response.status.code == d.OK
        assert len(response.message_queues) == 4
        for mq in response.message_queues:
            assert mq.broker.id == 0 and mq.permission == d.READ_WRITE
            assert mq.broker.endpoints.scheme == d.IPv4
            assert mq.broker.endpoints.addresses[0].port == handle.port
            assert list(mq.accept_message_types) == [d.FIFO]
        missing = await stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="nope")), metadata=meta())
        assert missing.status.code == d.TOPIC_NOT_FOUND
        bad = await stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="bad topic")), metadata=meta())
        assert bad.status.code == d.ILLEGAL_TOPIC
    run(_with_stub(body))


def test_missing_client_id_is_a_status_not_a_grpc_error():
    async def body(stub, handle):
        response = await stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="normal")))
        assert response.status.code == d.CLIENT_ID_REQUIRED
        sent = await stub.SendMessage(s.SendMessageRequest(messages=[message()]))
        assert sent.status.code == d.CLIENT_ID_REQUIRED and len(sent.entries) == 1
    run(_with_stub(body))


def test_send_receive_ack_round_trip_with_digest_and_handles():
    async def body(stub, handle):
        sent = await stub.SendMessage(s.SendMessageRequest(messages=[message(body=b"payload", tag="t1", keys=["k1", "k2"])]),
                                      metadata=meta())
        assert sent.status.code == d.OK and len(sent.entries) == 1 and sent.entries[0].message_id
        responses = await receive_all(stub, receive_request("normal", handle.port))
        assert responses[0].WhichOneof("content") == "status" and responses[0].status.code == d.OK
        assert responses[-1].WhichOneof("content") == "delivery_timestamp"
        messages = [r.message for r in responses if r.WhichOneof("content") == "message"]
        assert len(messages) == 1
        got = messages[0].system_properties
        assert got.body_encoding == d.IDENTITY and got.message_id == sent.entries[0].message_id
        assert got.body_digest.checksum == format(zlib.crc32(b"payload"), "08X")
        assert got.delivery_attempt == 1 and got.receipt_handle and got.tag == "t1" and list(got.keys) == ["k1", "k2"]
        assert got.HasField("store_timestamp")
        ack = await stub.AckMessage(s.AckMessageRequest(
            group=d.Resource(name="g1"), topic=d.Resource(name="normal"),
            entries=[s.AckMessageEntry(message_id=got.message_id, receipt_handle=got.receipt_handle)]), metadata=meta())
        assert ack.status.code == d.OK
        again = await stub.AckMessage(s.AckMessageRequest(
            group=d.Resource(name="g1"), topic=d.Resource(name="normal"),
            entries=[s.AckMessageEntry(message_id=got.message_id, receipt_handle=got.receipt_handle)]), metadata=meta())
        assert again.status.code == d.INVALID_RECEIPT_HANDLE
    run(_with_stub(body))


def test_empty_receive_is_message_not_found_before_the_deadline():
    async def body(stub, handle):
        responses = await receive_all(stub, receive_request("normal", handle.port, poll_s=1), timeout=3)
        assert [r.status.code for r in responses] == [d.MESSAGE_NOT_FOUND]
    run(_with_stub(body))


def test_receive_with_too_little_deadline_is_illegal_polling_time():
    async def body(stub, handle):
        responses = await receive_all(stub, receive_request("normal", handle.port, poll_s=1), timeout=0.4)
        assert [r.status.code for r in responses] == [d.ILLEGAL_POLLING_TIME]
    run(_with_stub(body))


def test_change_invisible_duration_returns_a_new_handle_and_redelivers_with_attempt_two():
    async def body(stub, handle):
        await stub.SendMessage(s.SendMessageRequest(messages=[message()]), metadata=meta())
        first = [r.message for r in await receive_all(stub, receive_request("normal", handle.port)) if r.HasField("message")][0]
        change = await stub.ChangeInvisibleDuration(s.ChangeInvisibleDurationRequest(
            group=d.Resource(name="g1"), topic=d.Resource(name="normal"), receipt_handle=first.system_properties.receipt_handle,
            invisible_duration=duration_pb2.Duration(seconds=0), message_id=first.system_properties.message_id), metadata=meta())
        assert change.status.code == d.OK and change.receipt_handle
        assert change.receipt_handle != first.system_properties.receipt_handle
        second = [r.message for r in await receive_all(stub, receive_request("normal", handle.port)) if r.HasField("message")]
        assert second[0].system_properties.delivery_attempt == 2
        assert second[0].system_properties.receipt_handle != change.receipt_handle
    run(_with_stub(body))


def test_change_invisible_with_garbage_handle_echoes_it_with_invalid_receipt_handle():
    async def body(stub, handle):
        change = await stub.ChangeInvisibleDuration(s.ChangeInvisibleDurationRequest(
            group=d.Resource(name="g1"), topic=d.Resource(name="normal"), receipt_handle="garbage",
            invisible_duration=duration_pb2.Duration(seconds=5), message_id="01AB"), metadata=meta())
        assert change.status.code == d.INVALID_RECEIPT_HANDLE and change.receipt_handle == "garbage"
    run(_with_stub(body))


def test_transaction_commit_makes_the_message_visible():
    async def body(stub, handle):
        sent = await stub.SendMessage(s.SendMessageRequest(messages=[message("tx-t", message_type=d.TRANSACTION)]),
                                      metadata=meta())
        entry = sent.entries[0]
        assert sent.status.code == d.OK and entry.transaction_id
        end = await stub.EndTransaction(s.EndTransactionRequest(
            topic=d.Resource(name="tx-t"), message_id=entry.message_id, transaction_id=entry.transaction_id,
            resolution=d.COMMIT, source=d.SOURCE_CLIENT), metadata=meta())
        assert end.status.code == d.OK
        got = [r for r in await receive_all(stub, receive_request("tx-t", handle.port)) if r.HasField("message")]
        assert got[0].message.system_properties.message_id == entry.message_id
        bad = await stub.EndTransaction(s.EndTransactionRequest(
            topic=d.Resource(name="tx-t"), message_id=entry.message_id, transaction_id="",
            resolution=d.COMMIT), metadata=meta())
        assert bad.status.code == d.INVALID_TRANSACTION_ID
    run(_with_stub(body))


def test_delay_send_returns_recall_handle_and_recall_answers_the_message_id():
    async def body(stub, handle):
        import time
        msg = message("delay-t", message_type=d.DELAY)
        msg.system_properties.delivery_timestamp.seconds = int(time.time()) + 3600
        sent = await stub.SendMessage(s.SendMessageRequest(messages=[msg]), metadata=meta())
        assert sent.status.code == d.OK and sent.entries[0].recall_handle
        recalled = await stub.RecallMessage(s.RecallMessageRequest(topic=d.Resource(name="delay-t"),
                                                                   recall_handle=sent.entries[0].recall_handle), metadata=meta())
        assert recalled.status.code == d.OK and recalled.message_id == sent.entries[0].message_id
    run(_with_stub(body))


def test_query_assignment_one_per_broker_for_normal_groups_and_per_queue_for_fifo():
    async def body(stub, handle):
        normal = await stub.QueryAssignment(s.QueryAssignmentRequest(topic=d.Resource(name="normal"), group=d.Resource(name="g1")),
                                            metadata=meta())
        assert normal.status.code == d.OK
        assert [a.message_queue.id for a in normal.assignments] == [-1]
        assert normal.assignments[0].message_queue.broker.endpoints.addresses[0].port == handle.port
        fifo = await stub.QueryAssignment(s.QueryAssignmentRequest(topic=d.Resource(name="fifo-t"), group=d.Resource(name="fifo-g")),
                                          metadata=meta())
        assert sorted(a.message_queue.id for a in fifo.assignments) == [0, 1, 2, 3]
    run(_with_stub(body))


def test_unused_rpcs_answer_not_implemented():
    async def body(stub, handle):
        assert (await stub.UpdateOffset(s.UpdateOffsetRequest(), metadata=meta())).status.code == d.NOT_IMPLEMENTED
        assert (await stub.GetOffset(s.GetOffsetRequest(), metadata=meta())).status.code == d.NOT_IMPLEMENTED
        pulled = [r async for r in stub.PullMessage(s.PullMessageRequest(), metadata=meta())]
        assert [r.status.code for r in pulled] == [d.NOT_IMPLEMENTED]
    run(_with_stub(body))


def test_query_offset_answers_min_max_and_by_time_and_refuses_bad_requests():
    async def body(stub, handle):
        for index in range(3):
            sent = await stub.SendMessage(s.SendMessageRequest(messages=[message(body=b"x%d" % index)]), metadata=meta())
            assert sent.status.code == d.OK
        ends = []  # the fake broker round-robins over 4 queues
        for queue_id in range(4):
            request = s.QueryOffsetRequest(message_queue=queue("normal", handle.port, qid=queue_id), query_offset_policy=d.END)
            ends.append((await stub.QueryOffset(request, metadata=meta())).offset)
        assert sum(ends) == 3
        begin = await stub.QueryOffset(s.QueryOffsetRequest(message_queue=queue("normal", handle.port, qid=0),
                                                            query_offset_policy=d.BEGINNING), metadata=meta())
        assert begin.status.code == d.OK and begin.offset == 0
        late = s.QueryOffsetRequest(message_queue=queue("normal", handle.port, qid=0), query_offset_policy=d.TIMESTAMP)
        late.timestamp.FromMilliseconds(2**41)
        assert (await stub.QueryOffset(late, metadata=meta())).offset == ends[0]
        bad = [s.QueryOffsetRequest(),  # no queue
               s.QueryOffsetRequest(message_queue=queue("normal", handle.port, qid=0), query_offset_policy=d.TIMESTAMP),
               s.QueryOffsetRequest(message_queue=queue("normal", handle.port, qid=-1), query_offset_policy=d.END),
               s.QueryOffsetRequest(message_queue=queue("normal", handle.port, broker="bad name!", qid=0)),
               s.QueryOffsetRequest(message_queue=queue("normal", handle.port, qid=0), query_offset_policy=7)]
        for request in bad:
            assert (await stub.QueryOffset(request, metadata=meta())).status.code == d.BAD_REQUEST, request
        unknown = s.QueryOffsetRequest(message_queue=queue("nope", handle.port, qid=0), query_offset_policy=d.END)
        assert (await stub.QueryOffset(unknown, metadata=meta())).status.code == d.TOPIC_NOT_FOUND
    run(_with_stub(body))


def test_heartbeat_and_termination_are_ok():
    async def body(stub, handle):
        hb = await stub.Heartbeat(s.HeartbeatRequest(client_type=d.PRODUCER), metadata=meta("c@9"))
        assert hb.status.code == d.OK
        bye = await stub.NotifyClientTermination(s.NotifyClientTerminationRequest(), metadata=meta("c@9"))
        assert bye.status.code == d.OK
    run(_with_stub(body))
