"""Protobuf <-> route-table values for the nameserver, validating at the edge.

Rules:
- Every request field is checked here (names, ids, host:port, queue numbers, limits); a bad
  field raises :class:`BadNameserverRequest` naming it, which the servicer turns into
  ``INVALID_ARGUMENT``.  Nothing past this module re-validates.
- Conversions never raise anything else on any protobuf input (fuzzed by
  ``tests/unit/test_nameserver_converters.py``).
- Replies are built from core values only; no core value knows protobuf.
"""
from __future__ import annotations

from metadata.data_version import DataVersion
from metadata.member_group import BrokerMemberGroup
from metadata.names import is_valid_topic_name
from metadata.route_types import BrokerAddress, BrokerIdentity, BrokerRoute, ClusterInfo, QueueData, TopicRoute
from metadata.topic_config import TopicConfig, TopicConfigError, TopicTable
from proto import nameserver_pb2 as pb

MAX_BROKER_ID = (1 << 31) - 1
MAX_HOST_LENGTH = 255
MAX_HEARTBEAT_TIMEOUT_MS = 86_400_000


class BadNameserverRequest(ValueError):
    """A request field is malformed; the message names the field and the reason."""


def parse_endpoint(text: str, field: str) -> tuple[str, int]:
    """``host:port`` -> (host, port); IPv6 hosts may be bracketed."""
    host, sep, port_text = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or len(host) > MAX_HOST_LENGTH or not port_text.isdigit() or any(c.isspace() for c in host):
        raise BadNameserverRequest(f"{field}: {text!r} is not host:port")
    port = int(port_text)
    if not 0 < port <= 65535:
        raise BadNameserverRequest(f"{field}: port {port} is not between 1 and 65535")
    return host, port


def tls_endpoint_from_proto(text: str, client_endpoint: str, field: str = "tls_client_endpoint") -> str:
    """An optional TLS ``host:port``: ``""`` (no TLS port) or a valid endpoint other than the plaintext one."""
    if not text:
        return ""
    parse_endpoint(text, field)
    if text == client_endpoint:
        raise BadNameserverRequest(f"{field}: {text!r} is the plaintext client_endpoint too; one port serves one scheme")
    return text


def broker_endpoint_from_proto(text: str, field: str = "broker_endpoint") -> str:
    """An optional ``host:port``: ``""`` (the broker has no listenPort of its own) or a valid endpoint."""
    if text:
        parse_endpoint(text, field)
    return text


def identity_from_proto(message: pb.NameserverBrokerIdentity) -> BrokerIdentity:
    for field, value in (("broker.cluster", message.cluster), ("broker.broker_name", message.broker_name)):
        if not is_valid_topic_name(value):
            raise BadNameserverRequest(f"{field}: {value!r} must match [%|a-zA-Z0-9_-]+ (1 to 127 characters)")
    if not 0 <= message.broker_id <= MAX_BROKER_ID:
        raise BadNameserverRequest(f"broker.broker_id: {message.broker_id} must be between 0 and {MAX_BROKER_ID}")
    return BrokerIdentity(message.cluster, message.broker_name, message.broker_id)


def identity_to_proto(identity: BrokerIdentity) -> pb.NameserverBrokerIdentity:
    return pb.NameserverBrokerIdentity(cluster=identity.cluster, broker_name=identity.broker_name,
                                       broker_id=identity.broker_id)


def unregister_from_proto(request: pb.NameserverUnregisterBrokerRequest) -> tuple[BrokerIdentity, str, int]:
    """(identity, address, state_version) of an unregister: it names the registration it removes."""
    identity = identity_from_proto(request.broker)
    parse_endpoint(request.address, "address")
    if request.state_version < 0:
        raise BadNameserverRequest(f"state_version: {request.state_version} must not be negative")
    return identity, request.address, request.state_version


def unregister_to_proto(identity: BrokerIdentity, address: str, state_version: int) -> pb.NameserverUnregisterBrokerRequest:
    return pb.NameserverUnregisterBrokerRequest(broker=identity_to_proto(identity), address=address,
                                                state_version=state_version)


def data_version_from_proto(message: pb.NameserverDataVersion, field: str) -> DataVersion:
    for name in ("state_version", "timestamp_ms", "counter"):
        if getattr(message, name) < 0:
            raise BadNameserverRequest(f"{field}.{name}: {getattr(message, name)} must not be negative")
    return DataVersion(message.state_version, message.timestamp_ms, message.counter)


def data_version_to_proto(version: DataVersion) -> pb.NameserverDataVersion:
    return pb.NameserverDataVersion(state_version=version.state_version, timestamp_ms=version.timestamp_ms,
                                    counter=version.counter)


def topic_from_proto(message: pb.NameserverTopicConfig, index: int) -> TopicConfig:
    config = TopicConfig(message.topic, message.read_queue_nums, message.write_queue_nums, message.perm,
                         message.message_type or "NORMAL", message.order)
    try:
        return config.validate()
    except TopicConfigError as exc:
        raise BadNameserverRequest(f"topics[{index}]: {exc}") from None


def topic_to_proto(config: TopicConfig) -> pb.NameserverTopicConfig:
    return pb.NameserverTopicConfig(topic=config.topic_name, read_queue_nums=config.read_queue_nums,
                                    write_queue_nums=config.write_queue_nums, perm=config.perm,
                                    message_type=config.message_type, order=config.order)


def topic_table_from_proto(request: pb.NameserverRegisterBrokerRequest, max_topics: int) -> TopicTable:
    if len(request.topics) > max_topics:
        raise BadNameserverRequest(f"topics: {len(request.topics)} topics exceed the limit of {max_topics}")
    configs: dict[str, TopicConfig] = {}
    for index, message in enumerate(request.topics):
        config = topic_from_proto(message, index)
        if config.topic_name in configs:
            raise BadNameserverRequest(f"topics[{index}]: topic {config.topic_name} appears twice")
        configs[config.topic_name] = config
    return TopicTable(data_version_from_proto(request.topics_version, "topics_version"), configs)


def heartbeat_timeout_from_proto(value: int) -> int | None:
    if value == 0:
        return None
    if not 0 < value <= MAX_HEARTBEAT_TIMEOUT_MS:
        raise BadNameserverRequest(f"heartbeat_timeout_ms: {value} must be between 1 and {MAX_HEARTBEAT_TIMEOUT_MS} (0: default)")
    return value


def topic_name_from_proto(topic: str) -> str:
    if not is_valid_topic_name(topic):
        raise BadNameserverRequest(f"topic: {topic!r} must match [%|a-zA-Z0-9_-]+ (1 to 127 characters)")
    return topic


def route_to_proto(route: TopicRoute) -> pb.NameserverQueryRouteResponse:
    return pb.NameserverQueryRouteResponse(topic=route.topic, brokers=[broker_route_to_proto(b) for b in route.brokers])


def broker_route_to_proto(route: BrokerRoute) -> pb.NameserverBrokerRoute:
    members = [pb.NameserverBrokerAddress(broker_id=i, address=a.address, client_endpoint=a.client_endpoint,
                                          tls_client_endpoint=a.tls_client_endpoint, broker_endpoint=a.broker_endpoint)
               for i, a in route.addresses.items()]
    q = route.queue_data
    return pb.NameserverBrokerRoute(cluster=route.cluster, broker_name=route.broker_name, members=members,
                                    read_queue_nums=q.read_queue_nums, write_queue_nums=q.write_queue_nums,
                                    perm=q.perm, message_type=q.message_type,
                                    enable_acting_master=route.enable_acting_master)


def route_from_proto(message: pb.NameserverQueryRouteResponse) -> TopicRoute:
    """For clients: trusts the nameserver's reply."""
    brokers = []
    for b in message.brokers:
        addresses = {m.broker_id: BrokerAddress(m.address, m.client_endpoint, m.tls_client_endpoint, m.broker_endpoint)
                     for m in b.members}
        queue_data = QueueData(b.read_queue_nums, b.write_queue_nums, b.perm, b.message_type)
        brokers.append(BrokerRoute(b.cluster, b.broker_name, addresses, queue_data, b.enable_acting_master))
    return TopicRoute(message.topic, tuple(brokers))


def cluster_info_to_proto(info: ClusterInfo) -> pb.NameserverGetClusterInfoResponse:
    groups = []
    for group in info.groups:
        members = [pb.NameserverBrokerMember(
            broker_id=m.identity.broker_id, address=m.address, client_endpoint=m.client_endpoint,
            tls_client_endpoint=m.tls_client_endpoint, broker_endpoint=m.broker_endpoint,
            last_heartbeat_ms=m.last_heartbeat_ms, heartbeat_timeout_ms=m.heartbeat_timeout_ms,
            topics_version=data_version_to_proto(m.data_version), topic_count=len(m.topics.topics),
        ) for m in group.members]
        groups.append(pb.NameserverBrokerGroup(cluster=group.cluster, broker_name=group.broker_name, members=members,
                                               enable_acting_master=group.enable_acting_master))
    return pb.NameserverGetClusterInfoResponse(groups=groups)


def member_group_request_from_proto(request: pb.NameserverGetBrokerMemberGroupRequest) -> tuple[str, str]:
    """(cluster or "", broker name), both checked."""
    if request.cluster and not is_valid_topic_name(request.cluster):
        raise BadNameserverRequest(f"cluster: {request.cluster!r} must match [%|a-zA-Z0-9_-]+ (1 to 127 characters)")
    if not is_valid_topic_name(request.broker_name):
        raise BadNameserverRequest(f"broker_name: {request.broker_name!r} must match [%|a-zA-Z0-9_-]+ (1 to 127 characters)")
    return request.cluster, request.broker_name


def member_group_to_proto(group: BrokerMemberGroup, acting: bool) -> pb.NameserverGetBrokerMemberGroupResponse:
    return pb.NameserverGetBrokerMemberGroupResponse(
        cluster=group.cluster, broker_name=group.broker_name, enable_acting_master=acting,
        members=[pb.NameserverBrokerMemberGroupMember(broker_id=i, address=a) for i, a in group.members.items()])


def member_group_from_proto(reply: pb.NameserverGetBrokerMemberGroupResponse) -> BrokerMemberGroup:
    return BrokerMemberGroup(reply.cluster, reply.broker_name, {m.broker_id: m.address for m in reply.members})

