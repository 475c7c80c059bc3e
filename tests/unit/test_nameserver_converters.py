"""Nameserver request converters and servicer: bad input -> a clear status, never a crash."""
from __future__ import annotations

import asyncio

import grpc
import pytest
from hypothesis import given, settings, strategies as st

from metadata.route_types import BrokerIdentity
from proto import nameserver_pb2 as pb
from scheduler.clock import ManualClock
from services.nameserver import converters as conv
from services.nameserver.config import NamesrvConfig, namesrv_config
from services.nameserver.queue_routes import queue_routes
from services.nameserver.service import NameserverDriver, NameserverServicer
from metadata.config import ConfigError


class Aborted(Exception):
    pass


class FakeContext:
    def __init__(self):
        self.code = None
        self.details = None

    async def abort(self, code, details):
        self.code, self.details = code, details
        raise Aborted(details)


def call(servicer, name, request):
    context = FakeContext()
    try:
        reply = asyncio.run(getattr(servicer, name)(request, context))
    except Aborted:
        return None, context
    return reply, context


def servicer(clock=None):
    return NameserverServicer(NameserverDriver(NamesrvConfig(), clock or ManualClock()))


def good_request(**changes) -> pb.NameserverRegisterBrokerRequest:
    request = pb.NameserverRegisterBrokerRequest(
        broker=pb.NameserverBrokerIdentity(cluster="DefaultCluster", broker_name="broker-a", broker_id=0),
        address="127.0.0.1:10911", client_endpoint="127.0.0.1:8081",
        topics=[pb.NameserverTopicConfig(topic="T", read_queue_nums=4, write_queue_nums=4, perm=6, message_type="FIFO")],
    )
    for key, value in changes.items():
        if key == "topics_version":
            request.topics_version.CopyFrom(value)
        else:
            setattr(request, key, value)
    return request


texts = st.one_of(st.text(max_size=40), st.sampled_from(["", "a:1", "host:0", "h:70000", "[::1]:80", "x y:1", "ok-name"]))
ints = st.one_of(st.integers(min_value=-(2**31), max_value=2**31 - 1), st.sampled_from([0, 1, 1024, 1025, -1]))


@settings(max_examples=200, deadline=None)
@given(cluster=texts, name=texts, broker_id=st.integers(min_value=-(2**62), max_value=2**62), address=texts,
       endpoint=texts, tls_endpoint=texts, topic=texts, read=ints, write=ints, perm=ints, message_type=texts,
       timeout=st.integers(min_value=-(2**62), max_value=2**62), state_version=st.integers(min_value=-(2**62), max_value=2**62))
def test_register_never_crashes_on_any_input(cluster, name, broker_id, address, endpoint, tls_endpoint, topic, read, write,
                                             perm, message_type, timeout, state_version):
    request = pb.NameserverRegisterBrokerRequest(
        broker=pb.NameserverBrokerIdentity(cluster=cluster, broker_name=name, broker_id=broker_id),
        address=address, client_endpoint=endpoint, tls_client_endpoint=tls_endpoint, heartbeat_timeout_ms=timeout,
        topics=[pb.NameserverTopicConfig(topic=topic, read_queue_nums=read, write_queue_nums=write, perm=perm,
                                         message_type=message_type)],
        topics_version=pb.NameserverDataVersion(state_version=state_version),
    )
    reply, context = call(servicer(), "RegisterBroker", request)
    if reply is None:
        assert context.code == grpc.StatusCode.INVALID_ARGUMENT, context.details
        assert context.details.startswith("BAD_REQUEST: ")


@settings(max_examples=100, deadline=None)
@given(topic=texts)
def test_query_route_never_crashes(topic):
    reply, context = call(servicer(), "QueryRoute", pb.NameserverQueryRouteRequest(topic=topic))
    assert reply is None and context.code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)


@pytest.mark.parametrize("changes, field", [
    ({"address": "nohost"}, "address"),
    ({"client_endpoint": "h:0"}, "client_endpoint"),
    ({"heartbeat_timeout_ms": -5}, "heartbeat_timeout_ms"),
    ({"tls_client_endpoint": "nohost"}, "tls_client_endpoint"),
    ({"tls_client_endpoint": "127.0.0.1:0"}, "tls_client_endpoint"),
    ({"tls_client_endpoint": "127.0.0.1:70000"}, "tls_client_endpoint"),
    ({"tls_client_endpoint": "bad host:8443"}, "tls_client_endpoint"),
    ({"tls_client_endpoint": "127.0.0.1:8081"}, "tls_client_endpoint"),  # the plaintext endpoint
])
def test_bad_fields_are_named(changes, field):
    reply, context = call(servicer(), "RegisterBroker", good_request(**changes))
    assert reply is None and context.code == grpc.StatusCode.INVALID_ARGUMENT and field in context.details


@pytest.mark.parametrize("text, message", [
    ("nohost", "tls_client_endpoint: 'nohost' is not host:port"),
    ("h:0", "tls_client_endpoint: port 0 is not between 1 and 65535"),
    ("h:65536", "tls_client_endpoint: port 65536 is not between 1 and 65535"),
    (":8443", "tls_client_endpoint: ':8443' is not host:port"),
    ("h:8081", "tls_client_endpoint: 'h:8081' is the plaintext client_endpoint too; one port serves one scheme"),
])
def test_a_bad_tls_endpoint_is_refused_with_a_clear_message(text, message):
    with pytest.raises(conv.BadNameserverRequest) as refused:
        conv.tls_endpoint_from_proto(text, "h:8081")
    assert str(refused.value) == message


def test_an_empty_tls_endpoint_means_no_tls_port_and_a_good_one_is_kept():
    assert conv.tls_endpoint_from_proto("", "h:8081") == ""
    assert conv.tls_endpoint_from_proto("h:8443", "h:8081") == "h:8443"
    assert conv.tls_endpoint_from_proto("[::1]:8443", "[::1]:8081") == "[::1]:8443"


def test_the_tls_endpoint_travels_from_registration_to_routes_cluster_info_and_queue_routes():
    s = servicer()
    call(s, "RegisterBroker", good_request(tls_client_endpoint="127.0.0.1:8443"))
    other = good_request(address="127.0.0.1:20911", client_endpoint="[::1]:8082")
    other.broker.broker_name = "broker-b"
    call(s, "RegisterBroker", other)
    reply, _ = call(s, "QueryRoute", pb.NameserverQueryRouteRequest(topic="T"))
    assert [m.tls_client_endpoint for b in reply.brokers for m in b.members] == ["127.0.0.1:8443", ""]
    info, _ = call(s, "GetClusterInfo", pb.NameserverGetClusterInfoRequest())
    assert [m.tls_client_endpoint for g in info.groups for m in g.members] == ["127.0.0.1:8443", ""]
    route = conv.route_from_proto(reply)
    assert route == s.driver.table.route("T")
    endpoints = {(q.broker_name, q.endpoint, q.tls_endpoint) for q in queue_routes(route)}
    assert endpoints == {("broker-a", ("127.0.0.1", 8081), ("127.0.0.1", 8443)), ("broker-b", ("::1", 8082), None)}


def test_bad_broker_name_and_duplicate_topics_are_named():
    request = good_request()
    request.broker.broker_name = "bad name"
    assert "broker.broker_name" in call(servicer(), "RegisterBroker", request)[1].details
    request = good_request()
    request.topics.append(request.topics[0])
    assert "appears twice" in call(servicer(), "RegisterBroker", request)[1].details
    request = good_request()
    request.topics[0].read_queue_nums = 0
    assert "topics[0]" in call(servicer(), "RegisterBroker", request)[1].details


def test_register_then_route_through_the_servicer_and_rejections_carry_their_reason():
    clock = ManualClock()
    s = servicer(clock)
    reply, _ = call(s, "RegisterBroker", good_request(topics_version=pb.NameserverDataVersion(state_version=3)))
    assert reply is not None
    route, _ = call(s, "QueryRoute", pb.NameserverQueryRouteRequest(topic="T"))
    assert route.brokers[0].members[0].client_endpoint == "127.0.0.1:8081"
    assert route.brokers[0].message_type == "FIFO"
    rogue = good_request(address="10.0.0.9:10911", topics_version=pb.NameserverDataVersion(state_version=2))
    reply, context = call(s, "RegisterBroker", rogue)
    assert context.code == grpc.StatusCode.FAILED_PRECONDITION and context.details.startswith("STALE_STATE_VERSION")
    unknown = pb.NameserverUnregisterBrokerRequest(broker=pb.NameserverBrokerIdentity(cluster="C", broker_name="x"),
                                                   address="10.0.0.9:10911")
    assert call(s, "UnregisterBroker", unknown)[1].details.startswith("BROKER_NOT_REGISTERED")


def unregister_request(address: str, state_version: int = 0) -> pb.NameserverUnregisterBrokerRequest:
    return pb.NameserverUnregisterBrokerRequest(
        broker=pb.NameserverBrokerIdentity(cluster="DefaultCluster", broker_name="broker-a", broker_id=0),
        address=address, state_version=state_version)


def test_an_unregister_names_its_address_and_one_of_another_address_or_an_older_epoch_keeps_the_route():
    s = servicer()
    call(s, "RegisterBroker", good_request(address="127.0.0.1:20911", topics_version=pb.NameserverDataVersion(state_version=2)))
    for request, field in ((unregister_request(""), "address"), (unregister_request("nohost"), "address"),
                           (unregister_request("127.0.0.1:20911", -1), "state_version")):
        reply, context = call(s, "UnregisterBroker", request)
        assert reply is None and context.code == grpc.StatusCode.INVALID_ARGUMENT and field in context.details
    # the old master, woken after its successor (127.0.0.1:20911, epoch 2) was elected
    reply, context = call(s, "UnregisterBroker", unregister_request("127.0.0.1:10911", 1))
    assert context.code == grpc.StatusCode.FAILED_PRECONDITION and context.details.startswith("HELD_BY_ANOTHER_ADDRESS")
    reply, context = call(s, "UnregisterBroker", unregister_request("127.0.0.1:20911", 1))
    assert context.code == grpc.StatusCode.FAILED_PRECONDITION and context.details.startswith("STALE_STATE_VERSION")
    assert s.driver.table.route("T").brokers[0].addresses[0].address == "127.0.0.1:20911"
    reply, context = call(s, "UnregisterBroker", unregister_request("127.0.0.1:20911", 2))
    assert reply is not None and s.driver.table.route("T") is None


@settings(max_examples=100, deadline=None)
@given(name=texts, broker_id=st.integers(min_value=-(2**62), max_value=2**62), address=texts,
       state_version=st.integers(min_value=-(2**62), max_value=2**62))
def test_unregister_never_crashes_on_any_input(name, broker_id, address, state_version):
    s = servicer()
    call(s, "RegisterBroker", good_request())
    request = pb.NameserverUnregisterBrokerRequest(
        broker=pb.NameserverBrokerIdentity(cluster="DefaultCluster", broker_name=name, broker_id=broker_id),
        address=address, state_version=state_version)
    reply, context = call(s, "UnregisterBroker", request)
    assert reply is not None or context.code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                                                 grpc.StatusCode.FAILED_PRECONDITION), context.details


def test_queue_routes_follow_read_and_write_queue_numbers():
    s = servicer()
    request = good_request()
    request.topics[0].read_queue_nums, request.topics[0].write_queue_nums = 2, 3
    call(s, "RegisterBroker", request)
    route = s.driver.table.route("T")
    queues = queue_routes(route)
    assert [(q.queue_id, q.permission) for q in queues] == [(0, 6), (1, 6), (2, 2)]
    assert queues[0].endpoint == ("127.0.0.1", 8081) and queues[0].broker_id == 0


def test_config_binds_rocketmq_keys_and_refuses_bad_values():
    config = namesrv_config({"listenPort": "9999", "scanNotActiveBrokerInterval": "100"}, "ns.properties")
    assert config.listen_port == 9999 and config.scan_not_active_broker_interval_ms == 100
    assert config.bind_address == "127.0.0.1" and config.broker_channel_expired_time_ms == 120_000
    with pytest.raises(ConfigError, match="ns.properties: listenPort"):
        namesrv_config({"listenPort": "70000"}, "ns.properties")


def test_identity_round_trip():
    identity = BrokerIdentity("C", "b", 3)
    assert conv.identity_from_proto(conv.identity_to_proto(identity)) == identity
