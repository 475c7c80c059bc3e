"""The container as the client protocol sees it: which broker serves a request, and routes.

Rules:
- A send goes to a local master that has the topic (the client chose this container from
  the route); with several, the first in configuration order that has it.
- A receive, ack or invisibility change names its broker; the local broker of that name
  serves it (the master when both master and slave of a group are here).
- Routes come from the nameserver (every container of the cluster, with the client
  endpoints, plaintext and TLS, of the container hosting each broker); when the nameserver
  cannot be reached the container answers from its own brokers rather than failing the client.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from services.broker.api import BrokerApi, QueueRoute, TransactionCheck

if TYPE_CHECKING:
    from container.runtime import BrokerContainer

log = logging.getLogger(__name__)


class _ForwardingSink:
    """The transaction-check sink brokers get before the client registry exists."""

    def __init__(self) -> None:
        self.target = None

    def push_transaction_check(self, check: TransactionCheck) -> bool:
        return self.target.push_transaction_check(check) if self.target is not None else False


class ContainerDirectory:
    def __init__(self, container: "BrokerContainer"):
        self.container = container
        self.sink = _ForwardingSink()
        self.registry = None

    def attach_registry(self, registry) -> None:
        self.registry = registry
        self.sink.target = registry

    def _hosted(self):
        return list(self.container.hosted.values())

    def local_broker(self, broker_name: str) -> BrokerApi | None:
        candidates = [h for h in self._hosted() if h.name == broker_name]
        candidates.sort(key=lambda h: h.spec.broker.broker_id)
        return candidates[0].broker if candidates else None

    def local_master_for_topic(self, topic: str) -> BrokerApi | None:
        masters = [h for h in self._hosted() if h.is_master]
        for hosted in masters:
            if topic in hosted.broker.topic_table().topics:
                return hosted.broker
        for hosted in masters:
            if hosted.spec.broker.auto_create_topic_enable:
                return hosted.broker
        return None

    async def route(self, topic: str) -> list[QueueRoute]:
        registration = self.container.registration
        if registration is not None:
            try:
                return await registration.query_route(topic)
            except Exception as exc:  # the nameserver is down: answer from what this container knows
                log.warning("route of %s from the nameserver failed (%s); answering from local brokers", topic, exc)
        return self.local_route(topic)

    def local_route(self, topic: str) -> list[QueueRoute]:
        ip, ports = self.container.config.broker_container_ip, self.container.ports
        endpoint = (ip, ports.get("client", self.container.config.grpc_server_port))
        tls_endpoint = (ip, ports["tls"]) if "tls" in ports else None
        routes: list[QueueRoute] = []
        for hosted in self._hosted():
            config = hosted.broker.topic_table().topics.get(topic)
            if config is None or not hosted.is_master:
                continue
            for queue_id in range(config.queue_nums):
                routes.append(QueueRoute(topic, queue_id, hosted.name, hosted.spec.broker.broker_id, config.perm,
                                         config.accepts(), endpoint, tls_endpoint))
        return routes
