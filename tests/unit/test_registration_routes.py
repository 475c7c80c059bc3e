"""container.registration keeps the nameserver's last route of each topic: while no nameserver
answers, ``topic_route`` gives it (the backlog probe finds a topic's other brokers), and a
topic never asked is still an error."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from container.registration import Registration
from metadata.route_types import TopicRoute
from services.nameserver.client import NameserverRejected, NameserverUnavailable


class Nameserver:
    """The client's query_route: answers ``routes`` while up, fails as an unreachable one when down."""

    def __init__(self):
        self.up, self.routes = True, {}

    async def query_route(self, topic):
        if not self.up:
            raise NameserverUnavailable("nameserver 127.0.0.1:9876: UNAVAILABLE")
        if topic == "refused":
            raise NameserverRejected(None, "refused")
        return self.routes.get(topic)


def registration() -> tuple[Registration, Nameserver]:
    container = SimpleNamespace(config=SimpleNamespace(namesrv_addresses=["127.0.0.1:9876"]))
    done = Registration(container)
    done.client = Nameserver()
    return done, done.client


def test_the_last_route_answers_while_the_nameserver_is_down():
    async def run():
        reg, nameserver = registration()
        route = TopicRoute(topic="t", brokers=())
        nameserver.routes["t"] = route
        assert await reg.topic_route("t") is route
        assert await reg.topic_route("none") is None          # the nameserver has none: that is kept too
        nameserver.up = False
        assert await reg.topic_route("t") is route
        assert await reg.topic_route("none") is None
        with pytest.raises(NameserverUnavailable):            # never asked: nothing to answer from
            await reg.topic_route("other")
        nameserver.up, newer = True, TopicRoute(topic="t", brokers=())
        nameserver.routes["t"] = newer
        assert await reg.topic_route("t") is newer           # back: its answer again, not the kept one
    asyncio.run(run())


def test_a_route_asked_for_clients_is_kept_for_the_probe_and_a_refusal_is_not_hidden():
    async def run():
        reg, nameserver = registration()
        nameserver.routes["t"] = TopicRoute(topic="t", brokers=())
        assert await reg.query_route("t") == []
        nameserver.up = False
        assert (await reg.topic_route("t")).topic == "t"
        nameserver.up = True
        with pytest.raises(NameserverRejected):              # an answer that refuses is not an outage
            await reg.topic_route("refused")
    asyncio.run(run())


def test_a_local_route_points_each_group_here_at_its_master_and_leaves_out_the_unknown():
    from metadata.topic_config import TopicConfig
    from services.messaging.broker_choice import LocalBroker, local_topic_route

    topics = {"t": TopicConfig("t", 4, 4, 6)}

    def broker(name, master, known=True):
        return LocalBroker(name, 0 if master else 1, master, False, topics.get if known else {}.get)

    brokers = [broker("a", True), broker("b", False), broker("c", False), broker("d", False, known=False)]
    route = local_topic_route(brokers, "t", ["me:1", "other:2", "", "other:3"])
    assert [(b.broker_name, b.addresses[0].address, b.queue_data.perm) for b in route.brokers] == \
        [("a", "me:1", 6), ("b", "other:2", 6)]   # c: its master is not known; d: no such topic there
    assert local_topic_route(brokers, "unknown", ["me:1"] * 4) is None
