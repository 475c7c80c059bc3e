"""Values of the nameserver's route table: registrations, events, replies and route views.

Rules:
- Everything here is a frozen value; the table (``metadata/route_table.py``) replaces them,
  never mutates them.
- A broker is identified by ``(cluster, broker_name, broker_id)``; ``address`` is the internal
  (admin) address of the container hosting it and may be shared by several brokers of one
  container, so it is never used as an identity.
- ``broker_endpoint`` is the broker's own client endpoint (its ``listenPort``), ``""`` when it
  has none; a group's route names the broker endpoints of all its members.
- ``client_endpoint`` is the hosting container's plaintext client endpoint and
  ``tls_client_endpoint`` its TLS one (``grpcTlsPort``), ``""`` when it has none: a client
  reuses the scheme it connected with for every endpoint it is given, so routes carry both.
- Rejections are named reasons (:class:`RouteRejection`), never booleans.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Generic, Mapping, TypeVar, Union

from metadata.data_version import DataVersion
from metadata.topic_config import TopicTable

MASTER_ID = 0
R = TypeVar("R")


@dataclass(frozen=True, order=True)
class BrokerIdentity:
    cluster: str
    broker_name: str
    broker_id: int

    @property
    def canonical_name(self) -> str:
        return f"{self.cluster}_{self.broker_name}_{self.broker_id}"


@dataclass(frozen=True)
class Registration:
    """What a broker told the nameserver, plus when it was last heard from."""

    identity: BrokerIdentity
    address: str  # internal/admin host:port of the hosting container
    client_endpoint: str  # client gRPC host:port of the hosting container
    topics: TopicTable
    heartbeat_timeout_ms: int
    last_heartbeat_ms: int
    enable_acting_master: bool = False
    tls_client_endpoint: str = ""  # client gRPC host:port over TLS of the hosting container, "" when off
    broker_endpoint: str = ""  # the broker's own client endpoint (its listenPort), "" when it has none

    @property
    def state_version(self) -> int:
        """The master epoch in controller mode (topics DataVersion.stateVersion), else 0."""
        return self.topics.data_version.state_version

    @property
    def data_version(self) -> DataVersion:
        return self.topics.data_version

    def expired(self, now_ms: int) -> bool:
        return self.last_heartbeat_ms + self.heartbeat_timeout_ms < now_ms


class RouteRejection(str, Enum):
    # a registration: another live broker holds this id with a larger stateVersion;
    # an unregister: the id was registered again (same address) with a larger stateVersion than it names
    STALE_STATE_VERSION = "STALE_STATE_VERSION"
    HELD_BY_ANOTHER_ADDRESS = "HELD_BY_ANOTHER_ADDRESS"  # an unregister: the id is now another address's registration
    BROKER_NAME_IN_OTHER_CLUSTER = "BROKER_NAME_IN_OTHER_CLUSTER"
    BROKER_NOT_REGISTERED = "BROKER_NOT_REGISTERED"
    TOO_MANY_BROKERS = "TOO_MANY_BROKERS"


class RemovalReason(str, Enum):
    UNREGISTERED = "UNREGISTERED"
    EXPIRED = "EXPIRED"
    REPLACED = "REPLACED"  # another address won the id (larger or equal stateVersion)


# ---- events: the only inputs of RouteTable.apply ----

@dataclass(frozen=True)
class BrokerRegistered:
    registration: Registration


@dataclass(frozen=True)
class HeartbeatRecorded:
    identity: BrokerIdentity
    now_ms: int


@dataclass(frozen=True)
class BrokerRemoved:
    identity: BrokerIdentity
    reason: RemovalReason


RouteEvent = Union[BrokerRegistered, HeartbeatRecorded, BrokerRemoved]


# ---- replies ----

@dataclass(frozen=True)
class Rejected:
    reason: RouteRejection
    detail: str


@dataclass(frozen=True)
class RegisterReply:
    master_address: str  # "" when the group has no master (or the registrant is the master)
    replaced: BrokerIdentity | None = None


@dataclass(frozen=True)
class HeartbeatReply:
    registration_needed: bool  # unknown broker, or its topics DataVersion changed


@dataclass(frozen=True)
class Decision(Generic[R]):
    events: tuple[RouteEvent, ...]
    reply: R

    @property
    def rejected(self) -> bool:
        return isinstance(self.reply, Rejected)


# ---- route views ----

@dataclass(frozen=True)
class BrokerAddress:
    address: str
    client_endpoint: str
    tls_client_endpoint: str = ""  # "" when the hosting container has no TLS port
    broker_endpoint: str = ""  # the broker's own client endpoint (its listenPort), "" when it has none


@dataclass(frozen=True)
class QueueData:
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: str


@dataclass(frozen=True)
class BrokerRoute:
    """One broker group's part of a topic route: members by id and the topic's queue data."""

    cluster: str
    broker_name: str
    addresses: Mapping[int, BrokerAddress]
    queue_data: QueueData
    enable_acting_master: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "addresses", MappingProxyType(dict(sorted(self.addresses.items()))))


@dataclass(frozen=True)
class TopicRoute:
    topic: str
    brokers: tuple[BrokerRoute, ...]


@dataclass(frozen=True)
class BrokerGroupInfo:
    cluster: str
    broker_name: str
    members: tuple[Registration, ...]  # sorted by broker id
    enable_acting_master: bool = False


@dataclass(frozen=True)
class ClusterInfo:
    clusters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # cluster -> broker names
    groups: tuple[BrokerGroupInfo, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "clusters", MappingProxyType(dict(self.clusters)))
