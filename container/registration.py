"""Keeping the nameserver told about the container's brokers.

Rules:
- Every broker is registered at start, re-registered every ``registerNameServerPeriod`` and
  right after its topics change, and heartbeats every ``brokerHeartbeatInterval`` with its
  topic DataVersion (a nameserver that lost it asks for a full registration).
- Registration carries the container's admin address and its client endpoints, plaintext
  and TLS (``""`` without ``grpcTlsPort``): the route answers clients with the endpoint of
  the container hosting each broker, in the scheme the client connected with.
- A nameserver that cannot be reached is logged, never fatal: brokers keep serving.
- Every route the nameserver gives is kept (per topic, at most ``ROUTE_CACHE_TOPICS``):
  :meth:`Registration.topic_route` answers the last one while no nameserver answers, so the
  backlog probe still finds a topic's other brokers (without it, every receive that found
  nothing waited out its long poll while another broker held the group's messages: a
  message every 5 s in the test with every controller and nameserver down, 2 runs in 5).
- A broker with ``enableSlaveActingMaster`` registers with ``enableActingMaster``, so the
  nameserver rewrites its group's routes when the master is gone and tells the members when
  the group's smallest id changes (reference 2.2, 2.3).
- The id a broker registers with is its current one (0 while master, its replica id
  otherwise): after a role change the old id is unregistered first.  A controller-mode
  broker that has no replica id yet (it has not registered with the controller) is not
  registered at all: nothing routes to a broker whose role nobody gave it.  Nor is a master
  in pre-online (no registration, no heartbeat) until it took its group's tables back.
- An unregister names the registration it removes: the admin address and the largest
  ``stateVersion`` sent for that id.  A nameserver that meanwhile gave the id to another
  address (a master stopped past its successor's election wakes and steps down) keeps it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from container.hosted_broker import HostedBroker
from metadata.route_types import BrokerIdentity, TopicRoute
from services.broker.api import QueueRoute
from services.nameserver.client import NameserverClient, NameserverError, NameserverUnavailable
from services.nameserver.queue_routes import queue_routes

if TYPE_CHECKING:
    from container.runtime import BrokerContainer

log = logging.getLogger(__name__)
ROUTE_CACHE_TOPICS = 4_096


def identity_of(hosted: HostedBroker) -> BrokerIdentity | None:
    """The identity routes should show now; None while a controller-mode broker has no id and
    while a master is in pre-online (it takes its group's tables back first)."""
    if hosted.controller_mode and hosted.replica.own_id == 0:
        return None
    if hosted.pre_online is not None:
        return None
    return BrokerIdentity(hosted.spec.broker.broker_cluster_name, hosted.name, hosted.broker.broker_id)


@dataclass(frozen=True)
class RegisteredAs:
    """What the nameserver was last told for one hosted broker: what an unregister names."""

    identity: BrokerIdentity
    address: str
    state_version: int  # the largest topics stateVersion sent for ``identity``


class Registration:
    def __init__(self, container: "BrokerContainer"):
        self.container = container
        self.client = NameserverClient(container.config.namesrv_addresses)
        self._registered: dict[int, RegisteredAs] = {}  # id(hosted) -> the registration last made
        self._sent: dict[int, RegisteredAs] = {}  # id(hosted) -> the registration last sent, answered or not
        self._routes: dict[str, TopicRoute | None] = {}  # topic -> the nameserver's last answer

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
        if old is not None and old.identity != identity:
            await self._unregister_identity(old, hosted)
        topics = hosted.broker.topic_table()
        sent = self._note_sent(hosted, identity, topics.data_version.state_version)
        try:
            master = await self.client.register_broker(
                identity, self.admin_address, self.client_endpoint, topics,
                heartbeat_timeout_ms=self.container.config.broker_not_active_timeout_ms,
                enable_acting_master=hosted.spec.broker.enable_slave_acting_master,
                tls_client_endpoint=self.tls_client_endpoint, broker_endpoint=self.broker_endpoint(hosted))
        except NameserverError as exc:
            log.warning("registering %s with the nameserver failed: %s", hosted.spec.canonical_name, exc)
            return ""
        self._registered[id(hosted)] = sent
        return master

    def _note_sent(self, hosted: HostedBroker, identity: BrokerIdentity, state_version: int) -> RegisteredAs:
        """Record a registration before it is sent: one that reached a nameserver whose reply was
        lost is still named by the next unregister (with the larger stateVersion)."""
        last = self._sent.get(id(hosted))
        if last is not None and last.identity == identity and last.address == self.admin_address:
            state_version = max(state_version, last.state_version)
        sent = RegisteredAs(identity, self.admin_address, state_version)
        self._sent[id(hosted)] = sent
        return sent

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
            registered = self._registered.get(id(hosted))
            if registered is None or registered.identity != identity:
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
        registered = self._registered.pop(id(hosted), None)
        self._sent.pop(id(hosted), None)
        if registered is not None:
            await self._unregister_identity(registered, hosted)

    async def _unregister_identity(self, registered: RegisteredAs, hosted: HostedBroker) -> None:
        identity = registered.identity
        try:
            refusals = await self.client.unregister(identity, registered.address, registered.state_version)
        except NameserverError as exc:
            log.warning("unregistering %s failed: %s", hosted.spec.canonical_name, exc)
            return
        for refusal in refusals:
            log.info("unregistering %s id %d: the nameserver kept its registration (%s)", hosted.name,
                     identity.broker_id, refusal.details)

    async def unregister_all(self) -> None:
        for hosted in list(self.container.hosted.values()):
            await self.unregister(hosted)
        await self.client.close()

    async def query_route(self, topic: str) -> list[QueueRoute]:
        route = await self._ask_route(topic)
        return [] if route is None else queue_routes(route)

    async def topic_route(self, topic: str) -> TopicRoute | None:
        """The nameserver's route of ``topic``; while none answers, the last one it gave (the
        failure is raised when there is none)."""
        try:
            return await self._ask_route(topic)
        except NameserverUnavailable:
            if topic in self._routes:
                return self._routes[topic]
            raise

    async def _ask_route(self, topic: str) -> TopicRoute | None:
        route = await self.client.query_route(topic)
        self._routes.pop(topic, None)
        self._routes[topic] = route
        while len(self._routes) > ROUTE_CACHE_TOPICS:
            del self._routes[next(iter(self._routes))]
        return route
