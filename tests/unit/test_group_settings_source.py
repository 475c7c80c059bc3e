"""Which local broker answers a consumer group's settings (FIFO or not, attempts) in a Telemetry
settings reply and QueryAssignment: a master of one of its topics first; with none here (a slave
acting for its absent master, a replica's own endpoint, a container left with slaves only), any
local broker that knows the group.  A consumer configures itself from the first settings it is
given: defaults there made a FIFO consumer consume concurrently, out of order."""
from __future__ import annotations

from services.broker.api import GroupSettings
from services.messaging.config import MessagingConfig
from services.messaging.servicer import MessagingService

ORDERED = GroupSettings(fifo=True, max_delivery_attempts=4, known=True)


class Broker:
    def __init__(self, name: str, topics=(), groups=None):
        self.name, self.topics, self.groups = name, set(topics), groups or {}

    def group_settings(self, group: str) -> GroupSettings:
        return self.groups.get(group, GroupSettings())


class Directory:
    def __init__(self, masters, everyone):
        self.masters, self.everyone = masters, everyone

    def local_master_for_topic(self, topic):
        return next((b for b in self.masters if topic in b.topics), None)

    def local_brokers(self):
        return list(self.everyone)


def settings(directory, topics=("fifo",)) -> GroupSettings:
    return MessagingService(directory, MessagingConfig(), clock=None, registry=None).group_settings("ordered", topics)


def test_a_master_of_the_topic_answers_first():
    master = Broker("broker-a", ["fifo"], {"ordered": ORDERED})
    other = Broker("broker-b", [], {"ordered": GroupSettings(fifo=False, known=True)})
    assert settings(Directory([master], [other, master])) is ORDERED


def test_with_only_an_acting_slave_of_the_topic_here_the_group_it_knows_answers():
    acting_slave = Broker("broker-a", ["fifo"], {"ordered": ORDERED})  # no master of "fifo" here
    other_master = Broker("broker-b", [])  # a master without the topic nor the group
    assert settings(Directory([other_master], [other_master, acting_slave])).fifo is True


def test_a_master_that_does_not_know_the_group_gives_way_to_a_broker_that_does():
    master = Broker("broker-b", ["fifo"])
    slave = Broker("broker-a", ["fifo"], {"ordered": ORDERED})
    assert settings(Directory([master], [master, slave])) is ORDERED


def test_a_group_nobody_here_knows_gets_the_defaults():
    assert settings(Directory([], [Broker("broker-a", ["fifo"])])) == GroupSettings()
    assert settings(Directory([Broker("broker-a", ["fifo"])], [])) == GroupSettings()
