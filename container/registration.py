"""Keeping the nameserver told about the container's brokers.

Rules:
- Every broker is registered at start, re-registered every ``registerNameServerPeriod`` and
  right after its topics change, and heartbeats every ``brokerHeartbeatInterval`` with its
  topic DataVersion (a nameserver that lost it asks for a full registration).
- Registration carries the container's admin address and its client endpoints, plaintext
  and TLS (``""`` without ``grpcTlsPort``): the route answers clients with the endpoint of
  the container hosting each broker, in the scheme the client connected with.
- A nameserver that cannot be reached is logged, never fatal: brokers keep serving.
- A broker with ``enableSlaveActingMaster`` registers with ``enableActingMaster``, so the
  nameserver rewrites its group's routes when the master is gone and tells the members when
  the group's smallest id changes (reference 2.2, 2.3).
- The id a broker registers with is its current one (0 while master, its replica id
  otherwise): after a role change the old id is unregistered first.  A controller-mode
  broker that has no replica id yet (it has not registered with the controller) is not
  registered at all: nothing routes to a broker whose role nobody gave it.  Nor is a master
  in pre-online (no registration, no heartbeat) until it took its group's tables back.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from container.hosted_broker import HostedBroker
from metadata.route_types import BrokerIdentity
from services.broker.api import QueueRoute
from services.nameserver.client import NameserverClient, NameserverError
from services.nameserver.queue_routes import queue_routes

if TYPE_CHECKING:
    from container.runtime import BrokerContainer

log = logging.getLogger(__name__)


def identity_of(hosted: HostedBroker) -> BrokerIdentity | None:
    """The identity routes should show now; None while a controller-mode broker has no id and
    while a master is in pre-online (it takes its group's tables back first)."""
    if hosted.controller_mode and hosted.replica.own_id == 0:
        return None
    if hosted.pre_online is not None:
        return None
    return BrokerIdentity(hosted.spec.broker.broker_cluster_name, hosted.name, hosted.broker.broker_id)


class Registration:
    def __init__(self, container: "BrokerContainer"):
        self.container = container
        self.client = NameserverClient(container.config.namesrv_addresses)
        self._registered: dict[int, BrokerIdentity] = {}  # id(hosted) -> the identity last registered

    @property
    def admin_address(self) -> str:
        return f"{self.container.config.admin_bind_address}:{self.container.ports['admin']}"

    @property
    def client_endpoint(self) -> str:
        return f"{self.container.config.broker_container_ip}:{self.container.ports['client']}"

    @property
    def tls_client_endpoint(self) -> str:
        """The TLS client endpoint, ``""`` when the container has no TLS port."""
        port = self.container.ports.get("tls")
        return f"{self.container.config.broker_container_ip}:{port}" if port else ""

    def broker_endpoint(self, hosted: HostedBroker) -> str:
        """The broker's own client endpoint (its listenPort), "" when it has none."""
        port = self.container.ports.get(f"broker:{hosted.name}")
        return f"{self.container.config.broker_container_ip}:{port}" if port else ""

    async def register(self, hosted: HostedBroker) -> str:
        """Register one broker; returns its group's master address for a slave ("" if none or unknown)."""
        identity = identity_of(hosted)
        if identity is None:
            return ""
        old = self._registered.get(id(hosted))
        if old is not None and old != identity:
            await self._unregister_identity(old, hosted)
        try:
            master = await self.client.register_broker(
                identity, self.admin_address, self.client_endpoint, hosted.broker.topic_table(),
                heartbeat_timeout_ms=self.container.config.broker_not_active_timeout_ms,
                enable_acting_master=hosted.spec.broker.enable_slave_acting_master,
                tls_client_endpoint=self.tls_client_endpoint, broker_endpoint=self.broker_endpoint(hosted))
        except NameserverError as exc:
            log.warning("registering %s with the nameserver failed: %s", hosted.spec.canonical_name, exc)
            return ""
        self._registered[id(hosted)] = identity
        return master

    async def register_all(self) -> None:
        for hosted in list(self.container.hosted.values()):
            await self.register(hosted)

    async def register_by_name(self, broker_name: str) -> None:
        for hosted in list(self.container.hosted.values()):
            if hosted.name == broker_name:
                await self.register(hosted)

    async def heartbeat_all(self) -> None:
        for hosted in list(self.container.hosted.values()):
            identity = identity_of(hosted)
            if identity is None:
                continue
            if self._registered.get(id(hosted)) != identity:
                await self.register(hosted)
                continue
            try:
                needs = await self.client.heartbeat(identity, hosted.broker.topic_table().data_version)
            except NameserverError as exc:
                log.debug("heartbeat of %s failed: %s", hosted.spec.canonical_name, exc)
                continue
            if needs:
                await self.register(hosted)

    async def unregister(self, hosted: HostedBroker) -> None:
        identity = self._registered.pop(id(hosted), None)
        if identity is not None:
            await self._unregister_identity(identity, hosted)

    async def _unregister_identity(self, identity: BrokerIdentity, hosted: HostedBroker) -> None:
        try:
            await self.client.unregister(identity)
        except NameserverError as exc:
            log.warning("unregistering %s failed: %s", hosted.spec.canonical_name, exc)

    async def unregister_all(self) -> None:
        for hosted in list(self.container.hosted.values()):
            await self.unregister(hosted)
        await self.client.close()

    async def query_route(self, topic: str) -> list[QueueRoute]:
        route = await self.client.query_route(topic)
        return [] if route is None else queue_routes(route)
