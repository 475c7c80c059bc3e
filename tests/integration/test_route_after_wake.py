"""A master woken from SIGSTOP after its successor's election leaves the successor's route alone
(issue 24, defect 1), with real processes: conf/controller-mode on free ports.

Before: when the stopped master woke it stepped down and unregistered broker-a id 0 at the
nameserver -- by then the new master's registration -- and the route had no master until the
new master's next heartbeat (FIFO producers that refreshed in that window moved message groups
to broker-b).  An unregister now names the address and epoch it registered with, and the
nameserver keeps a registration that is not the unregister's own.
"""
from __future__ import annotations

import threading
import time

import grpc
import pytest

from proto import nameserver_pb2 as npb
from proto import nameserver_pb2_grpc
from tests.support.controller_cluster import ControllerModeCluster

pytestmark = pytest.mark.integration


class RouteWatch:
    """Polls a topic's route at the nameserver every ``period_s`` (a thread with a sync gRPC
    stub) and records, per answer, broker-a's members: id -> admin address."""

    def __init__(self, nameserver: str, topic: str, broker: str = "broker-a", period_s: float = 0.05):
        self.topic, self.broker, self.period_s = topic, broker, period_s
        self.samples: list[tuple[float, dict[int, str]]] = []
        self._channel = grpc.insecure_channel(nameserver)
        self._stub = nameserver_pb2_grpc.NameserverServiceStub(self._channel)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _members(self) -> dict[int, str] | None:
        try:
            reply = self._stub.QueryRoute(npb.NameserverQueryRouteRequest(topic=self.topic), timeout=1)
        except grpc.RpcError:
            return None  # no answer: no sample
        members = next((b.members for b in reply.brokers if b.broker_name == self.broker), [])
        return {m.broker_id: m.address for m in members}

    def _run(self) -> None:
        while not self._stop.is_set():
            members = self._members()
            if members is not None:
                self.samples.append((time.monotonic(), members))
            self._stop.wait(self.period_s)

    def current(self) -> dict[int, str]:
        return self.samples[-1][1] if self.samples else {}

    def master(self) -> str:
        return self.current().get(0, "")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._channel.close()


def wait_for(condition, timeout_s: float, what) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {what() if callable(what) else what}"
        time.sleep(0.05)


def role_of(cluster: ControllerModeCluster, index: int, broker: str) -> str:
    import json

    container = cluster.containers[index]
    done = container.admin("broker-status", "--container", f"127.0.0.1:{container.admin_port}", "--json")
    if done.returncode != 0:
        return ""
    document = json.loads(done.stdout)
    return next((b["status"]["ha"]["role"] for b in document["brokers"] if b["brokerName"] == broker), "")


def test_a_woken_master_leaves_its_successors_route_alone(tmp_path):
    cluster = ControllerModeCluster(tmp_path).start()
    watch = None
    try:
        cluster.admin_when_registered("update-topic", "--topic", "T", "--type", "FIFO", "--queues", "2", "-b", "broker-a")
        # an empty slave joins the SyncStateSet without a write (defect 5): the group is redundant from its start
        wait_for(lambda: len(getattr(cluster.view("broker-a"), "sync_state_set", ())) == 2, 20,
                 lambda: f"broker-a's slave joins the SyncStateSet: {cluster.view('broker-a')}")
        successor = f":{cluster.containers[1].admin_port}"
        watch = RouteWatch(cluster.namesrv, "T")
        old_master = f":{cluster.containers[0].admin_port}"
        wait_for(lambda: watch.master().endswith(old_master), 10, "the route names broker-a")
        cluster.pause(0)
        stopped_at = time.monotonic()
        wait_for(lambda: cluster.master_container("broker-a") == 1, 15, "container 2 becomes broker-a's master")
        wait_for(lambda: watch.master().endswith(successor), 10, lambda: f"the route names the new master: {watch.current()}")
        routed_at = watch.samples[-1][0]
        time.sleep(max(0.0, 5.0 - (time.monotonic() - stopped_at)))  # stopped for 5 s, as in the report
        cluster.resume(0)
        wait_for(lambda: role_of(cluster, 0, "broker-a") == "SLAVE", 20, "the woken master steps down")
        # it unregisters id 0 before it registers under its new id: watch until the route shows that, and on
        wait_for(lambda: any(i != 0 and a.endswith(old_master) for i, a in watch.current().items()), 10,
                 lambda: f"the woken master registers as a slave: {watch.current()}")
        time.sleep(1.0)
        watch.stop()
        after = [(t - routed_at, members.get(0, "")) for t, members in watch.samples if t >= routed_at]
        assert len(after) > 50, f"too few route samples: {len(after)}"
        wrong = [(round(t, 3), master or "no master") for t, master in after if not master.endswith(successor)]
        assert not wrong, f"broker-a's id 0 left the new master ({successor}), s after it was routed: {wrong[:10]}"
        # what the polls could fall between: the nameserver's own account
        log = (tmp_path / "namesrv.log").read_text()
        assert "broker-a_0 left the route (UNREGISTERED)" not in log
        assert f"unregister of DefaultCluster_broker-a_0 from 127.0.0.1{old_master} ignored (HELD_BY_ANOTHER_ADDRESS" in log
    finally:
        if watch is not None:
            watch.stop()
        cluster.close()
