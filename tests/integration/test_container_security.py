"""A real container with its TLS client port and authentication on, through our own stubs.

One container for the module: plaintext and TLS client ports, ``authenticationEnabled``
with an accounts file; a self-signed certificate for 127.0.0.1 made by openssl.
"""
from __future__ import annotations

import asyncio
import datetime
import time
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from metadata.authentication import authorization_value
from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from proto import messaging_service_pb2_grpc as g
from tests.integration.test_container_lifecycle import relaymq
from tests.integration.test_messaging_rpcs import message
from tests.support.container_process import ContainerProcess, free_port
from tests.support.tls import self_signed_certificate

pytestmark = pytest.mark.integration
ACCESS_KEY, SECRET_KEY = "relay-ak", "relay-sk-0123"
TOPIC, GROUP = "secure-topic", "secure-group"
TIMEOUT_S = 20  # generous: the 2-core machine may be busy with other work


def local_date_time(shift_s: int = 0) -> str:
    """What the official clients send: local time, suffixed Z."""
    return (datetime.datetime.now() + datetime.timedelta(seconds=shift_s)).strftime("%Y%m%dT%H%M%SZ")


def signed(access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY, date_time: str | None = None, client_id: str = "sec@1"):
    date_time = date_time or local_date_time()
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-date-time", date_time),
            ("authorization", authorization_value(access_key, secret_key, date_time)))


def write_accounts(folder) -> None:
    (folder / "accounts.toml").write_text(f'[[accounts]]\naccessKey = "{ACCESS_KEY}"\nsecretKey = "{SECRET_KEY}"\n'
                                          '[[accounts]]\naccessKey = "other"\nsecretKey = "other-secret"\n')


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("secured")
    cert, key = self_signed_certificate(tmp / "data")
    write_accounts(tmp / "data")
    tls_port = free_port()
    process = ContainerProcess(tmp / "data", extra={
        "grpcTlsPort": tls_port, "tlsServerCertPath": cert.name, "tlsServerKeyPath": key.name,  # relative to the config file
        "authenticationEnabled": True, "authenticationAccountsFile": "accounts.toml",
        "minInvisibleTimeMillsForRecv": 1000, "grpcClientConsumerMinLongPollingTimeoutMillis": 1000})
    process.tls_port, process.cert = tls_port, cert
    process.start()
    try:
        deadline = time.monotonic() + 30
        while process.admin("update-topic", "--topic", TOPIC, "--type", "NORMAL", "--namesrv", process.namesrv).returncode:
            assert time.monotonic() < deadline, "topic not created"
            time.sleep(0.2)
        yield process
    finally:
        process.kill()


def tls_channel(process) -> grpc.aio.Channel:
    credentials = grpc.ssl_channel_credentials(root_certificates=process.cert.read_bytes())
    return grpc.aio.secure_channel(f"127.0.0.1:{process.tls_port}", credentials)


def endpoints(port: int) -> d.Endpoints:
    return d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host="127.0.0.1", port=port)])


async def route_until_ready(stub, port: int) -> s.QueryRouteResponse:
    deadline = time.monotonic() + 10
    while True:
        response = await stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=TOPIC), endpoints=endpoints(port)),
                                         metadata=signed(), timeout=TIMEOUT_S)
        if response.status.code == d.OK and response.message_queues:
            return response
        assert time.monotonic() < deadline, response.status
        await asyncio.sleep(0.1)


def test_tls_port_serves_send_receive_and_ack_and_routes_name_the_tls_port(secured):
    async def body():
        async with tls_channel(secured) as channel:
            stub = g.MessagingServiceStub(channel)
            route = await route_until_ready(stub, secured.tls_port)
            assert {q.broker.endpoints.addresses[0].port for q in route.message_queues} == {secured.tls_port}
            assignment = await stub.QueryAssignment(s.QueryAssignmentRequest(
                topic=d.Resource(name=TOPIC), group=d.Resource(name=GROUP), endpoints=endpoints(secured.tls_port)),
                metadata=signed(), timeout=TIMEOUT_S)
            assert assignment.status.code == d.OK and assignment.assignments
            assert {a.message_queue.broker.endpoints.addresses[0].port for a in assignment.assignments} == {secured.tls_port}
            body_bytes = f"over tls {uuid.uuid4().hex}".encode()
            sent = await stub.SendMessage(s.SendMessageRequest(messages=[message(TOPIC, body=body_bytes)]), metadata=signed(), timeout=TIMEOUT_S)
            assert sent.status.code == d.OK, sent.status
            queue = route.message_queues[0]
            request = s.ReceiveMessageRequest(
                group=d.Resource(name=GROUP), message_queue=d.MessageQueue(topic=queue.topic, id=-1, broker=queue.broker),
                filter_expression=d.FilterExpression(type=d.TAG, expression="*"), batch_size=16, auto_renew=False)
            request.invisible_duration.seconds = 30
            request.long_polling_timeout.seconds = 3
            got = [r.message async for r in stub.ReceiveMessage(request, metadata=signed(), timeout=TIMEOUT_S)
                   if r.WhichOneof("content") == "message"]
            assert [m.body for m in got] == [body_bytes]
            entry = s.AckMessageEntry(message_id=got[0].system_properties.message_id,
                                      receipt_handle=got[0].system_properties.receipt_handle)
            acked = await stub.AckMessage(s.AckMessageRequest(group=d.Resource(name=GROUP), topic=d.Resource(name=TOPIC),
                                                              entries=[entry]), metadata=signed(), timeout=TIMEOUT_S)
            assert acked.status.code == d.OK
            health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=TIMEOUT_S)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
    asyncio.run(body())


def test_plaintext_port_still_routes_to_the_plaintext_port(secured):
    async def body():
        async with grpc.aio.insecure_channel(secured.endpoint) as channel:
            route = await route_until_ready(g.MessagingServiceStub(channel), secured.client_port)
            assert {q.broker.endpoints.addresses[0].port for q in route.message_queues} == {secured.client_port}
    asyncio.run(body())


def test_plaintext_clients_cannot_speak_to_the_tls_port(secured):
    async def body():
        async with grpc.aio.insecure_channel(f"127.0.0.1:{secured.tls_port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)
            assert caught.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    asyncio.run(body())


def _refusals():
    now = local_date_time()
    return [
        ((("x-mq-client-id", "sec@1"),), "authorization metadata is missing"),
        (signed(secret_key="wrong-secret"), "signature does not match"),
        (signed(access_key="stranger"), "access key is unknown"),
        (signed(access_key="", secret_key=""), "no access key"),
        (signed(access_key="other", secret_key=SECRET_KEY), "signature does not match"),
        (signed(date_time=local_date_time(-3600)), "too far from the server's time"),
        ((("x-mq-client-id", "sec@1"), ("x-mq-date-time", now), ("authorization", "MQv2-HMAC-SHA1 Credential=x")), "malformed"),
    ]


def test_unauthenticated_calls_get_unauthorized_statuses(secured):
    async def body():
        async with grpc.aio.insecure_channel(secured.endpoint) as channel:
            stub = g.MessagingServiceStub(channel)
            await route_until_ready(stub, secured.client_port)
            for metadata, reason in _refusals():
                route = await stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=TOPIC)), metadata=metadata, timeout=TIMEOUT_S)
                assert route.status.code == d.UNAUTHORIZED and reason in route.status.message, (reason, route.status)
            sent = await stub.SendMessage(s.SendMessageRequest(messages=[message(TOPIC)]), metadata=signed(secret_key="x"), timeout=TIMEOUT_S)
            assert sent.status.code == d.UNAUTHORIZED and [e.status.code for e in sent.entries] == [d.UNAUTHORIZED]
            request = s.ReceiveMessageRequest(group=d.Resource(name=GROUP), message_queue=d.MessageQueue(topic=d.Resource(name=TOPIC)))
            replies = [r async for r in stub.ReceiveMessage(request, metadata=signed(secret_key="x"), timeout=TIMEOUT_S)]
            assert [r.status.code for r in replies] == [d.UNAUTHORIZED]
            # The stream is refused as it opens. A client that writes a command at the same time
            # races the refusal inside gRPC (its write fails as INTERNAL), so this one only reads.
            telemetry = stub.Telemetry(metadata=signed(secret_key="x"), timeout=TIMEOUT_S)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await telemetry.read()
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            upper = signed()
            date_time = dict(upper)["x-mq-date-time"]
            shouting = authorization_value(ACCESS_KEY, SECRET_KEY, date_time).rsplit("=", 1)
            header = f"{shouting[0]}={shouting[1].upper()}"
            ok = await stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=TOPIC)), timeout=TIMEOUT_S,
                                       metadata=(("x-mq-client-id", "sec@1"), ("x-mq-date-time", date_time), ("authorization", header)))
            assert ok.status.code == d.OK, "hex is compared case-insensitively"
    asyncio.run(body())


@pytest.mark.parametrize("case, key", [
    ("missing-cert", "tlsServerCertPath"),
    ("bad-pem", "tlsServerCertPath"),
    ("no-accounts", "authenticationAccountsFile"),
    ("bad-accounts", "secretKey"),
])
def test_bad_security_config_is_one_line_naming_file_and_key(tmp_path, case, key):
    cert, private_key = self_signed_certificate(tmp_path)
    (tmp_path / "bad.pem").write_text("-----BEGIN CERTIFICATE-----\nbm9wZQ==\n-----END CERTIFICATE-----\n")
    (tmp_path / "accounts.toml").write_text('[[accounts]]\naccessKey = "a"\n')
    extra = {"missing-cert": {"grpcTlsPort": free_port(), "tlsServerCertPath": str(tmp_path / "nope.pem"), "tlsServerKeyPath": str(private_key)},
             "bad-pem": {"grpcTlsPort": free_port(), "tlsServerCertPath": str(tmp_path / "bad.pem"), "tlsServerKeyPath": str(private_key)},
             "no-accounts": {"authenticationEnabled": True},
             "bad-accounts": {"authenticationEnabled": True, "authenticationAccountsFile": str(tmp_path / "accounts.toml")}}[case]
    config = ContainerProcess(tmp_path / "data", extra=extra).write_config()
    result = relaymq("container", "-c", str(config))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and "Traceback" not in result.stderr, result.stderr
    assert not (tmp_path / "data" / "broker-a-0").exists()
