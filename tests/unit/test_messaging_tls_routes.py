"""Routes by the caller's scheme: over TLS every queue names its container's TLS endpoint.

The servicer is called directly with fake contexts; ``auth_context`` is what grpc gives a
call that arrived over TLS.
"""
from __future__ import annotations

import asyncio
import logging

from metadata.message import MessageType
from metadata.topic_config import PERM_READ_WRITE
from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from scheduler.clock import ManualClock
from services.broker.api import QueueRoute
from services.messaging.client_registry import ClientRegistry
from services.messaging.config import MessagingConfig
from services.messaging.servicer import MessagingService

HERE, THERE, PLAIN_ONLY = ("10.0.0.1", 8081), ("10.0.0.2", 8081), ("10.0.0.3", 8081)
TLS = {HERE: ("10.0.0.1", 8443), THERE: ("10.0.0.2", 9443), PLAIN_ONLY: None}
BROKERS = {"broker-a": HERE, "broker-b": THERE, "broker-c": PLAIN_ONLY}


class Directory:
    """Two queues per broker; each broker's container with or without a TLS port."""

    def local_broker(self, name):
        return None

    def local_master_for_topic(self, topic):
        return None

    async def route(self, topic: str) -> list[QueueRoute]:
        return [QueueRoute(topic, q, name, 0, PERM_READ_WRITE, (MessageType.NORMAL,), endpoint, TLS[endpoint])
                for name, endpoint in BROKERS.items() for q in range(2)]


class Context:
    def __init__(self, tls: bool):
        self.tls = tls

    def invocation_metadata(self):
        return (("x-mq-client-id", "c@1"),)

    def auth_context(self):
        return {"transport_security_type": [b"ssl"]} if self.tls else {}


def service() -> MessagingService:
    config, clock = MessagingConfig(grpc_server_port=0), ManualClock()
    return MessagingService(Directory(), config, clock, ClientRegistry(config, clock))


def ports_by_broker(queues) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for queue in queues:
        found.setdefault(queue.broker.name, set()).add(queue.broker.endpoints.addresses[0].port)
    return found


def query_route(servicer: MessagingService, tls: bool) -> s.QueryRouteResponse:
    request = s.QueryRouteRequest(topic=d.Resource(name="T"))
    return asyncio.run(servicer.QueryRoute(request, Context(tls)))


def test_over_tls_every_broker_gets_the_tls_endpoint_of_its_own_container():
    reply = query_route(service(), tls=True)
    assert reply.status.code == d.OK
    assert ports_by_broker(reply.message_queues) == {"broker-a": {8443}, "broker-b": {9443}, "broker-c": {8081}}
    hosts = {q.broker.name: q.broker.endpoints.addresses[0].host for q in reply.message_queues}
    assert hosts == {"broker-a": "10.0.0.1", "broker-b": "10.0.0.2", "broker-c": "10.0.0.3"}


def test_plaintext_callers_get_plaintext_endpoints():
    reply = query_route(service(), tls=False)
    assert ports_by_broker(reply.message_queues) == {"broker-a": {8081}, "broker-b": {8081}, "broker-c": {8081}}


def test_query_assignment_over_tls_names_tls_endpoints_too():
    request = s.QueryAssignmentRequest(topic=d.Resource(name="T"), group=d.Resource(name="G"))
    reply = asyncio.run(service().QueryAssignment(request, Context(tls=True)))
    assert reply.status.code == d.OK
    assert ports_by_broker(a.message_queue for a in reply.assignments) == {
        "broker-a": {8443}, "broker-b": {9443}, "broker-c": {8081}}


def test_a_broker_without_a_tls_port_is_warned_about_once(caplog):
    servicer = service()
    with caplog.at_level(logging.WARNING, logger="services.messaging.servicer"):
        query_route(servicer, tls=True)
        query_route(servicer, tls=True)
        query_route(servicer, tls=False)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "broker-c" in warnings[0] and "10.0.0.3:8081" in warnings[0] and "grpcTlsPort" in warnings[0]
