"""Which local broker serves a client call, and the routes a container knows by itself.

Rules:
- A send goes to a local master that has the topic (the client chose this container from
  the route); with several, the first in configuration order that has it, else the first
  that creates topics on demand.  A call that arrived on a broker's own endpoint (its
  ``listenPort``) is *pinned* to that broker: only it serves, and only while it is master
  (the caller then relays or holds the call, services.messaging.broker_port).
- A receive, ack or invisibility change names its broker; the local broker of that name
  serves it (the master when both master and slave of a group are here).
- When the nameserver cannot be reached, the container answers routes from its own masters
  rather than failing the client.
- A send pinned to a broker that is not master here (its slave acts for the absent master,
  RIP-32, or waits for a master that is not coming) is passed on to a local master of another
  group that has the topic: the client's route is stale (the official Python client refreshes
  it every 30 s) and it retries a failed send on the next queue of its round robin, which is
  often the same broker's, so a refusal fails the send (issue 24, defect 7).  A FIFO message
  passed on leaves its group's queue early, as the client itself moves it at its next refresh.
- A send no local master takes is refused with why: a slave acting for its absent master
  (RIP-32) is named as read-only, so the client's error says where to send instead.
- Pure: views of the local brokers in, a choice out.
"""
from __future__ import annotations

from enum import Enum
from typing import Callable, NamedTuple, Sequence

from metadata.route_types import BrokerAddress, BrokerRoute, QueueData, TopicRoute
from services.broker.api import QueueRoute
from metadata.topic_config import TopicConfig

Endpoint = tuple[str, int]


class LocalBroker(NamedTuple):
    """A hosted broker as these rules see it (in configuration order).  A named tuple: the
    container builds one per hosted broker for every send, and a frozen dataclass's
    ``__init__`` cost three times as much."""
    name: str
    broker_id: int
    is_master: bool
    auto_create_topics: bool
    topic: Callable[[str], "TopicConfig | None"]   # the broker's config of a topic, None when unknown
    acting: bool = False  # a slave acting for its absent master


def broker_for_send(brokers: Sequence[LocalBroker], topic: str, pinned: str | None = None) -> int | None:
    """The index of the local master that takes a send of ``topic``, or None."""
    masters = [(i, b) for i, b in enumerate(brokers) if b.is_master and (pinned is None or b.name == pinned)]
    for index, broker in masters:
        if broker.topic(topic) is not None:
            return index
    for index, broker in masters:
        if broker.auto_create_topics:
            return index
    if pinned is not None and not masters:
        return _passed_on(brokers, topic, pinned)
    return None


def _passed_on(brokers: Sequence[LocalBroker], topic: str, pinned: str) -> int | None:
    """The local master of another group that has ``topic``, for a send that arrived on the own
    endpoint of ``pinned``, a group with no master here (never one that would create the topic)."""
    return next((i for i, b in enumerate(brokers) if b.is_master and b.name != pinned and b.topic(topic) is not None),
                None)


class NoMaster(str, Enum):
    ACTING_SLAVE = "ACTING_SLAVE"  # a slave acting for its absent master serves the topic here: read-only
    NOT_SERVED = "NOT_SERVED"


def no_master_reason(brokers: Sequence[LocalBroker], topic: str, pinned: str | None = None) -> tuple[NoMaster, str]:
    """Why no local master takes a send of ``topic`` (:func:`broker_for_send` found none), and the words."""
    for broker in brokers:
        if broker.acting and (pinned is None or broker.name == pinned) and broker.topic(topic) is not None:
            return NoMaster.ACTING_SLAVE, (f"broker {broker.name} is served here by a slave acting for its absent "
                                           f"master: read-only (reads and receives only); send {topic} to another "
                                           "broker of the topic")
    return NoMaster.NOT_SERVED, f"no broker of topic {topic} is served here"


def broker_named(brokers: Sequence[LocalBroker], name: str) -> int | None:
    """The index of the local broker called ``name``: its master when both replicas are here."""
    candidates = sorted((b.broker_id, i) for i, b in enumerate(brokers) if b.name == name)
    return candidates[0][1] if candidates else None


def local_routes(brokers: Sequence[LocalBroker], topic: str, endpoint: Endpoint,
                 tls_endpoint: Endpoint | None) -> list[QueueRoute]:
    """The routes of ``topic`` from this container's masters alone (the nameserver is down)."""
    routes: list[QueueRoute] = []
    for broker in brokers:
        config = broker.topic(topic)
        if config is None or not broker.is_master:
            continue
        for queue_id in range(config.queue_nums):
            routes.append(QueueRoute(topic, queue_id, broker.name, broker.broker_id, config.perm, config.accepts(),
                                     endpoint, tls_endpoint))
    return routes


def local_topic_route(brokers: Sequence[LocalBroker], topic: str, master_addresses: Sequence[str]) -> TopicRoute | None:
    """``topic``'s route as this container's replicas know it, for the backlog probe while no
    nameserver answers and none was kept: each broker group here that has the topic, pointing
    at its master's admin address (``master_addresses[i]`` for ``brokers[i]``: this container's
    when the master is here, the one a slave copies from otherwise; "" leaves the group out).
    None when no broker here has the topic.  A container whose receives are relayed to it (the
    clients query routes elsewhere) never asked the nameserver for a route before it went."""
    groups: dict[str, BrokerRoute] = {}
    for broker, address in zip(brokers, master_addresses):
        config = broker.topic(topic)
        if config is None or not address or (broker.name in groups and not broker.is_master):
            continue
        groups[broker.name] = BrokerRoute("", broker.name, {0: BrokerAddress(address, "")},
                                          QueueData(config.read_queue_nums, config.write_queue_nums, config.perm,
                                                    config.message_type))
    return TopicRoute(topic, tuple(groups.values())) if groups else None
