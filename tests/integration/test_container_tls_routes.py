"""Two real containers with TLS ports behind one standalone nameserver: routes name TLS
endpoints across containers.

Container A hosts broker-a, container B hosts broker-b; the topic lives on broker-b only.
A client that connected to A over TLS must be sent to B's TLS port (it reuses its scheme
for every endpoint), and a plaintext client to B's plaintext port.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid

import grpc
import pytest

from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from proto import messaging_service_pb2_grpc as g
from tests.integration.test_messaging_rpcs import message
from tests.support.container_process import ContainerProcess, free_port
from tests.support.nameserver_process import start_nameserver
from tests.support.tls import self_signed_certificate

pytestmark = pytest.mark.integration
TOPIC = "on-broker-b"
TIMEOUT_S = 20  # generous: the 2-core machine may be busy with other work
METADATA = (("x-mq-client-id", "tls-routes@1"), ("x-mq-language", "PYTHON"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls-routes")
    cert, key = self_signed_certificate(tmp / "tls")
    nameserver = start_nameserver(tmp / "namesrv")
    containers = []
    try:
        for name in ("broker-a", "broker-b"):
            tls_port = free_port()
            process = ContainerProcess(tmp / name, brokers=[{"brokerName": name}], embedded_namesrv=False,
                                       namesrv_port=nameserver.port,
                                       extra={"grpcTlsPort": tls_port, "tlsServerCertPath": str(cert),
                                              "tlsServerKeyPath": str(key)})
            process.tls_port = tls_port
            containers.append(process.start())
        result = containers[0].admin("update-topic", "--topic", TOPIC, "--broker", "broker-b", "--queues", "2",
                                     "--namesrv", nameserver.address)
        assert result.returncode == 0, result.stderr
        yield nameserver, containers[0], containers[1], cert
    finally:
        for process in containers:
            process.kill()
        nameserver.kill()


def tls_channel(port: int, cert) -> grpc.aio.Channel:
    credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials)


async def route_until_ready(stub) -> s.QueryRouteResponse:
    deadline = time.monotonic() + 15
    while True:
        response = await stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=TOPIC)), metadata=METADATA,
                                         timeout=TIMEOUT_S)
        if response.status.code == d.OK and response.message_queues:
            return response
        assert time.monotonic() < deadline, response.status
        await asyncio.sleep(0.1)


def endpoints_of(route: s.QueryRouteResponse) -> set[tuple[str, str, int]]:
    return {(q.broker.name, q.broker.endpoints.addresses[0].host, q.broker.endpoints.addresses[0].port)
            for q in route.message_queues}


def test_a_tls_route_from_container_a_names_container_bs_tls_port_and_a_send_through_it_succeeds(cluster):
    _, a, b, cert = cluster

    async def body():
        async with tls_channel(a.tls_port, cert) as channel:
            route = await route_until_ready(g.MessagingServiceStub(channel))
        assert endpoints_of(route) == {("broker-b", "127.0.0.1", b.tls_port)}
        queue = route.message_queues[0]
        async with tls_channel(queue.broker.endpoints.addresses[0].port, cert) as channel:
            stub = g.MessagingServiceStub(channel)
            sent = await stub.SendMessage(s.SendMessageRequest(messages=[message(TOPIC, body=uuid.uuid4().bytes)]),
                                          metadata=METADATA, timeout=TIMEOUT_S)
        assert sent.status.code == d.OK, sent.status
        assert [e.status.code for e in sent.entries] == [d.OK]
    asyncio.run(body())


def test_a_plaintext_route_from_container_a_names_container_bs_plaintext_port(cluster):
    _, a, b, _ = cluster

    async def body():
        async with grpc.aio.insecure_channel(a.endpoint) as channel:
            route = await route_until_ready(g.MessagingServiceStub(channel))
        assert endpoints_of(route) == {("broker-b", "127.0.0.1", b.client_port)}
    asyncio.run(body())


def test_admin_outputs_show_each_containers_tls_endpoint(cluster):
    nameserver, a, b, _ = cluster
    listed = a.admin("cluster-list", "--namesrv", nameserver.address, "--json")
    assert listed.returncode == 0, listed.stderr
    brokers = {m["brokerName"]: m for m in json.loads(listed.stdout)["brokers"]}
    assert {name: (m["clientEndpoint"], m["tlsClientEndpoint"]) for name, m in brokers.items()} == {
        "broker-a": (a.endpoint, f"127.0.0.1:{a.tls_port}"), "broker-b": (b.endpoint, f"127.0.0.1:{b.tls_port}")}
    route = a.admin("topic-route", "--topic", TOPIC, "--namesrv", nameserver.address, "--json")
    assert route.returncode == 0, route.stderr
    [group] = json.loads(route.stdout)["brokerDatas"]
    assert group["clientEndpoints"] == {"0": b.endpoint}
    assert group["tlsClientEndpoints"] == {"0": f"127.0.0.1:{b.tls_port}"}
    people = a.admin("topic-route", "--topic", TOPIC, "--namesrv", nameserver.address)
    assert people.returncode == 0 and "TLS ENDPOINT" in people.stdout and f"127.0.0.1:{b.tls_port}" in people.stdout
