"""The container as the client protocol sees it: its brokers and the cluster's routes.

Composition only: the rules (which broker serves a call, the routes when the nameserver is
down) are services.messaging.broker_choice's; this adapter hands them the hosted brokers.
One exception, for speed: a send's common case (the first master with the topic) is read in
place, and a hypothesis test holds it to ``broker_for_send``
(tests/unit/test_broker_choice_and_port.py).
:meth:`ContainerDirectory.pinned` is the same directory seen from one broker's own endpoint.
Routes come from the nameserver; while it cannot be reached, its last answer per topic is
served (bounded, ``ROUTE_CACHE_TOPICS``), and only a topic never asked for is answered from
this container's own masters.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from services.broker.api import BrokerApi, QueueRoute, TransactionCheck
from metadata.route_types import TopicRoute
from services.messaging.broker_choice import (LocalBroker, broker_for_send, broker_named, local_routes, local_topic_route,
                                              no_master_reason)

if TYPE_CHECKING:
    from container.runtime import BrokerContainer

log = logging.getLogger(__name__)
ROUTE_CACHE_TOPICS = 10_000  # topics whose last route is kept for when the nameserver is down


class _ForwardingSink:
    """The transaction-check sink brokers get before the client registry exists."""

    def __init__(self) -> None:
        self.target = None

    def push_transaction_check(self, check: TransactionCheck) -> bool:
        return self.target.push_transaction_check(check) if self.target is not None else False


class ContainerDirectory:
    def __init__(self, container: "BrokerContainer", pinned: str | None = None, sink: _ForwardingSink | None = None):
        self.container = container
        self.pinned_name = pinned
        self.sink = sink or _ForwardingSink()
        self.registry = None
        self._last_routes: dict[str, list[QueueRoute]] = {}  # topic -> the nameserver's last answer

    def attach_registry(self, registry) -> None:
        self.registry = registry
        self.sink.target = registry

    def pinned(self, broker_name: str) -> "ContainerDirectory":
        """The directory of calls that arrived on ``broker_name``'s own endpoint."""
        view = ContainerDirectory(self.container, broker_name, self.sink)
        view.registry = self.registry
        view._last_routes = self._last_routes
        return view

    def _hosted(self):
        return list(self.container.hosted.values())

    def _views(self, hosted) -> list[LocalBroker]:
        return [LocalBroker(h.name, h.broker.broker_id, h.is_master, h.spec.broker.auto_create_topic_enable,
                            h.broker.topics.get, h.broker.is_acting) for h in hosted]

    def local_brokers(self) -> list[BrokerApi]:
        """Every broker hosted here, masters and slaves, in configuration order."""
        return [h.broker for h in self._hosted()]

    def local_broker(self, broker_name: str) -> BrokerApi | None:
        hosted = self._hosted()
        index = broker_named(self._views(hosted), broker_name)
        return hosted[index].broker if index is not None else None

    def local_master_for_topic(self, topic: str) -> BrokerApi | None:
        # broker_for_send's first case read in place: the first master (of the pinned group) that
        # has the topic.  Building every hosted broker's view for it, with the helpers that
        # made them, cost a single send 5 of its 85 us in a container, where each call finds
        # the CPU's caches cold (bench/send_path.py --pollute); the views are for the rest.
        pinned = self.pinned_name
        for h in self.container.hosted.values():
            if (pinned is None or h.name == pinned) and h.is_master and h.broker.topics.get(topic) is not None:
                return h.broker
        hosted = self._hosted()
        index = broker_for_send(self._views(hosted), topic, self.pinned_name)
        return hosted[index].broker if index is not None else None

    def broker_for_transaction(self, topic: str, message_id: str, transaction_id: str) -> BrokerApi | None:
        """The local broker holding the half message, pinned or not: a check goes out on any of
        the producer's streams this container serves, and its answer comes back on that stream's
        endpoint, which may be another broker's own (an acting slave's halves are checked too)."""
        for hosted in self._hosted():
            if hosted.broker.holds_transaction(topic, message_id, transaction_id):
                return hosted.broker
        return None

    @property
    def moved_away(self) -> bool:
        """Some broker left this container by a move (services.messaging.moved_relay)."""
        return bool(self.container.moves.moved_to)

    def moved_target(self, topic: str, broker_name: str) -> str | None:
        """The client endpoint a call for ``topic`` (a receive: of ``broker_name``'s queue) is
        relayed to: where the broker that had it moved, when no broker here serves it."""
        moved = self.container.moves.moved_to
        if broker_name:
            if broker_name in moved and self.local_broker(broker_name) is None:
                return moved[broker_name][0]
            return None
        if not topic or self.local_master_for_topic(topic) is not None:
            return None
        return next((target for target, topics in moved.values() if topic in topics), None)

    def relay_channel(self, endpoint: str):
        return self.container.relays.channel(endpoint)

    def relay_gate(self, endpoint: str):
        return self.container.moves.gate(endpoint)

    def no_master_reason(self, topic: str) -> str:
        return no_master_reason(self._views(self._hosted()), topic, self.pinned_name)

    async def route(self, topic: str) -> list[QueueRoute]:
        """The nameserver's route; while it cannot be reached, the last one it gave (a route of
        this container's masters alone would hide the other containers' queues from clients
        until the nameserver is back), else this container's own."""
        registration = self.container.registration
        if registration is not None:
            try:
                routes = await registration.query_route(topic)
            except Exception as exc:  # the nameserver is down: answer from what this container knows
                cached = self._last_routes.get(topic)
                log.warning("route of %s from the nameserver failed (%s); answering from %s", topic, exc,
                            "its last answer" if cached is not None else "local brokers")
                if cached is not None:
                    return cached
            else:
                self._remember(topic, routes)
                return routes
        return self.local_route(topic)

    def _remember(self, topic: str, routes: list[QueueRoute]) -> None:
        self._last_routes.pop(topic, None)
        self._last_routes[topic] = routes
        while len(self._last_routes) > ROUTE_CACHE_TOPICS:
            del self._last_routes[next(iter(self._last_routes))]

    def local_topic_route(self, topic: str, admin_address: str) -> TopicRoute | None:
        """The backlog probe's route while no nameserver answers and none was kept."""
        hosted = self._hosted()
        masters = [admin_address if h.is_master or h.broker.is_acting
                   else (h.replica.slave.connected_via if h.replica.slave is not None else "") for h in hosted]
        return local_topic_route(self._views(hosted), topic, masters)

    def local_route(self, topic: str) -> list[QueueRoute]:
        ip, ports = self.container.config.broker_container_ip, self.container.ports
        endpoint = (ip, ports.get("client", self.container.config.grpc_server_port))
        tls_endpoint = (ip, ports["tls"]) if "tls" in ports else None
        return local_routes(self._views(self._hosted()), topic, endpoint, tls_endpoint)
