"""``NameserverClient``: what containers and the admin CLI use to talk to nameservers.

Rules:
- Nameservers do not share state, so registrations, heartbeats and unregistrations go to
  every address (as RocketMQ's ``registerBrokerAll``); the call succeeds when one succeeded.
  Queries try each address in order and return the first answer.
- Every call has a deadline (``timeout_ms``); an unreachable or slow nameserver is skipped.
- Errors: :class:`NameserverUnavailable` when no address answered,
  :class:`NameserverRejected` (with the gRPC code and the named reason) when one refused.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import grpc

from metadata.data_version import DataVersion
from metadata.member_group import BrokerMemberGroup
from metadata.route_types import BrokerIdentity, TopicRoute
from metadata.topic_config import TopicTable
from proto import nameserver_pb2 as pb
from proto import nameserver_pb2_grpc as pb_grpc
from services.nameserver import converters as conv
from services.cluster_auth import internal_channel

_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}


class NameserverError(Exception):
    """A nameserver call failed."""


class NameserverUnavailable(NameserverError):
    pass


class NameserverRejected(NameserverError):
    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code = code
        self.details = details

    @property
    def reason(self) -> str:
        return self.details.split(":", 1)[0]


@dataclass(frozen=True)
class ClusterMember:
    cluster: str
    broker_name: str
    broker_id: int
    address: str
    client_endpoint: str
    last_heartbeat_ms: int
    heartbeat_timeout_ms: int
    data_version: DataVersion
    topic_count: int
    enable_acting_master: bool
    tls_client_endpoint: str = ""  # "" when the hosting container has no TLS port
    broker_endpoint: str = ""  # the broker's own client endpoint, "" when it has none


class NameserverClient:
    def __init__(self, addresses: list[str], timeout_ms: int = 3000):
        if not addresses:
            raise ValueError("at least one nameserver address is needed")
        assert timeout_ms > 0
        self.addresses = list(addresses)
        self.timeout_s = timeout_ms / 1000
        self._stubs: dict[str, tuple[grpc.aio.Channel, pb_grpc.NameserverServiceStub]] = {}

    def _stub(self, address: str) -> pb_grpc.NameserverServiceStub:
        if address not in self._stubs:
            channel = internal_channel(address)
            self._stubs[address] = (channel, pb_grpc.NameserverServiceStub(channel))
        return self._stubs[address][1]

    async def close(self) -> None:
        stubs, self._stubs = self._stubs, {}
        for channel, _ in stubs.values():
            await channel.close()

    async def _call(self, address: str, name: str, request: Any) -> Any:
        try:
            return await getattr(self._stub(address), name)(request, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in _UNREACHABLE:
                raise NameserverUnavailable(f"nameserver {address}: {exc.code().name} ({exc.details()})") from None
            raise NameserverRejected(exc.code(), exc.details() or exc.code().name) from None

    async def _first(self, name: str, request: Any) -> Any:
        errors = []
        for address in self.addresses:
            try:
                return await self._call(address, name, request)
            except NameserverUnavailable as exc:
                errors.append(str(exc))
        raise NameserverUnavailable("; ".join(errors))

    async def _all(self, name: str, request: Any) -> list[Any]:
        results = await asyncio.gather(*(self._call(a, name, request) for a in self.addresses), return_exceptions=True)
        replies = [r for r in results if not isinstance(r, BaseException)]
        if replies:
            return replies
        rejected = [r for r in results if isinstance(r, NameserverRejected)]
        if rejected:
            raise rejected[0]
        raise NameserverUnavailable("; ".join(str(r) for r in results))

    async def register_broker(self, identity: BrokerIdentity, address: str, client_endpoint: str, topics: TopicTable,
                              heartbeat_timeout_ms: int | None = None, enable_acting_master: bool = False,
                              tls_client_endpoint: str = "", broker_endpoint: str = "") -> str:
        """Register with every nameserver; returns the group's master address ("" when none or self).

        ``tls_client_endpoint``: the container's TLS client endpoint, ``""`` when it has none."""
        request = pb.NameserverRegisterBrokerRequest(
            broker=conv.identity_to_proto(identity), address=address, client_endpoint=client_endpoint,
            tls_client_endpoint=tls_client_endpoint, topics=[conv.topic_to_proto(t) for t in topics.topics.values()],
            topics_version=conv.data_version_to_proto(topics.data_version),
            heartbeat_timeout_ms=heartbeat_timeout_ms or 0, enable_acting_master=enable_acting_master,
            broker_endpoint=broker_endpoint)
        replies = await self._all("RegisterBroker", request)
        return next((r.master_address for r in replies if r.master_address), "")

    async def heartbeat(self, identity: BrokerIdentity, data_version: DataVersion | None = None) -> bool:
        """True when some nameserver wants a full registration."""
        request = pb.NameserverBrokerHeartbeatRequest(broker=conv.identity_to_proto(identity))
        if data_version is not None:
            request.topics_version.CopyFrom(conv.data_version_to_proto(data_version))
        replies = await self._all("BrokerHeartbeat", request)
        return any(r.registration_needed for r in replies)

    async def unregister(self, identity: BrokerIdentity, address: str, state_version: int) -> list[NameserverRejected]:
        """Remove the registration ``address`` made with ``state_version`` from every nameserver;
        returns the refusals (a nameserver that holds another address's or a newer registration
        of the id keeps it, one that does not know the id has nothing to remove)."""
        request = conv.unregister_to_proto(identity, address, state_version)
        results = await asyncio.gather(*(self._call(a, "UnregisterBroker", request) for a in self.addresses),
                                       return_exceptions=True)
        if all(isinstance(r, NameserverUnavailable) for r in results):
            raise NameserverUnavailable("; ".join(str(r) for r in results))
        return [r for r in results if isinstance(r, NameserverRejected)]

    async def query_route(self, topic: str) -> TopicRoute | None:
        """The topic's route, or None when the nameserver has none."""
        try:
            reply = await self._first("QueryRoute", pb.NameserverQueryRouteRequest(topic=topic))
        except NameserverRejected as exc:
            if exc.code == grpc.StatusCode.NOT_FOUND:
                return None
            raise
        return conv.route_from_proto(reply)

    async def cluster_info(self) -> tuple[ClusterMember, ...]:
        reply = await self._first("GetClusterInfo", pb.NameserverGetClusterInfoRequest())
        return tuple(
            ClusterMember(g.cluster, g.broker_name, m.broker_id, m.address, m.client_endpoint, m.last_heartbeat_ms,
                          m.heartbeat_timeout_ms,
                          DataVersion(m.topics_version.state_version, m.topics_version.timestamp_ms, m.topics_version.counter),
                          m.topic_count, g.enable_acting_master, m.tls_client_endpoint,
                          m.broker_endpoint)
            for g in reply.groups for m in g.members)

    async def broker_member_group(self, broker_name: str, cluster: str = "") -> BrokerMemberGroup:
        """The group's live members, from the first nameserver that answers (upstream asks one)."""
        request = pb.NameserverGetBrokerMemberGroupRequest(cluster=cluster, broker_name=broker_name)
        return conv.member_group_from_proto(await self._first("GetBrokerMemberGroup", request))

