"""Telemetry over real gRPC, plus failure paths that must stay statuses (never crashed streams)."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from metadata.message import MessageType
from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from proto import messaging_service_pb2_grpc as g
from tests.integration.test_messaging_rpcs import message, meta, receive_all, receive_request, run
from tests.support.messaging_server import running_server

pytestmark = pytest.mark.integration
TOPICS = {"tx-t": MessageType.TRANSACTION, "normal": MessageType.NORMAL}


async def _stub_session(body):
    async with running_server(TOPICS) as handle:
        async with grpc.aio.insecure_channel(handle.target) as channel:
            await body(g.MessagingServiceStub(channel), handle)


async def _poll(predicate, deadline_s=5.0):
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not predicate():
        assert loop.time() < end, "condition not reached before the deadline"
        await asyncio.sleep(0.01)


def producer_settings(topic="tx-t"):
    return s.TelemetryCommand(settings=d.Settings(client_type=d.PRODUCER, publishing=d.Publishing(topics=[d.Resource(name=topic)])))


def test_settings_answered_ok_and_stream_carries_orphan_checks():
    async def body(stub, handle):
        outgoing: asyncio.Queue = asyncio.Queue()

        async def requests():
            while (item := await outgoing.get()) is not None:
                yield item

        call = stub.Telemetry(requests(), metadata=meta("producer@1"))
        await outgoing.put(producer_settings())
        reply = await call.read()
        assert reply.status.code == d.OK and reply.settings.publishing.max_body_size == 4 * 1024 * 1024
        assert reply.settings.backoff_policy.WhichOneof("strategy") == "exponential_backoff"
        sent = await stub.SendMessage(s.SendMessageRequest(messages=[message("tx-t", message_type=d.TRANSACTION)]),
                                      metadata=meta("producer@1"))
        handle.broker.check_after_ms = 0
        await _poll(lambda: handle.broker.check_orphans() > 0)
        pushed = await call.read()
        command = pushed.recover_orphaned_transaction_command
        assert command.transaction_id == sent.entries[0].transaction_id
        assert command.message.system_properties.message_id == sent.entries[0].message_id
        assert command.message.system_properties.body_encoding == d.IDENTITY
        await outgoing.put(producer_settings())  # the stream is still open: a second settings is answered
        assert (await call.read()).status.code == d.OK
        await outgoing.put(None)
        assert await call.read() == grpc.aio.EOF
    run(_stub_session(body))


def test_consumer_settings_carry_group_fifo_and_polling():
    async def body(stub, handle):
        settings = d.Settings(client_type=d.PUSH_CONSUMER, subscription=d.Subscription(
            group=d.Resource(name="fifo-g"), subscriptions=[d.SubscriptionEntry(topic=d.Resource(name="normal"))]))
        replies = [r async for r in stub.Telemetry(iter([s.TelemetryCommand(settings=settings)]), metadata=meta())]
        sub = replies[0].settings.subscription
        assert replies[0].status.code == d.OK and sub.fifo and sub.long_polling_timeout.seconds == 20
        assert replies[0].settings.backoff_policy.max_attempts == 2
    run(_stub_session(body))


def test_streams_without_settings_are_tolerated_and_bad_streams_fail_with_grpc_errors():
    async def body(stub, handle):
        empty = [r async for r in stub.Telemetry(iter([s.TelemetryCommand()]), metadata=meta())]
        assert empty == []
        # Refused as the stream opens: a concurrent write would race the refusal inside gRPC
        # (and fail as INTERNAL), so this call only reads.
        with pytest.raises(grpc.aio.AioRpcError) as missing_id:
            await stub.Telemetry().read()
        assert missing_id.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as malformed:
            _ = [r async for r in stub.Telemetry(iter([s.TelemetryCommand(settings=d.Settings(client_type=d.PRODUCER))]),
                                                 metadata=meta())]
        assert malformed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    run(_stub_session(body))


def test_a_broker_bug_becomes_internal_error_not_a_crashed_call():
    async def body(stub, handle):
        async def broken(*args, **kwargs):
            raise ValueError("boom")

        handle.broker.send = broken
        handle.broker.receive = broken
        sent = await stub.SendMessage(s.SendMessageRequest(messages=[message("normal")]), metadata=meta())
        assert sent.status.code == d.INTERNAL_ERROR and len(sent.entries) == 1
        got = await receive_all(stub, receive_request("normal", handle.port))
        assert [r.status.code for r in got] == [d.INTERNAL_ERROR]
    run(_stub_session(body))


def test_bad_requests_over_the_wire_are_statuses():
    async def body(stub, handle):
        big = await stub.SendMessage(s.SendMessageRequest(messages=[message("normal", body=b"x" * (4 * 1024 * 1024))]),
                                     metadata=meta())
        assert big.status.code == d.OK  # a 4 MiB body passes grpc's own limit and ours
        too_big = await stub.SendMessage(s.SendMessageRequest(messages=[message("normal", body=b"x" * (4 * 1024 * 1024 + 1))]),
                                         metadata=meta())
        assert too_big.status.code == d.MESSAGE_BODY_TOO_LARGE
        tag = await stub.SendMessage(s.SendMessageRequest(messages=[message("normal", tag="a|b")]), metadata=meta())
        assert tag.status.code == d.ILLEGAL_MESSAGE_TAG
        wrong_type = await stub.SendMessage(s.SendMessageRequest(messages=[message("normal", message_type=d.TRANSACTION)]),
                                            metadata=meta())
        assert wrong_type.status.code == d.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
        ack = await stub.AckMessage(s.AckMessageRequest(group=d.Resource(name="g"), topic=d.Resource(name="normal"),
                                                        entries=[s.AckMessageEntry(message_id="01", receipt_handle="zz")]),
                                    metadata=meta())
        assert ack.status.code == d.INVALID_RECEIPT_HANDLE
        unknown_broker = await stub.AckMessage(s.AckMessageRequest(
            group=d.Resource(name="g"), topic=d.Resource(name="normal"),
            entries=[s.AckMessageEntry(message_id="01", receipt_handle="other@h1")]), metadata=meta())
        assert unknown_broker.status.code == d.INVALID_RECEIPT_HANDLE
        dlq = await stub.ForwardMessageToDeadLetterQueue(s.ForwardMessageToDeadLetterQueueRequest(), metadata=meta())
        assert dlq.status.code == d.ILLEGAL_CONSUMER_GROUP
        assignment = await stub.QueryAssignment(s.QueryAssignmentRequest(topic=d.Resource(name="normal")), metadata=meta())
        assert assignment.status.code == d.ILLEGAL_CONSUMER_GROUP
        recv = await receive_all(stub, s.ReceiveMessageRequest(), timeout=5)
        assert [r.status.code for r in recv] == [d.ILLEGAL_CONSUMER_GROUP]
    run(_stub_session(body))
