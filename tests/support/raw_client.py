"""A minimal synchronous RocketMQ 5 gRPC client over our own stubs, for tests and benches.

It sends what the official clients send (client id metadata, one message per SendMessage,
server-streamed ReceiveMessage) without their background machinery.
"""
from __future__ import annotations

import time
import uuid

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from proto import messaging_service_pb2_grpc as g


class RawClient:
    def __init__(self, endpoint: str, client_id: str | None = None):
        self.endpoint = endpoint
        self.channel = grpc.insecure_channel(endpoint, options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)])
        self.stub = g.MessagingServiceStub(self.channel)
        self.metadata = (("x-mq-client-id", client_id or f"test@{uuid.uuid4().hex[:8]}"), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "GRPC_V2"))

    def close(self) -> None:
        self.channel.close()

    def endpoints(self) -> d.Endpoints:
        host, port = self.endpoint.rsplit(":", 1)
        return d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host=host, port=int(port))])

    def consumer_settings(self, group: str, topic: str, timeout: float = 10) -> d.Subscription:
        """The subscription settings (fifo, long polling) a push consumer of ``group`` is given
        on its Telemetry stream, as the official clients configure themselves from."""
        settings = d.Settings(client_type=d.PUSH_CONSUMER, subscription=d.Subscription(
            group=d.Resource(name=group), subscriptions=[d.SubscriptionEntry(topic=d.Resource(name=topic))]))
        call = self.stub.Telemetry(iter([s.TelemetryCommand(settings=settings)]), metadata=self.metadata, timeout=timeout)
        reply = next(iter(call))
        call.cancel()
        assert reply.status.code == d.OK, reply.status
        return reply.settings.subscription

    def route(self, topic: str, timeout: float = 5) -> s.QueryRouteResponse:
        return self.stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=topic), endpoints=self.endpoints()), metadata=self.metadata, timeout=timeout)

    def send(self, topic: str, body: bytes, tag: str | None = None, message_type: int = d.NORMAL, group: str | None = None,
             timeout: float = 10, keys: tuple[str, ...] = ()) -> s.SendMessageResponse:
        props = d.SystemProperties(message_id=uuid.uuid4().hex.upper()[:34], message_type=message_type, body_encoding=d.IDENTITY,
                                   born_timestamp=timestamp_pb2.Timestamp(seconds=int(time.time())), born_host="127.0.0.1")
        if tag is not None:
            props.tag = tag
        if group is not None:
            props.message_group = group
        props.keys.extend(keys)
        message = d.Message(topic=d.Resource(name=topic), body=body, system_properties=props)
        return self.stub.SendMessage(s.SendMessageRequest(messages=[message]), metadata=self.metadata, timeout=timeout)

    def receive(self, group: str, topic: str, broker_name: str, batch: int = 32, invisible_s: int = 30, poll_s: int = 5) -> list[d.Message]:
        request = s.ReceiveMessageRequest(
            group=d.Resource(name=group),
            message_queue=d.MessageQueue(topic=d.Resource(name=topic), id=-1, broker=d.Broker(name=broker_name, id=0, endpoints=self.endpoints())),
            filter_expression=d.FilterExpression(type=d.TAG, expression="*"), batch_size=batch,
            invisible_duration=duration_pb2.Duration(seconds=invisible_s), auto_renew=False,
            long_polling_timeout=duration_pb2.Duration(seconds=poll_s))
        messages = []
        for response in self.stub.ReceiveMessage(request, metadata=self.metadata, timeout=poll_s + 5):
            if response.WhichOneof("content") == "message":
                messages.append(response.message)
        return messages

    def ack(self, group: str, topic: str, message: d.Message, timeout: float = 5) -> s.AckMessageResponse:
        entry = s.AckMessageEntry(message_id=message.system_properties.message_id, receipt_handle=message.system_properties.receipt_handle)
        return self.stub.AckMessage(s.AckMessageRequest(group=d.Resource(name=group), topic=d.Resource(name=topic), entries=[entry]),
                                    metadata=self.metadata, timeout=timeout)
