"""Which local broker serves a call (services/messaging/broker_choice, pure), and how a broker's
own endpoint decides between serving, relaying and holding (services/messaging/broker_port)."""
from __future__ import annotations

import asyncio

import pytest

from metadata.topic_config import TopicConfig
from services.messaging.broker_choice import LocalBroker, broker_for_send, broker_named, local_routes
from services.messaging.broker_port import LOCAL, BrokerPortHandler


def broker(name, broker_id=0, master=True, topics=("t",), auto=False):
    configs = {t: TopicConfig(t, 2, 2) for t in topics}
    return LocalBroker(name, broker_id, master, auto, configs.get)


@pytest.mark.parametrize("brokers, topic, pinned, chosen", [
    ([broker("a"), broker("b")], "t", None, 0),                               # first in configuration order
    ([broker("a", topics=()), broker("b")], "t", None, 1),                    # the one that has the topic
    ([broker("a", topics=(), auto=True), broker("b", topics=())], "t", None, 0),   # else auto-create
    ([broker("a", master=False), broker("b")], "t", None, 1),                 # slaves never take sends
    ([broker("a"), broker("b")], "t", "b", 1),                                # a call on b's endpoint
    ([broker("a"), broker("b", master=False)], "t", "b", 0),                  # ... b has no master here (its slave
                                                                              # acts): passed on to a master of the topic
    ([broker("a", topics=(), auto=True), broker("b", master=False)], "t", "b", None),  # ... never to create it
    ([broker("a", master=False), broker("b", master=False)], "t", "b", None),  # ... no master here at all
    ([broker("a", topics=()), broker("b", topics=())], "t", "b", None),       # b is master without the topic: no pass
    ([broker("a", topics=())], "t", None, None),
])
def test_the_broker_for_a_send(brokers, topic, pinned, chosen):
    assert broker_for_send(brokers, topic, pinned) == chosen


def test_a_named_broker_is_its_master_when_both_replicas_are_here():
    assert broker_named([broker("a", 1, master=False), broker("a", 0), broker("b")], "a") == 1
    assert broker_named([broker("b")], "a") is None


def test_local_routes_name_only_local_masters():
    routes = local_routes([broker("a"), broker("b", 1, master=False)], "t", ("h", 1), None)
    assert {(r.broker_name, r.queue_id) for r in routes} == {("a", 0), ("a", 1)}


class Replica:
    def __init__(self, master=False, relay=None):
        self.is_master, self._relay, self.fence = master, relay, None
        self.changed = asyncio.Event()

    def relay_endpoint(self):
        return self._relay

    async def wait_changed(self, timeout_s):
        try:
            await asyncio.wait_for(self.changed.wait(), timeout_s)
        except TimeoutError:
            pass
        self.changed.clear()


class Context:
    def __init__(self, remaining):
        self.remaining = remaining

    def time_remaining(self):
        return self.remaining


def handler(replica, hold_ms=1000):
    return BrokerPortHandler(replica, {}, relays=None, hold_ms=hold_ms, now_s=asyncio.get_running_loop().time)


def test_a_master_serves_here_a_connected_slave_relays():
    async def run():
        assert await handler(Replica(master=True)).target(Context(3)) == LOCAL
        assert await handler(Replica(relay="m:1")).target(Context(3)) == "m:1"
    asyncio.run(run())


def test_a_call_with_no_master_in_reach_is_held_until_a_promotion():
    async def run():
        replica = Replica()
        target = asyncio.ensure_future(handler(replica).target(Context(3)))
        await asyncio.sleep(0.05)
        assert not target.done()                      # held
        replica.is_master = True
        replica.changed.set()
        assert await asyncio.wait_for(target, 1) == LOCAL
    asyncio.run(run())


def test_a_held_call_gives_up_at_the_hold_limit_or_before_the_callers_deadline():
    async def run():
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await handler(Replica(), hold_ms=100).target(Context(30)) == LOCAL
        assert 0.09 <= loop.time() - started < 1
        started = loop.time()
        assert await handler(Replica(), hold_ms=10_000).target(Context(0.3)) == LOCAL  # 0.3 s left, 0.2 s reserve
        assert loop.time() - started < 0.5
    asyncio.run(run())


# ---- the container's directory reads the common case in place; it must choose as the rule does

from types import SimpleNamespace  # noqa: E402

from hypothesis import given, settings, strategies as st  # noqa: E402

from container.directory import ContainerDirectory  # noqa: E402

_hosted_broker = st.fixed_dictionaries({
    "name": st.sampled_from(["a", "b", "c"]), "broker_id": st.integers(0, 2), "master": st.booleans(),
    "acting": st.booleans(), "auto": st.booleans(), "topics": st.sets(st.sampled_from(["t", "u"]), max_size=2)})


def _hosted(spec: dict) -> SimpleNamespace:
    configs = {t: TopicConfig(t, 2, 2) for t in spec["topics"]}
    broker = SimpleNamespace(broker_id=spec["broker_id"], topics=SimpleNamespace(get=configs.get), is_acting=spec["acting"])
    return SimpleNamespace(name=spec["name"], is_master=spec["master"], broker=broker,
                           spec=SimpleNamespace(broker=SimpleNamespace(auto_create_topic_enable=spec["auto"])))


@settings(max_examples=300, deadline=None)
@given(st.lists(_hosted_broker, max_size=4), st.sampled_from(["t", "u", "v"]), st.sampled_from([None, "a", "b"]))
def test_the_directory_chooses_the_broker_the_rule_chooses(specs, topic, pinned):
    """ContainerDirectory.local_master_for_topic answers the common case without building the
    views; whatever the hosted brokers, it picks the broker broker_for_send picks."""
    hosted = [_hosted(spec) for spec in specs]
    directory = ContainerDirectory(SimpleNamespace(hosted={i: h for i, h in enumerate(hosted)}), pinned)
    views = [LocalBroker(h.name, h.broker.broker_id, h.is_master, h.spec.broker.auto_create_topic_enable,
                         h.broker.topics.get, h.broker.is_acting) for h in hosted]
    index = broker_for_send(views, topic, pinned)
    chosen = directory.local_master_for_topic(topic)
    assert chosen is (hosted[index].broker if index is not None else None)
