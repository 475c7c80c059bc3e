"""Admin queries while a slave acts for its absent master (issue 24, defect 4).

The admin CLI as a subprocess against a real nameserver with ``supportActingMaster`` and one
container's real admin service over fake brokers: broker-a's master is gone (never
registered) and its slave, id 1, says it acts; broker-b has its master.  The route shows the
acting slave as broker-a's id 0 (the acting-master rewrite); topic-status left broker-a's
queues out and still said ``"complete": true``, and consumer-progress called the slave's
messages "not consumable until the master returns" although the acting slave serves them.
"""
from __future__ import annotations

import json

import pytest

from metadata.topic_config import TopicConfig
from tests.integration.test_admin_cli import Cluster, relaymq
from tests.unit.test_admin_service import FakeAdminBroker, FakeContainer
from services.nameserver.config import NamesrvConfig
from services.nameserver.server import start_nameserver
from metadata.route_types import BrokerIdentity

pytestmark = pytest.mark.integration


class ActingGroup(Cluster):
    """broker-a: only its slave (id 1), acting; broker-b: its master; one container hosts both."""

    def __init__(self):
        self.acting_slave = FakeAdminBroker("broker-a", 1, role="SLAVE")
        self.acting_slave.is_acting = True
        self.other_master = FakeAdminBroker("broker-b")
        for broker in (self.acting_slave, self.other_master):
            broker.topics = broker.topics.with_topic(TopicConfig("T", 2, 2), broker.topics.data_version.next_version(1))
            broker.max_offsets[("T", 0)] = 12
        self.acting_slave.max_offsets[("T", 1)] = 3
        super().__init__()

    async def _start(self):
        import grpc

        from services.admin.service import add_admin_service
        from services.nameserver.client import NameserverClient

        self.container = FakeContainer(self.acting_slave, self.other_master)
        self.nameserver = await start_nameserver(NamesrvConfig(listen_port=0, support_acting_master=True))
        self.namesrv = self.nameserver.address
        self.server = grpc.aio.server()
        add_admin_service(self.server, self.container)
        self.admin = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        await self.server.start()
        self.client = NameserverClient([self.namesrv])
        for broker in (self.acting_slave, self.other_master):
            identity = BrokerIdentity(broker.cluster, broker.name, broker.broker_id)
            await self.client.register_broker(identity, self.admin, "127.0.0.1:8081", broker.topic_table(),
                                              enable_acting_master=True)


@pytest.fixture(scope="module")
def cluster():
    running = ActingGroup()
    yield running
    running.stop()


def ok(*args: str) -> dict:
    result = relaymq(*args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_route_shows_the_acting_slave_as_id_0(cluster):
    route = ok("topic-route", "--topic", "T", "--namesrv", cluster.namesrv, "--json")
    assert {b["brokerName"]: list(b["brokerAddrs"]) for b in route["brokerDatas"]} == {"broker-a": ["0"], "broker-b": ["0"]}


def test_topic_status_reports_the_acting_slaves_queues_marked_and_is_not_complete_without_the_master(cluster):
    status = ok("topic-status", "--topic", "T", "--namesrv", cluster.namesrv, "--json")
    brokers = {(b["brokerName"], b["brokerId"]): b for b in status["brokers"]}
    assert set(brokers) == {("broker-a", 1), ("broker-b", 0)}
    acting = brokers[("broker-a", 1)]
    assert acting["acting"] and acting["role"] == "SLAVE"
    assert [(q["queueId"], q["maxOffset"]) for q in acting["queues"]] == [(0, 12), (1, 3)]
    assert not brokers[("broker-b", 0)]["acting"]
    groups = {g["brokerName"]: g for g in status["groups"]}
    assert groups["broker-a"]["servedBy"] == "acting slave 1" and groups["broker-a"]["master"] == "NOT_REGISTERED"
    assert groups["broker-a"]["servable"] and not groups["broker-a"]["writable"]
    assert not status["complete"]  # broker-a's master did not answer: its own offsets are not in the document
    text = relaymq("topic-status", "--topic", "T", "--namesrv", cluster.namesrv).stdout
    assert "acting slave" in text and "slave 1 acts for it" in text and "cannot be written or consumed" not in text


@pytest.mark.parametrize("scope", [("--topic", "T"), ()], ids=["topic", "cluster"])
def test_consumer_progress_says_the_acting_slave_serves_its_messages(cluster, scope):
    progress = ok("consumer-progress", "--group", "G", *scope, "--namesrv", cluster.namesrv, "--json")
    rows = {(q["brokerName"], q["queueId"]): q for q in progress["queues"]}
    assert rows[("broker-a", 0)]["source"] == "acting slave 1" and not rows[("broker-a", 0)]["stranded"]
    assert progress["strandedLag"] == 0 and progress["totalLag"] == (12 - 7) + 3 + (12 - 7)
    assert progress["complete"]  # every group is served, its lag read where it is served
    text = relaymq("consumer-progress", "--group", "G", *scope, "--namesrv", cluster.namesrv).stdout
    assert "slave 1 acts for it and serves its 8 messages" in text
    assert "not consumable" not in text and "stranded" not in text


def test_with_real_processes_admin_reports_the_group_the_acting_slave_serves(tmp_path):
    """conf/acting-master on free ports: broker-a's master killed, its slave acts; topic-status
    and consumer-progress report broker-a from the acting slave."""
    from tests.support.acting_cluster import ActingCluster
    from tests.support.raw_client import RawClient

    live = ActingCluster(tmp_path).start()
    try:
        live.admin("update-topic", "--topic", "T", "--type", "NORMAL", "--queues", "2", "-b", "broker-a")
        live.admin("update-group", "--group", "G")
        client = RawClient(live.endpoint(0))
        try:
            assert sum(client.send("T", b"x", timeout=10).status.code == 20000 for _ in range(10)) == 10
        finally:
            client.close()
        live.kill(0)
        live.wait_for(lambda: bool((live.broker_status(1, "broker-a") or {}).get("acting")), 15, "broker-a's slave acts")

        def query(*args: str) -> dict:
            return json.loads(live.admin(*args, "--json").stdout)
        progress = query("consumer-progress", "--group", "G", "--topic", "T")
        assert {q["source"] for q in progress["queues"]} == {"acting slave 1"}
        assert progress["totalLag"] == 10 and progress["strandedLag"] == 0 and progress["complete"]
        text = live.admin("consumer-progress", "--group", "G", "--topic", "T").stdout
        assert "slave 1 acts for it and serves its 10 messages" in text and "not consumable" not in text
        status = query("topic-status", "--topic", "T")
        acting = [b for b in status["brokers"] if b["brokerName"] == "broker-a"]
        assert [(b["brokerId"], b["acting"]) for b in acting] == [(1, True)]
        assert sum(q["maxOffset"] for q in acting[0]["queues"]) == 10
        assert status["groups"][0]["servedBy"] == "acting slave 1" and not status["complete"]
    finally:
        live.close()
