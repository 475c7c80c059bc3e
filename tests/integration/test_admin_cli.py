"""The admin CLI as a subprocess against a real nameserver and a real admin service over a fake container."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import grpc
import pytest

from metadata.route_types import BrokerIdentity
from services.admin.service import add_admin_service
from services.nameserver.client import NameserverClient
from services.nameserver.config import NamesrvConfig
from services.nameserver.server import start_nameserver
from tests.unit.test_admin_service import FakeAdminBroker, FakeContainer

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def relaymq(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "container", "admin", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


class Cluster:
    """A nameserver and one container's admin service on a background event loop."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.master = FakeAdminBroker("broker-a")
        self.slave = FakeAdminBroker("broker-b", 1, role="SLAVE")
        self.container = FakeContainer(self.master, self.slave)
        self.run(self._start())

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    async def _start(self):
        self.nameserver = await start_nameserver(NamesrvConfig(listen_port=0))
        self.namesrv = self.nameserver.address
        self.server = grpc.aio.server()
        add_admin_service(self.server, self.container, on_topics_changed=self._register)
        self.admin = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        await self.server.start()
        self.client = NameserverClient([self.namesrv])
        await self._register("broker-a")

    async def _register(self, broker_name: str) -> None:
        broker = self.container.brokers()[broker_name]
        identity = BrokerIdentity(broker.cluster, broker.name, broker.broker_id)
        await self.client.register_broker(identity, self.admin, "127.0.0.1:8081", broker.topic_table())

    def stop(self):
        async def stop():
            await self.client.close()
            await self.server.stop(0)
            await self.nameserver.stop()
        self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def cluster():
    running = Cluster()
    yield running
    running.stop()


def ok(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_update_topic_then_route_and_status(cluster):
    created = ok(relaymq("update-topic", "--topic", "Orders", "--type", "FIFO", "--queues", "2", "--namesrv", cluster.namesrv, "--json"))
    assert created["brokers"] == ["broker-a"]
    assert cluster.master.topics.topics["Orders"].message_type == "FIFO"
    route = ok(relaymq("topic-route", "--topic", "Orders", "--namesrv", cluster.namesrv, "--json"))
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": cluster.admin}
    assert route["queueDatas"][0]["messageType"] == "FIFO" and route["queueDatas"][0]["writeQueueNums"] == 2
    cluster.master.max_offsets[("Orders", 1)] = 5
    status = ok(relaymq("topic-status", "--topic", "Orders", "--namesrv", cluster.namesrv, "--json"))
    assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in status["brokers"][0]["queues"]] == [(0, 0, 0), (1, 0, 5)]
    people = relaymq("topic-status", "--topic", "Orders", "--namesrv", cluster.namesrv)
    assert people.returncode == 0 and people.stdout.splitlines()[0].split()[:3] == ["BROKER", "ID", "QUEUE"]


def test_update_group_and_consumer_progress(cluster):
    ok(relaymq("update-topic", "--topic", "T", "--queues", "1", "--namesrv", cluster.namesrv, "--json"))
    group = ok(relaymq("update-group", "--group", "G", "--fifo", "--max-attempts", "5", "--namesrv", cluster.namesrv, "--json"))
    assert group["brokers"] == ["broker-a"]
    assert cluster.master.groups.groups["G"].retry_max_times == 4 and cluster.master.groups.groups["G"].consume_message_orderly
    cluster.master.max_offsets[("T", 0)] = 12
    progress = ok(relaymq("consumer-progress", "--group", "G", "--topic", "T", "--namesrv", cluster.namesrv, "--json"))
    assert progress["queues"] == [{"topic": "T", "brokerName": "broker-a", "brokerId": 0, "queueId": 0, "brokerOffset": 12,
                                   "consumerOffset": 7, "inflight": 0, "lag": 5, "source": "master", "stranded": False}]
    assert progress["totalLag"] == 5 and progress["strandedLag"] == 0 and progress["complete"]


def test_cluster_list_and_broker_status(cluster):
    listed = ok(relaymq("cluster-list", "--namesrv", cluster.namesrv, "--json"))
    assert [(b["brokerName"], b["address"]) for b in listed["brokers"]] == [("broker-a", cluster.admin)]
    status = ok(relaymq("broker-status", "--broker", "broker-a", "--namesrv", cluster.namesrv, "--json"))
    assert status["brokers"][0]["status"]["putTps"] == 1.5 and status["brokers"][0]["role"] == "MASTER"


def test_add_and_remove_broker_errors_are_one_line(cluster):
    added = relaymq("add-broker", "--container", cluster.admin, "--config-path", " ")
    assert added.returncode == 1
    assert added.stderr.strip() == "relaymq: admin refused: CONFIG_PATH_EMPTY: addBroker config path is empty"
    removed = relaymq("remove-broker", "--container", cluster.admin, "--broker", "ghost", "--broker-id", "0")
    assert removed.returncode == 1 and removed.stderr.strip() == "relaymq: admin refused: BROKER_NOT_EXIST: Broker not exist"


def test_bad_arguments_and_unreachable_servers(cluster):
    bad_type = relaymq("update-topic", "--topic", "T", "--type", "WEIRD")
    assert bad_type.returncode == 2 and "invalid choice: 'WEIRD'" in bad_type.stderr
    negative = relaymq("update-topic", "--topic", "T", "--queues", "-1")
    assert negative.returncode == 2 and "must not be negative" in negative.stderr
    bad_name = relaymq("update-topic", "--topic", "bad name", "--namesrv", cluster.namesrv)
    assert bad_name.returncode == 2 and "'bad name' is not a topic name" in bad_name.stderr
    no_cluster = relaymq("update-topic", "--topic", "T", "--cluster", "Nope", "--namesrv", cluster.namesrv)
    assert no_cluster.returncode == 1 and "cluster Nope has no master" in no_cluster.stderr
    down = relaymq("cluster-list", "--namesrv", "127.0.0.1:1", "--timeout-ms", "2000")
    assert down.returncode == 1 and down.stderr.startswith("relaymq: cannot reach nameserver 127.0.0.1:1")
    gone = relaymq("add-broker", "--container", "127.0.0.1:1", "--config-path", "x", "--timeout-ms", "2000")
    assert gone.returncode == 1 and gone.stderr.strip() == "relaymq: container 127.0.0.1:1 is unreachable (UNAVAILABLE)"
