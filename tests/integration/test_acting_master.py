"""Slave acting master (RIP-32) with real processes, SIGKILL and the official Python client.

The deployment of conf/acting-master on free ports (tests/support/acting_cluster.py): a
standalone nameserver with supportActingMaster and notifyMinBrokerIdChanged, containers with
fixed-role replicas and enableSlaveActingMaster.  Each test kills the container holding
broker-a's master with SIGKILL and counts, from the client's own events, what was delivered,
when, from which broker, how often -- lost and duplicated are asserted, never only logged.
"""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import grpc
import pytest

from proto import messaging_definition_pb2 as d
from proto import messaging_service_pb2 as s
from proto import messaging_service_pb2_grpc as g
from tests.support.acting_cluster import ActingCluster
from tests.support.failover_load import ACTING, Client, drain, wait_started, stop_together
from tests.support.raw_client import RawClient

pytestmark = [pytest.mark.integration, pytest.mark.conformance]
PAIR_LAYOUT = (("broker-a", 0), ("broker-b", 0)), (("broker-a", 1), ("broker-b", 1)), (("broker-c", 0),)


def both(cluster: ActingCluster, *indexes: int) -> str:
    return ";".join(cluster.endpoint(i) for i in indexes)


def produce(cluster: ActingCluster, workdir: Path, endpoint: str, topic: str, count: int, *extra: str,
            name: str = "producer") -> list[dict]:
    producer = Client("delay", "--endpoint", endpoint, "--topic", topic, "--count", str(count), *extra,
                      log_path=workdir / f"{name}.log", script=ACTING)
    assert producer.process.wait(90) == 0, (workdir / f"{name}.log").read_text()[-2000:]
    producer.stop()
    sent = [e for e in producer.snapshot() if e["event"] == "sent"]
    assert len(sent) == count, f"only {len(sent)} of {count} sends acknowledged"
    return sent


def consumer(cluster: ActingCluster, workdir: Path, endpoint: str, topic: str, group: str, *extra: str) -> Client:
    client = Client("push", "--endpoint", endpoint, "--topic", topic, "--group", group, *extra,
                    log_path=workdir / f"consumer-{group}.log", script=ACTING)
    wait_started(client)
    return client


def received(client: Client) -> list[dict]:
    return [e for e in client.snapshot() if e["event"] == "recv"]


def bodies(events: list[dict]) -> set[str]:
    return {e["body"] for e in events}


def duplicates(events: list[dict]) -> int:
    return len(events) - len(bodies(events))


def observe(seconds: float) -> None:
    """An observation window for what must NOT happen (a duplicate, a late delivery): nothing to
    wait for, so a fixed window; what must happen is waited for with a deadline (wait_for)."""
    time.sleep(seconds)


def acting_status(cluster: ActingCluster, index: int, broker: str) -> bool:
    status = cluster.broker_status(index, broker)
    return bool(status and status["specialServicesRunning"] and status["acting"])


# --- delay messages, local escape, the master's return -------------------------------------------
def test_due_delay_messages_escape_on_time_and_the_returning_master_delivers_none_twice(tmp_path):
    cluster = ActingCluster(tmp_path).start()
    try:
        cluster.admin("update-topic", "--topic", "delay", "--type", "DELAY", "--queues", "2")
        cluster.admin("update-topic", "--topic", "plain", "--type", "NORMAL", "--queues", "2")
        cluster.admin("update-group", "--group", "g")
        endpoint = both(cluster, 0, 1)
        client = consumer(cluster, tmp_path, endpoint, "delay", "g")
        sent = produce(cluster, tmp_path, endpoint, "delay", 32, "--due-from", "7", "--due-to", "24")
        killed_ms = int(time.time() * 1000)
        cluster.kill(0)
        cluster.wait_for(lambda: acting_status(cluster, 1, "broker-a"), 10, "broker-a's slave acts")
        _check_the_acting_slave(cluster, tmp_path)
        cluster.wait_for(lambda: time.time() * 1000 > killed_ms + 13_000, 20, "the master's absence")
        restarted_ms = int(time.time() * 1000)
        cluster.restart(0)
        cluster.wait_for(lambda: cluster.special_running(0, "broker-a") and not cluster.special_running(1, "broker-a"),
                         20, "the returning master takes over")
        took_over_ms = int(time.time() * 1000)  # a restart next to a busy core takes seconds: the slave acts until here
        last_due = max(e["due"] for e in sent)
        cluster.wait_for(lambda: bodies(received(client)) >= bodies(sent) and time.time() * 1000 > last_due + 3000, 40,
                         "every delay message delivered")
        client.stop()
        got = received(client)
        assert bodies(got) == bodies(sent) and duplicates(got) == 0, f"lost {bodies(sent) - bodies(got)}, {duplicates(got)} twice"
        due = {e["body"]: e["due"] for e in sent}
        lateness = sorted(e["t"] - due[e["body"]] for e in got)
        assert sum(1 for late in lateness if late <= 1000) >= 0.95 * len(lateness), lateness
        origin = {e["body"]: e["broker"] for e in sent}
        escaped = [e for e in got if origin[e["body"]] == "broker-a" and killed_ms + 4000 < due[e["body"]] < restarted_ms]
        assert escaped and all(e["broker"] == "broker-b" for e in escaped), escaped  # the escape target's name
        after = [e for e in got if origin[e["body"]] == "broker-a" and due[e["body"]] > took_over_ms + 1000]
        assert after and all(e["broker"] == "broker-a" for e in after), after  # the master delivers again
    finally:
        cluster.close()


def _check_the_acting_slave(cluster: ActingCluster, workdir: Path) -> None:
    """While broker-a's master is dead: its member set, the read-only route, the acting slave's
    answers to reads and writes, and the surviving master taking writes (RIP-34 degrade)."""
    assert cluster.members("broker-a") == {1: f"127.0.0.1:{cluster.containers[1].admin_port}"}
    assert cluster.admin("broker-member-group", "--broker", "broker-x", check=False).returncode == 1
    ha = json.loads(cluster.admin("ha-status", "--json", "-b", "broker-a").stdout)["groups"][0]
    assert ha["master"]["state"] == "NOT_REGISTERED" and ha["slaves"][0]["specialServicesRunning"] is True
    text = cluster.admin("ha-status", "-b", "broker-a").stdout
    assert "a slave acts for it" in text and "acting" in text, text
    listed = cluster.admin("cluster-list").stdout  # issue 24, defect 8: not "cannot be written or consumed"
    assert "broker-a: no reachable master; slave 1 acts for it" in listed and "cannot be" not in listed, listed
    topics = cluster.admin("topic-list").stdout
    assert "broker-a: no reachable master; slave 1 acts for it" in topics and "cannot be" not in topics, topics
    route = json.loads(cluster.admin("topic-route", "--topic", "plain", "--json").stdout)
    group_a = next(b for b in route["brokerDatas"] if b["brokerName"] == "broker-a")
    queues_a = next(q for q in route["queueDatas"] if q["brokerName"] == "broker-a")
    assert group_a["brokerAddrs"] == {"0": cluster.members("broker-a")[1]}, group_a  # the slave as id 0 ...
    assert queues_a["perm"] == 4, queues_a  # ... read-only
    port = cluster.listen_ports[1][1]  # broker-a's own endpoint in container 2: served there, by the acting slave
    send, offset = asyncio.run(_send_and_query(f"127.0.0.1:{port}"))
    assert send.status.code == d.OK, send.status  # stored by broker-b's master here (issue 24, defect 7)
    assert offset.status.code == d.OK and offset.offset >= 0, offset.status
    produce(cluster, workdir, cluster.endpoint(1), "plain", 10, "--normal", "--due-from", "0", "--due-to", "0",
            name="producer-after-kill")  # broker-b's master, whose slave died with container 1, acknowledges


async def _send_and_query(target: str):
    metadata = (("x-mq-client-id", "acting-test@1"), ("x-mq-language", "PYTHON"))
    message = d.Message(topic=d.Resource(name="plain"), body=b"x", system_properties=d.SystemProperties(
        message_id="0102FC000000000000000000000000ABCD", message_type=d.NORMAL, body_encoding=d.IDENTITY))
    queue = d.MessageQueue(topic=d.Resource(name="plain"), id=0, broker=d.Broker(name="broker-a"))
    async with grpc.aio.insecure_channel(target) as channel:
        stub = g.MessagingServiceStub(channel)
        send = await stub.SendMessage(s.SendMessageRequest(messages=[message]), metadata=metadata, timeout=10)
        offset = await stub.QueryOffset(s.QueryOffsetRequest(message_queue=queue, query_offset_policy=d.END),
                                        metadata=metadata, timeout=10)
    return send, offset


# --- remote escape, and none ----------------------------------------------------------------------
@pytest.mark.parametrize("remote", [True, False], ids=["remote-escape", "escape-disabled"])
def test_with_both_masters_of_the_pair_gone_delays_escape_remotely_or_wait_for_their_master(tmp_path, remote):
    cluster = ActingCluster(tmp_path, layout=PAIR_LAYOUT, broker_keys={"enableRemoteEscape": remote}).start()
    try:
        cluster.admin("update-topic", "--topic", "delay", "--type", "DELAY", "--queues", "2")
        cluster.admin("update-group", "--group", "g")
        endpoint = both(cluster, 0, 1, 2)
        client = consumer(cluster, tmp_path, endpoint, "delay", "g")
        sent = produce(cluster, tmp_path, both(cluster, 0), "delay", 18, "--due-from", "6", "--due-to", "12")
        of_pair = {e["body"] for e in sent if e["broker"] in ("broker-a", "broker-b")}
        assert {e["broker"] for e in sent} >= {"broker-a", "broker-b"}
        cluster.kill(0)  # both masters of the pair: container 2 holds only their slaves
        cluster.wait_for(lambda: acting_status(cluster, 1, "broker-a") and acting_status(cluster, 1, "broker-b"), 10,
                         "both slaves act")
        last_due = max(e["due"] for e in sent)
        if remote:
            cluster.wait_for(lambda: bodies(received(client)) >= bodies(sent), 30, "every delay message delivered")
            got = received(client)
            due = {e["body"]: e["due"] for e in sent}
            assert all(e["broker"] == "broker-c" for e in got), got  # the pair's escaped to the other container's master
            assert sum(1 for e in got if e["t"] - due[e["body"]] <= 1000) >= 0.95 * len(got)
        else:
            observe(max(0.0, (last_due + 3000) / 1000 - time.time()))  # every message due, and then some
            assert bodies(received(client)) & of_pair == set(), "nothing escapes without enableRemoteEscape"
            cluster.restart(0)
            cluster.wait_for(lambda: bodies(received(client)) >= bodies(sent), 30, "the masters deliver on return")
        client.stop()
        got = received(client)
        assert bodies(got) == bodies(sent) and duplicates(got) == 0, f"lost {bodies(sent) - bodies(got)}, {duplicates(got)} twice"
    finally:
        cluster.close()


# --- transactions and pop across the switch ---------------------------------------------------------
def test_transactions_checked_by_the_acting_slave_are_committed_once(tmp_path):
    """Scenario 24: the check answers UNKNOWN, then COMMIT after the master is gone."""
    cluster = ActingCluster(tmp_path, broker_keys={"transactionTimeOut": 1000, "transactionCheckInterval": 1000}).start()
    try:
        cluster.admin("update-topic", "--topic", "tx", "--type", "TRANSACTION", "--queues", "2")
        cluster.admin("update-group", "--group", "g")
        endpoint, flag = both(cluster, 0, 1), tmp_path / "commit"
        client = consumer(cluster, tmp_path, endpoint, "tx", "g")
        producer = Client("transaction", "--endpoint", endpoint, "--topic", "tx", "--count", "10", "--commit-flag",
                          str(flag), log_path=tmp_path / "producer.log", script=ACTING)
        cluster.wait_for(lambda: len({e["body"] for e in producer.snapshot() if e["event"] == "checked"}) >= 10, 30,
                         "every half checked (UNKNOWN) by its master")
        cluster.kill(0)
        cluster.wait_for(lambda: acting_status(cluster, 1, "broker-a"), 10, "broker-a's slave acts")
        flag.write_text("commit")
        sent = {e["body"] for e in producer.snapshot() if e["event"] == "sent"}
        cluster.wait_for(lambda: bodies(received(client)) >= sent, 45, "every committed message consumed")
        cluster.restart(0)
        cluster.wait_for(lambda: cluster.special_running(0, "broker-a"), 20, "the master returns")
        observe(5)  # the master checks halves every second: one it did not adopt would be committed again
        producer.stop()
        client.stop()
        got = received(client)
        assert bodies(got) == sent and duplicates(got) == 0, f"lost {sent - bodies(got)}, {duplicates(got)} twice"
    finally:
        cluster.close()


def test_pop_on_the_acting_slave_acks_and_retries_once(tmp_path):
    """Scenarios 25 and 26: receive, ack and change invisibility on the acting slave; what is
    not acked is retried exactly once (through a retry copy escaped to a live master)."""
    cluster = ActingCluster(tmp_path).start()
    try:
        cluster.admin("update-topic", "--topic", "pop", "--type", "NORMAL", "--queues", "2")
        for group in ("acked", "retried"):
            cluster.admin("update-group", "--group", group)
        endpoint = both(cluster, 0, 1)
        sent = produce(cluster, tmp_path, endpoint, "pop", 20, "--normal", "--due-from", "0", "--due-to", "0")
        on_a = {e["body"] for e in sent if e["broker"] == "broker-a"}
        assert on_a
        cluster.kill(0)
        cluster.wait_for(lambda: acting_status(cluster, 1, "broker-a"), 10, "broker-a's slave acts")
        acked = consumer(cluster, tmp_path, endpoint, "pop", "acked")
        retried = consumer(cluster, tmp_path, endpoint, "pop", "retried", "--fail-first")
        cluster.wait_for(lambda: bodies(received(acked)) >= bodies(sent), 30, "group acked consumed everything")
        cluster.wait_for(lambda: bodies([e for e in received(retried) if e["attempt"] >= 2]) >= bodies(sent), 45,
                         "group retried got every message a second time")
        from_slave = {e["body"] for e in received(acked) if e["broker"] == "broker-a"}
        assert from_slave == on_a  # broker-a's messages came from its acting slave
        retries_of_a = [e for e in received(retried) if e["body"] in on_a and e["attempt"] == 2]
        assert {e["broker"] for e in retries_of_a} == {"broker-b"}  # the retry copies escaped to broker-b
        cluster.restart(0)
        cluster.wait_for(lambda: cluster.special_running(0, "broker-a"), 20, "the master returns")
        observe(5)  # the master revives every second: an entry it did not adopt would come back
        stop_together(acked, retried)
        assert duplicates(received(acked)) == 0, "an ack on the acting slave held after the master's return"
        per_body = {b: sorted(e["attempt"] for e in received(retried) if e["body"] == b) for b in bodies(sent)}
        assert all(attempts == [1, 2] for attempts in per_body.values()), per_body  # retried exactly once
    finally:
        cluster.close()


def test_strict_fifo_locks_stop_an_acting_slave_alone_and_let_its_master_deliver(tmp_path):
    """lockInStrictMode with two replicas: the master delivers a FIFO queue with its slave's grant
    (LockQueues between the containers); an acting slave alone is no quorum and delivers none of
    its FIFO queues; the returning master delivers them, in order, once."""
    cluster = ActingCluster(tmp_path, broker_keys={"lockInStrictMode": True}).start()
    try:
        cluster.admin("update-topic", "--topic", "fifo", "--type", "FIFO", "--queues", "2", "-b", "broker-a")
        cluster.admin("update-group", "--group", "ordered", "--fifo")
        endpoint = both(cluster, 0, 1)
        first = produce(cluster, tmp_path, endpoint, "fifo", 5, "--message-group", "m", name="producer-1")
        client = consumer(cluster, tmp_path, endpoint, "fifo", "ordered")
        cluster.wait_for(lambda: bodies(received(client)) >= bodies(first), 30, "the master delivers with the lock quorum")
        client.stop()
        second = produce(cluster, tmp_path, endpoint, "fifo", 5, "--message-group", "m", "--prefix", "n",
                         name="producer-2")
        cluster.kill(0)
        cluster.wait_for(lambda: acting_status(cluster, 1, "broker-a"), 10, "broker-a's slave acts")
        # a consumer configures itself from the first settings it is given, wherever they come
        # from: container 2's endpoint, or broker-a's own endpoint there, where only the acting
        # slave serves the topic (it answered the defaults, non-FIFO: received out of order)
        broker_a_there = f"127.0.0.1:{cluster.listen_ports[1][[n for n, _ in cluster.layout[1]].index('broker-a')]}"
        for where in (cluster.endpoint(1), broker_a_there):
            raw = RawClient(where)
            try:
                assert raw.consumer_settings("ordered", "fifo").fifo, f"{where} says the FIFO group is not FIFO"
            finally:
                raw.close()
        client = consumer(cluster, tmp_path, endpoint, "fifo", "ordered")
        observe(6)
        assert received(client) == [], "an acting slave alone holds no quorum of two replicas"
        cluster.restart(0)
        cluster.wait_for(lambda: bodies(received(client)) >= bodies(second), 40, "the returning master delivers them")
        client.stop()
        got = [e["body"] for e in received(client)]
        assert got == [e["body"] for e in second], got  # in order, once
    finally:
        cluster.close()



# --- sends through the kill (issue 24, defect 7) ---------------------------------------------------
def test_no_send_fails_and_none_is_lost_while_the_slave_starts_acting(tmp_path):
    """The official producer at 200 msg/s on container 2's client endpoint through the SIGKILL of
    broker-a's master: its route still names broker-a's queues writable (until its 30 s refresh)
    and its channel moves to broker-a's endpoint in container 2, where the acting slave is.  The
    client retries a failed send on the next queue of its round robin, often broker-a's again, so
    a refusal there failed sends (24 of 223 in the issue).  Every send must be acknowledged, and
    every acknowledged message consumed."""
    cluster = ActingCluster(tmp_path).start()
    try:
        cluster.admin("update-topic", "--topic", "steady", "--type", "NORMAL", "--queues", "4")
        cluster.admin("update-group", "--group", "steady-group")
        endpoint = cluster.endpoint(1)
        producer = Client("produce", "--endpoint", endpoint, "--topic", "steady", "--rate", "200", "--seconds", "600",
                          log_path=tmp_path / "producer.log")
        consumer_client = Client("consume", "--endpoint", endpoint, "--topic", "steady", "--group", "steady-group",
                                 "--seconds", "600", log_path=tmp_path / "consumer.log")
        wait_started(producer, consumer_client)
        cluster.wait_for(lambda: sum(e["event"] == "ack" for e in producer.snapshot()) > 200, 30, "the load runs")
        killed_at = time.monotonic()
        cluster.kill(0)
        cluster.wait_for(lambda: acting_status(cluster, 1, "broker-a"), 10, "broker-a's slave acts")
        cluster.wait_for(lambda: time.monotonic() > killed_at + 8, 20, "sends through the acting window")
        producer.stop()
        counts = drain([consumer_client], [producer], timeout_s=60)
        consumer_client.stop()
        failed = [e for e in producer.snapshot() if e["event"] == "fail"]
        after = sum(1 for e in producer.snapshot() if e["event"] == "ack" and e["t"] > killed_at)
        assert failed == [], f"{len(failed)} sends failed, first: {failed[0]}"
        assert after > 600, f"only {after} sends acknowledged after the kill"
        assert counts.lost == set(), f"{len(counts.lost)} acknowledged messages never consumed"
    finally:
        Client.stop_all()
        cluster.close()
