"""Automatic failover under the controller, with real processes and the official Python client.

The deployment of conf/controller-mode on free ports: a nameserver with the embedded controller
(three standalone controllers for the last test) and two containers, each with a replica of
broker-a and broker-b.  The official client sends NORMAL and FIFO messages (two message
groups) under SYNC_FLUSH and allAckInSyncStateSet while the container holding broker-a's
master is killed with SIGKILL, or stopped with SIGSTOP, and later comes back.  Afterwards every
acknowledged message must be consumed, FIFO order must hold within each group, and the old
master must have rejoined as a slave whose log equals the new master's.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.controller_cluster import ControllerModeCluster
from tests.support.failover_load import Client, acked_after, drain, steady_load, stop_together

pytestmark = [pytest.mark.integration, pytest.mark.conformance]


def start_load(cluster: ControllerModeCluster, logs: Path) -> tuple[Client, list[Client]]:
    return steady_load(cluster.endpoint(1), logs)


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {what() if callable(what) else what}"
        time.sleep(0.05)


def ha_of(cluster: ControllerModeCluster, index: int, broker: str) -> dict:
    done = cluster.containers[index].admin("broker-status", "--container",
                                           f"127.0.0.1:{cluster.containers[index].admin_port}", "--json")
    document = json.loads(done.stdout)
    return next(b["status"]["ha"] for b in document["brokers"] if b["brokerName"] == broker)


def offsets_version(cluster: ControllerModeCluster, index: int):
    """The DataVersion of broker-a's consumer offsets on the replica in container ``index``."""
    from services.offset_fetch import AdminReplicaSource, FetchConfig, ReplicaTarget

    target = ReplicaTarget("broker-a", f"127.0.0.1:{cluster.containers[index].admin_port}")
    return AdminReplicaSource(FetchConfig()).fetch(target, 10).table.data_version


def log_bytes(container_dir: Path, broker: str, end: int) -> bytes:
    segments = sorted((container_dir / broker / "commitlog").iterdir())
    data = b"".join(path.read_bytes() for path in segments)
    start = int(segments[0].name)
    return data[:end - start]


def finish(cluster: ControllerModeCluster, producer: Client, consumers: list[Client]):
    producer.stop()
    counts = drain(consumers, [producer], timeout_s=90)
    stop_together(*consumers)
    return counts


def assert_logs_equal(cluster: ControllerModeCluster, broker: str) -> None:
    """Both replicas of ``broker`` hold the same bytes (the slave caught up, nothing diverged)."""
    wait_for(lambda: len({ha_of(cluster, i, broker)["maxOffset"] for i in (0, 1)}) == 1, 30,
             lambda: f"{broker}'s replicas converge: {[ha_of(cluster, i, broker) for i in (0, 1)]}")
    end = ha_of(cluster, 0, broker)["maxOffset"]
    for container in cluster.containers:
        assert container.stop() == 0
    assert log_bytes(cluster.containers[0].data_dir, broker, end) == log_bytes(cluster.containers[1].data_dir, broker, end)


@pytest.fixture
def cluster(tmp_path):
    cluster = ControllerModeCluster(tmp_path).start()
    try:
        cluster.create_load_topics()
        yield cluster
    finally:  # also when the topics could not be made: no process outlives the test
        cluster.close()


def test_kill_9_of_a_master_fails_over_loses_nothing_and_the_old_master_rejoins_as_a_slave(cluster, tmp_path):
    producer, consumers = start_load(cluster, tmp_path)
    wait_for(lambda: acked_after(producer, 0) > 100, 30, "the load runs")
    killed_at = time.monotonic()
    cluster.kill(0)
    wait_for(lambda: cluster.master_container("broker-a") == 1, 10, "container 2 becomes broker-a's master")
    wait_for(lambda: acked_after(producer, killed_at) > 100, 10, "sends keep being acknowledged")
    fifo_after = [e for e in producer.snapshot() if e["event"] == "ack" and e["kind"] == "fifo" and e["t"] > killed_at]
    assert fifo_after, "FIFO sends resumed after the kill"
    cluster.restart_container(0)
    wait_for(lambda: ha_of(cluster, 0, "broker-a")["role"] == "SLAVE", 20, "the old master rejoins as a slave")
    wait_for(lambda: acked_after(producer, time.monotonic()) >= 0 and acked_after(producer, killed_at) > 300, 20,
             "the load continues with the old master back")
    epoch = ha_of(cluster, 1, "broker-a")["masterEpoch"]  # scenario 33: the new master's tables carry its epoch
    assert epoch >= 2 and offsets_version(cluster, 1).state_version == epoch
    counts = finish(cluster, producer, consumers)
    assert counts.lost == set(), f"{len(counts.lost)} acknowledged messages never consumed"
    assert counts.reorders() == 0
    assert len(counts.acked) > 300
    assert_logs_equal(cluster, "broker-a")


def test_sigstop_of_a_master_fails_over_and_the_woken_master_takes_no_write(cluster, tmp_path):
    producer, consumers = start_load(cluster, tmp_path)
    wait_for(lambda: acked_after(producer, 0) > 100, 30, "the load runs")
    cluster.pause(0)
    stopped_at = time.monotonic()
    wait_for(lambda: cluster.master_container("broker-a") == 1, 15, "container 2 becomes broker-a's master")
    wait_for(lambda: acked_after(producer, stopped_at) > 50, 15, "sends keep being acknowledged")
    cluster.resume(0)
    woke_at = time.monotonic()
    wait_for(lambda: ha_of(cluster, 0, "broker-a")["role"] == "SLAVE", 20, "the woken master steps down")
    wait_for(lambda: acked_after(producer, woke_at) > 100, 20, "the load continues after the wake-up")
    counts = finish(cluster, producer, consumers)
    assert counts.lost == set(), f"{len(counts.lost)} acknowledged messages never consumed"
    assert counts.reorders() == 0
    assert_logs_equal(cluster, "broker-a")


def test_master_and_controller_leader_killed_together(tmp_path):
    cluster = ControllerModeCluster(tmp_path, controllers=3).start()
    try:
        cluster.create_load_topics()
        producer, consumers = start_load(cluster, tmp_path)
        wait_for(lambda: acked_after(producer, 0) > 100, 30, "the load runs")
        leader = _controller_leader(cluster)
        killed_at = time.monotonic()
        cluster.controller_processes[leader].kill()
        cluster.kill(0)
        wait_for(lambda: cluster.master_container("broker-a") == 1, 20, "container 2 becomes broker-a's master")
        wait_for(lambda: acked_after(producer, killed_at) > 100, 15, "sends keep being acknowledged")
        counts = finish(cluster, producer, consumers)
        assert counts.lost == set(), f"{len(counts.lost)} acknowledged messages never consumed"
        assert counts.reorders() == 0
    finally:
        cluster.close()


def _controller_leader(cluster: ControllerModeCluster) -> int:
    done = cluster.containers[1].admin("get-controller-metadata", "--controller", cluster.controller_addr, "--json")
    leader = json.loads(done.stdout)["leaderAddress"]
    return [f"127.0.0.1:{p}" for p in cluster.controller_ports].index(leader)


def test_the_data_plane_keeps_working_while_every_controller_is_down(cluster, tmp_path):
    """Scenario 53: with the controller (and the nameserver it lives in) gone, masters keep
    taking writes and serving reads; nothing is lost."""
    producer, consumers = start_load(cluster, tmp_path)
    wait_for(lambda: acked_after(producer, 0) > 100, 30, "the load runs")
    cluster.namesrv_process.kill()
    cluster.namesrv_process.wait()
    down_at = time.monotonic()
    wait_for(lambda: acked_after(producer, down_at) > 150, 20, "sends keep being acknowledged without a controller")
    assert {ha_of(cluster, 0, "broker-a")["role"], ha_of(cluster, 1, "broker-b")["role"]} == {"MASTER"}
    counts = finish(cluster, producer, consumers)
    assert counts.lost == set(), f"{len(counts.lost)} acknowledged messages never consumed"
    assert counts.reorders() == 0
    for consumer in consumers:  # with the nameserver gone too, a receive that found nothing here still learns
        events = consumer.snapshot()  # of the other broker's messages (the route it last gave), and ends at once
        last = max(e["t"] for e in events if e["event"] == "recv")
        waited_out = [e for e in events if e["event"] == "batch" and e["n"] == 0 and e["receive_ms"] >= 4000
                      and e["t"] < last]
        assert waited_out == [], f"{len(waited_out)} receives waited out their long poll while messages were to come"
    for container in cluster.containers:  # the controller being down is said once, not a traceback a heartbeat
        text = container.log_path.read_text()
        assert "Traceback" not in text and text.count("container report: no controller answered") == 1, text[-3000:]


def test_elect_master_moves_who_serves(cluster, tmp_path):
    """``relaymq admin elect-master`` changes who serves, not only the controller's table."""
    producer, consumers = start_load(cluster, tmp_path)
    wait_for(lambda: acked_after(producer, 0) > 100, 30, "the load runs")
    view = cluster.view("broker-a")
    other = next(i for i in view.sync_state_set if i != view.master_broker_id)
    moved_at = time.monotonic()
    elected = cluster.containers[1].admin("elect-master", "--controller", cluster.controller_addr, "--broker",
                                          "broker-a", "--broker-id", str(other))
    assert elected.returncode == 0, elected.stdout + elected.stderr
    wait_for(lambda: cluster.master_container("broker-a") == 1, 10, "container 2 becomes broker-a's master")
    wait_for(lambda: ha_of(cluster, 1, "broker-a")["role"] == "MASTER" and ha_of(cluster, 0, "broker-a")["role"] == "SLAVE",
             10, "the replicas switch roles")
    wait_for(lambda: acked_after(producer, moved_at) > 100, 15, "sends keep being acknowledged")
    counts = finish(cluster, producer, consumers)
    assert counts.lost == set(), f"{len(counts.lost)} acknowledged messages never consumed"
    assert counts.reorders() == 0


def _relayed(port: int, method: str = "", via: str = "") -> float:
    """relaymq_relayed_calls_total of the container whose metrics listen on ``port`` (of one
    method and path when given)."""
    import re
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return sum(float(m.group(2)) for m in re.finditer(r"relaymq_relayed_calls_total\{([^}]*)\} (\S+)", text)
               if (not method or f'method="{method}"' in m.group(1)) and (not via or f'via="{via}"' in m.group(1)))


def test_after_a_failback_clients_come_back_to_the_masters_own_endpoint(tmp_path):
    """The official clients keep one connection over a group's replica endpoints; after a kill
    of broker-a's master they moved to the other replica's endpoint, and once the old master
    was elected back every call was relayed by that replica for good.  A broker endpoint now
    ends client connections after brokerEndpointMaxConnectionAgeMillis (GOAWAY): the clients
    reconnect to the lowest address, the master's own, and the relaying stops."""
    from tests.support.container_process import free_ports

    metrics = free_ports(2)
    keys = [{"metricsPromExporterPort": port, "brokerEndpointMaxConnectionAgeMillis": 2000} for port in metrics]
    cluster = ControllerModeCluster(tmp_path, container_keys=keys).start()
    try:
        cluster.create_load_topics()
        producer, consumers = start_load(cluster, tmp_path)
        wait_for(lambda: acked_after(producer, 0) > 200, 30, "the load runs")
        cluster.kill(0)
        wait_for(lambda: cluster.master_container("broker-a") == 1, 10, "container 2 becomes broker-a's master")
        cluster.restart_container(0)
        wait_for(lambda: len((cluster.view("broker-a") or _NO_VIEW).sync_state_set) == 2, 30, "the old master rejoins in sync")
        view = cluster.view("broker-a")
        back = next(i for i, address in view.members.items() if address.endswith(f":{cluster.containers[0].admin_port}"))
        elected = cluster.containers[1].admin("elect-master", "--controller", cluster.controller_addr, "--broker",
                                              "broker-a", "--broker-id", str(back))
        assert elected.returncode == 0, elected.stdout + elected.stderr
        wait_for(lambda: cluster.master_container("broker-a") == 0, 10, "broker-a's master is back in container 1")
        # Clients reach broker-a through whichever replica endpoint their connection has; a
        # replica that is not master relays.  Which container relays depends on when each
        # connection last aged out, so count both.
        relayed = lambda: _relayed(metrics[0]) + _relayed(metrics[1])  # noqa: E731
        wait_for(lambda: relayed() > 0, 10, "some calls reached a replica that is not master and were relayed")
        sends = lambda via: sum(_relayed(port, "SendMessage", via) for port in metrics)  # noqa: E731
        wait_for(lambda: sends("link") > 0, 10, "sends relayed over a relay link")
        assert sends("grpc") == 0, "a send relayed over gRPC although the master's container takes relay links"

        def relaying_stopped() -> bool:
            before = relayed()
            time.sleep(1.0)
            return relayed() == before
        wait_for(relaying_stopped, 30, "the clients come back to broker-a's own endpoint: no call relayed for 1 s")
        assert acked_after(producer, time.monotonic() - 1.0) > 50  # while the load goes on
        counts = finish(cluster, producer, consumers)
        assert counts.lost == set(), f"{len(counts.lost)} acknowledged messages never consumed"
        assert counts.reorders() == 0
    finally:
        cluster.close()


class _NoView:
    sync_state_set = ()


_NO_VIEW = _NoView()
