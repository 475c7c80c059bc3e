"""Arbitrary and truncated bytes to every service we serve, through real servers on loopback.

One real container (client protocol, health, admin, HaService.Locate, embedded nameserver)
and one real controller run in this process, so the test sees their log records and metrics.
For every service, hypothesis sends garbage to each of its methods; a request that does not
parse must get INVALID_ARGUMENT naming the method (the client protocol: its own BAD_REQUEST
status in the response), be counted, and log no traceback; well-formed calls still succeed.
"""
from __future__ import annotations

import time

import grpc
import pytest
from grpc_health.v1 import health_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proto import admin_pb2, controller_pb2, ha_pb2, messaging_definition_pb2, messaging_service_pb2, nameserver_pb2
from services.metrics import REGISTRY
from tests.support.bad_bytes import CLIENT_METADATA, Method, call, check_answer, methods_of, parses, payloads
from tests.support.container_process import free_port
from tests.support.inprocess_container import InProcessContainer, InProcessController, Tracebacks

pytestmark = pytest.mark.integration
EXAMPLES = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                            HealthCheck.too_slow])


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-requests")
    broker_port = free_port()  # broker-a's own endpoint (services/messaging/broker_port.py)
    container = InProcessContainer(root / "container", brokers=[{"brokerName": "broker-a", "listenPort": broker_port}])
    controller = InProcessController(root / "controller", free_port())
    channels = {"client": grpc.insecure_channel(container.client), "admin": grpc.insecure_channel(container.admin),
                "broker": grpc.insecure_channel(f"127.0.0.1:{broker_port}"),
                "namesrv": grpc.insecure_channel(container.namesrv), "controller": grpc.insecure_channel(controller.address)}
    yield container, controller, channels
    for channel in channels.values():
        channel.close()
    controller.stop()
    container.stop()


def bad_count(method: Method) -> float:
    service, name = method.path.lstrip("/").split("/")
    return REGISTRY.get_sample_value("relaymq_bad_requests_total", {"service": service, "method": name}) or 0.0


def fuzz(channel: grpc.Channel, methods: list[Method], status_in_response: bool = False, metadata=()):
    """Run hypothesis over (method, bytes) and return the log records with tracebacks."""
    started = time.monotonic()
    with Tracebacks() as seen:
        @EXAMPLES
        @given(st.sampled_from(methods).flatmap(lambda m: st.tuples(st.just(m), payloads(m))))
        def one(case):
            method, raw = case
            before = bad_count(method)
            # a well-formed Watch or long poll waits: give it half a second (it ends DEADLINE_EXCEEDED)
            outcome = call(channel, method, raw, timeout_s=0.5 if method.response_streaming else 3.0, metadata=metadata)
            check_answer(method, raw, outcome, status_in_response)
            assert bad_count(method) == before + (0 if parses(method, raw) else 1)
        one()
    assert not seen.records, "tracebacks logged:\n" + "\n".join(r.getMessage() for r in seen.records[:5])
    lines = [w for w in seen.warnings if w.startswith("bad request from")]
    assert len(lines) <= 1 + (time.monotonic() - started) / 10, lines  # one per peer per 10 s (the default)
    return seen


def unary(channel: grpc.Channel, path: str, request, response_type, metadata=()):
    raw = channel.unary_unary(path)(request.SerializeToString(), timeout=10, metadata=metadata)
    return response_type.FromString(raw)


def test_client_protocol(servers):
    container, _, channels = servers
    nosuch = messaging_definition_pb2.Resource(name="nosuch")
    examples = {"ReceiveMessage": messaging_service_pb2.ReceiveMessageRequest(
        group=nosuch, message_queue=messaging_definition_pb2.MessageQueue(topic=nosuch))}
    methods = methods_of(messaging_service_pb2, "MessagingService", examples)
    fuzz(channels["client"], methods, status_in_response=True, metadata=CLIENT_METADATA)
    reply = unary(channels["client"], "/apache.rocketmq.v2.MessagingService/Heartbeat",
                  messaging_service_pb2.HeartbeatRequest(), messaging_service_pb2.HeartbeatResponse, CLIENT_METADATA)
    assert reply.status.code == 20000


def test_client_protocol_on_the_brokers_own_endpoint(servers):
    _, _, channels = servers
    nosuch = messaging_definition_pb2.Resource(name="nosuch")
    examples = {"ReceiveMessage": messaging_service_pb2.ReceiveMessageRequest(
        group=nosuch, message_queue=messaging_definition_pb2.MessageQueue(topic=nosuch))}
    methods = methods_of(messaging_service_pb2, "MessagingService", examples)
    fuzz(channels["broker"], methods, status_in_response=True, metadata=CLIENT_METADATA)
    reply = unary(channels["broker"], "/apache.rocketmq.v2.MessagingService/Heartbeat",
                  messaging_service_pb2.HeartbeatRequest(), messaging_service_pb2.HeartbeatResponse, CLIENT_METADATA)
    assert reply.status.code == 20000


def test_health_on_both_endpoints(servers):
    _, _, channels = servers
    methods = methods_of(health_pb2, "Health")
    for name in ("client", "admin"):
        fuzz(channels[name], methods)
        reply = unary(channels[name], "/grpc.health.v1.Health/Check", health_pb2.HealthCheckRequest(),
                      health_pb2.HealthCheckResponse)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_admin(servers):
    _, _, channels = servers
    fuzz(channels["admin"], methods_of(admin_pb2, "BrokerAdmin"))
    reply = unary(channels["admin"], "/relaymq.internal.v1.BrokerAdmin/ListTopics", admin_pb2.AdminListTopicsRequest(),
                  admin_pb2.AdminListTopicsResponse)
    assert [b.broker_name for b in reply.brokers] == ["broker-a"]


def test_ha_locate(servers):
    container, _, channels = servers
    fuzz(channels["admin"], methods_of(ha_pb2, "HaService"))
    reply = unary(channels["admin"], "/relaymq.internal.v1.HaService/Locate", ha_pb2.LocateRequest(broker_name="broker-a"),
                  ha_pb2.LocateResponse)
    assert reply.ha_port == container.container.ports["ha"]


def test_nameserver(servers):
    _, _, channels = servers
    fuzz(channels["namesrv"], methods_of(nameserver_pb2, "NameserverService"))
    reply = unary(channels["namesrv"], "/relaymq.internal.v1.NameserverService/GetClusterInfo",
                  nameserver_pb2.NameserverGetClusterInfoRequest(), nameserver_pb2.NameserverGetClusterInfoResponse)
    assert "broker-a" in str(reply)


def test_controller(servers):
    _, controller, channels = servers
    methods = methods_of(controller_pb2, "ControllerService") + methods_of(controller_pb2, "RaftTransport")
    fuzz(channels["controller"], [m for m in methods if not m.response_streaming])
    reply = unary(channels["controller"], "/relaymq.internal.v1.ControllerService/GetControllerMetadata",
                  controller_pb2.GetControllerMetadataRequest(), controller_pb2.GetControllerMetadataResponse)
    assert reply.group == controller.config.group and reply.peers


def test_oversized_requests_get_resource_exhausted(servers):
    _, _, channels = servers
    too_big = b"\x0a" + b"\xff\xff\xff\x7f" + b"x" * (64 * 1024 * 1024 + 16)  # beyond adminMaxInboundMessageSize
    outcome = call(channels["admin"], methods_of(admin_pb2, "BrokerAdmin")[0], too_big, timeout_s=30)
    assert outcome.code is grpc.StatusCode.RESOURCE_EXHAUSTED, outcome
