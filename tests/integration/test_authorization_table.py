"""Every client RPC and every admin command against allow, deny, no policy, a disabled user, a
wrong secret and no signature, over real gRPC on loopback (the messaging servicer over the
fake broker; the admin gate in front of the real AclAdmin and a BrokerAdmin that answers
UNIMPLEMENTED once let through).  One server of each, one event loop, a few hundred calls.
"""
from __future__ import annotations

import asyncio
import dataclasses
import datetime
import uuid

import grpc
import pytest
from google.protobuf import duration_pb2

from metadata.authentication import authorization_value
from metadata.message import MessageType
from proto import acl_admin_pb2, acl_admin_pb2_grpc, admin_pb2, admin_pb2_grpc
from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from proto import messaging_service_pb2_grpc as g
from scheduler.clock import SystemClock
from services import metrics
from services.access.acl_admin import add_acl_admin_service
from services.access.acl_store import AclStore
from services.access.admin_gate import AdminGate
from services.messaging.access import ClientAccess
from services.messaging.config import MessagingConfig
from services.request_guard import GuardedServer, RequestGuard
from tests.support.messaging_server import running_server

pytestmark = pytest.mark.integration
TOPIC, GROUP, OTHER = "orders", "billing", "other"
ACL = '''
[[users]]
username = "admin"
password = "admin-secret"
userType = "Super"
[[users]]
username = "producer1"
password = "producer1-secret"
[[users]]
username = "consumer1"
password = "consumer1-secret"
[[users]]
username = "ops"
password = "ops-secret"
[[users]]
username = "denied"
password = "denied-secret"
[[users]]
username = "nopolicy"
password = "nopolicy-secret"
[[users]]
username = "gone"
password = "gone-secret"
userStatus = "disable"

[[acls]]
subject = "User:producer1"
[[acls.policies]]
resources = ["Topic:orders"]
actions = ["Pub"]
decision = "Allow"

[[acls]]
subject = "User:consumer1"
[[acls.policies]]
resources = ["Topic:orders", "Group:billing"]
actions = ["Sub"]
decision = "Allow"

[[acls]]
subject = "User:ops"
[[acls.policies]]
resources = ["Topic:orders", "Group:billing", "Cluster"]
actions = ["All"]
decision = "Allow"

[[acls]]
subject = "User:denied"
[[acls.policies]]
resources = ["Topic:orders", "Group:billing", "Cluster"]
actions = ["All"]
decision = "Deny"
[[acls.policies]]
resources = ["*"]
actions = ["All"]
decision = "Allow"
policyType = "Default"

[[acls]]
subject = "User:gone"
[[acls.policies]]
resources = ["*"]
actions = ["All"]
decision = "Allow"
'''


def signed(user: str | None, secret: str | None = None, client_id: str = "authz@1"):
    base = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))
    if user is None:
        return base
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return base + (("x-mq-date-time", now),
                   ("authorization", authorization_value(user, secret or f"{user}-secret", now)))


# (case, metadata, the outcome: "ok", or the refusal's code and a text it holds)
CASES = {
    "super": (signed("admin"), "ok"),
    "deny": (signed("denied"), (d.FORBIDDEN, "User:denied may not", "DENIED_BY_POLICY")),
    "no policy": (signed("nopolicy"), (d.FORBIDDEN, "User:nopolicy may not", "NO_MATCHING_POLICY")),
    "disabled": (signed("gone"), (d.UNAUTHORIZED, "User:gone is disabled")),
    "wrong secret": (signed("producer1", "not-the-secret"), (d.UNAUTHORIZED, "signature does not match")),
    "anonymous": (signed(None), (d.UNAUTHORIZED, "authorization metadata is missing")),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> AclStore:
    path = tmp_path_factory.mktemp("acl") / "acl.toml"
    path.write_text(ACL)
    return AclStore.open(path)


def endpoints(port):
    return d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host="127.0.0.1", port=port)])


def queue(topic, port):
    return d.MessageQueue(topic=d.Resource(name=topic), id=-1,
                          broker=d.Broker(name="broker-a", id=0, endpoints=endpoints(port)))


def message(topic):
    return d.Message(topic=d.Resource(name=topic), body=b"x", system_properties=d.SystemProperties(
        message_id=uuid.uuid4().hex.upper()[:34], message_type=d.NORMAL, body_encoding=d.IDENTITY))


def client_requests(port: int, topic: str = TOPIC):
    """(RPC, request, the user its allow case runs as); Pub RPCs first: receives then find messages."""
    group, resource = d.Resource(name=GROUP), d.Resource(name=topic)
    handle = "broker-a@0 0 0 0 0 0"
    return [
        ("QueryRoute", s.QueryRouteRequest(topic=resource, endpoints=endpoints(port)), "producer1"),
        ("SendMessage", s.SendMessageRequest(messages=[message(topic)]), "producer1"),
        ("EndTransaction", s.EndTransactionRequest(topic=resource, message_id="M", transaction_id="T",
                                                   resolution=d.COMMIT, source=d.SOURCE_CLIENT), "producer1"),
        ("RecallMessage", s.RecallMessageRequest(topic=resource, recall_handle="h"), "producer1"),
        ("Heartbeat", s.HeartbeatRequest(group=group, client_type=d.SIMPLE_CONSUMER), "consumer1"),
        ("QueryAssignment", s.QueryAssignmentRequest(topic=resource, group=group, endpoints=endpoints(port)), "consumer1"),
        ("ReceiveMessage", s.ReceiveMessageRequest(
            group=group, message_queue=queue(topic, port), filter_expression=d.FilterExpression(type=d.TAG, expression="*"),
            batch_size=1, invisible_duration=duration_pb2.Duration(seconds=30),
            long_polling_timeout=duration_pb2.Duration(seconds=1)), "consumer1"),
        ("AckMessage", s.AckMessageRequest(group=group, topic=resource, entries=[
            s.AckMessageEntry(message_id="M", receipt_handle=handle)]), "consumer1"),
        ("ForwardMessageToDeadLetterQueue", s.ForwardMessageToDeadLetterQueueRequest(
            group=group, topic=resource, receipt_handle=handle, message_id="M", delivery_attempt=1,
            max_delivery_attempts=2), "consumer1"),
        ("ChangeInvisibleDuration", s.ChangeInvisibleDurationRequest(
            group=group, topic=resource, receipt_handle=handle, message_id="M",
            invisible_duration=duration_pb2.Duration(seconds=10)), "consumer1"),
        ("QueryOffset", s.QueryOffsetRequest(message_queue=queue(topic, port), query_offset_policy=d.END), "consumer1"),
        ("NotifyClientTermination", s.NotifyClientTerminationRequest(group=group), "consumer1"),
    ]


async def call(stub, rpc: str, request, metadata) -> d.Status:
    if rpc == "ReceiveMessage":
        responses = [r async for r in stub.ReceiveMessage(request, metadata=metadata, timeout=10)]
        return next(r.status for r in responses if r.WhichOneof("content") == "status")
    return (await getattr(stub, rpc)(request, metadata=metadata, timeout=10)).status


def check(outcome, status: d.Status, where: str) -> None:
    if outcome == "ok":
        assert status.code not in (d.UNAUTHORIZED, d.FORBIDDEN), f"{where}: {status}"
        return
    code, *texts = outcome
    assert status.code == code and all(text in status.message for text in texts), f"{where}: {status}"


def test_every_client_rpc_against_every_kind_of_caller(store):
    config = dataclasses.replace(MessagingConfig(grpc_server_port=0), authentication_enabled=True,
                                 authorization_enabled=True, min_long_polling_ms=500, min_invisible_time_ms=1_000)
    denied = metrics.AUTHORIZATION_DENIED.labels("SendMessage", "NO_MATCHING_POLICY")
    before = denied._value.get()

    async def body():
        topics = {TOPIC: MessageType.NORMAL, OTHER: MessageType.NORMAL}
        async with running_server(topics, config, accounts=store, access=ClientAccess(store)) as handle:
            async with grpc.aio.insecure_channel(handle.target) as channel:
                stub = g.MessagingServiceStub(channel)
                for rpc, request, user in client_requests(handle.port):
                    check("ok", await call(stub, rpc, request, signed(user)), f"{rpc} as {user}")
                    cross = "consumer1" if user == "producer1" else "producer1"
                    if rpc != "QueryRoute":  # Pub or Sub: both may ask routes
                        check((d.FORBIDDEN, f"User:{cross} may not"), await call(stub, rpc, request, signed(cross)),
                              f"{rpc} as {cross}")
                    for case, (metadata, outcome) in CASES.items():
                        check(outcome, await call(stub, rpc, request, metadata), f"{rpc}, {case}")
                for rpc, request, user in client_requests(handle.port, OTHER)[:2]:  # Pub on orders only
                    check((d.FORBIDDEN, "User:producer1 may not", "on Topic:other"), await call(stub, rpc, request, signed(user)),
                          f"{rpc} on {OTHER}")
    asyncio.run(body())
    assert denied._value.get() - before == 3  # nopolicy, consumer1, and producer1 on "other"


def test_telemetry_settings_are_authorized_and_a_refused_one_leaves_the_stream_open(store):
    config = dataclasses.replace(MessagingConfig(grpc_server_port=0), authentication_enabled=True,
                                 authorization_enabled=True)
    publishing = d.Settings(client_type=d.PRODUCER, publishing=d.Publishing(topics=[d.Resource(name=TOPIC)]))
    subscribing = d.Settings(client_type=d.SIMPLE_CONSUMER, subscription=d.Subscription(
        group=d.Resource(name=GROUP), subscriptions=[d.SubscriptionEntry(topic=d.Resource(name=TOPIC))]))

    async def replies(stub, user, settings_list) -> list[d.Status]:
        outbox: asyncio.Queue = asyncio.Queue()
        for settings in settings_list:
            outbox.put_nowait(s.TelemetryCommand(settings=settings))

        async def commands():
            for _ in settings_list:
                yield await outbox.get()
            await asyncio.sleep(30)
        stream = stub.Telemetry(commands(), metadata=signed(user, client_id=f"{user}@tel"), timeout=10)
        got = [(await stream.read()).status for _ in settings_list]
        stream.cancel()
        return got

    async def body():
        async with running_server({TOPIC: MessageType.NORMAL}, config, accounts=store, access=ClientAccess(store)) as handle:
            async with grpc.aio.insecure_channel(handle.target) as channel:
                stub = g.MessagingServiceStub(channel)
                refused, ok = await replies(stub, "producer1", [subscribing, publishing])
                assert refused.code == d.FORBIDDEN and "User:producer1 may not Sub on Group:billing" in refused.message
                assert ok.code == d.OK  # the same stream, after the refusal
                assert [r.code for r in await replies(stub, "consumer1", [subscribing])] == [d.OK]
                assert [r.code for r in await replies(stub, "consumer1", [publishing])] == [d.FORBIDDEN]
                assert [r.code for r in await replies(stub, "admin", [publishing, subscribing])] == [d.OK, d.OK]
    asyncio.run(body())


# ---------------------------------------------------------------- admin

ADMIN_OUTCOMES = {  # gRPC codes of the admin services
    "super": (signed("admin"), "ok"),
    "allow": (signed("ops"), "ok"),
    "deny": (signed("denied"), (grpc.StatusCode.PERMISSION_DENIED, "FORBIDDEN: User:denied may not", "DENIED_BY_POLICY")),
    "no policy": (signed("producer1"), (grpc.StatusCode.PERMISSION_DENIED, "User:producer1 may not", "NO_MATCHING_POLICY")),
    "disabled": (signed("gone"), (grpc.StatusCode.UNAUTHENTICATED, "User:gone is disabled")),
    "wrong secret": (signed("ops", "nope"), (grpc.StatusCode.UNAUTHENTICATED, "signature does not match")),
    "anonymous": (signed(None), (grpc.StatusCode.UNAUTHENTICATED, "authorization metadata is missing")),
}


def admin_request(module, method):
    """The method's request naming topic ``orders`` and group ``billing`` wherever it has them."""
    service = next(iter(module.DESCRIPTOR.services_by_name.values()))
    request = getattr(module, service.methods_by_name[method].input_type.name)()
    for field, value in (("topic", TOPIC), ("group", GROUP), ("cluster", "DefaultCluster")):
        if field in request.DESCRIPTOR.fields_by_name:
            target = getattr(request, field)
            if isinstance(target, str):
                setattr(request, field, value)
            else:
                setattr(target, field, value)  # AdminTopic.topic, AdminGroup.group
    if method == "WriteConsumerOffsets":
        request.offsets.add(topic=TOPIC, group=GROUP)
    if module is acl_admin_pb2:
        request = {"CreateUser": acl_admin_pb2.AclCreateUserRequest(user=acl_admin_pb2.AclUser(
            username="u-new", password="pw")), "UpdateUser": acl_admin_pb2.AclUpdateUserRequest(username="ops", password="x"),
            "DeleteUser": acl_admin_pb2.AclUsernameRequest(username="nobody"),
            "GetUser": acl_admin_pb2.AclUsernameRequest(username="ops"),
            "CreateAcl": acl_admin_pb2.AclPutRequest(acl=acl_admin_pb2.AclRecord(subject="User:nobody")),
            "UpdateAcl": acl_admin_pb2.AclPutRequest(acl=acl_admin_pb2.AclRecord(subject="User:nobody")),
            "DeleteAcl": acl_admin_pb2.AclDeleteRequest(subject="User:nobody"),
            "GetAcl": acl_admin_pb2.AclSubjectRequest(subject="User:ops")}.get(method, request)
    return request


def test_every_admin_command_against_every_kind_of_caller(store):
    async def body():
        server = grpc.aio.server()
        gate = AdminGate(GuardedServer(server, RequestGuard()), store, SystemClock().now_ms, 900_000,
                         lambda request: "DefaultCluster")
        admin_pb2_grpc.add_BrokerAdminServicer_to_server(admin_pb2_grpc.BrokerAdminServicer(), gate)  # UNIMPLEMENTED
        add_acl_admin_service(gate, None)  # AUTHORIZATION_OFF once through: the store is not changed here
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stubs = {admin_pb2: admin_pb2_grpc.BrokerAdminStub(channel),
                         acl_admin_pb2: acl_admin_pb2_grpc.AclAdminStub(channel)}
                for module, stub in stubs.items():
                    for method in next(iter(module.DESCRIPTOR.services_by_name.values())).methods_by_name:
                        request = admin_request(module, method)
                        for case, (metadata, outcome) in ADMIN_OUTCOMES.items():
                            with pytest.raises(grpc.aio.AioRpcError) as caught:
                                await getattr(stub, method)(request, metadata=metadata, timeout=10)
                            code, details = caught.value.code(), caught.value.details()
                            if outcome == "ok":
                                assert code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.FAILED_PRECONDITION), \
                                    f"{method}, {case}: {code} {details}"
                            else:
                                assert code == outcome[0] and all(t in details for t in outcome[1:]), \
                                    f"{method}, {case}: {code} {details}"
        finally:
            await server.stop(None)
    asyncio.run(body())
