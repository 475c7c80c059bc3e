"""Moving a broker between containers (issue 26, docs/reassign.md) with ``relaymq admin
reassign-broker``, on the deployment of conf/reassign (tests/support/reassign_cluster.py), real
processes and the official client sending and receiving throughout: 300 NORMAL and 100 FIFO
messages a second (8 message groups), producer and consumers connected to container-1's
endpoint only, so every call after a move away from it reaches the broker through container-1's
relay until the clients' routes refresh.

The last test runs the controller as three members and kills the leader mid-move.

Each test counts what users would: acknowledged messages lost (0), FIFO messages reordered (0),
sends that failed, and where the broker ends (exactly one container serves it, the one the
command names)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store.ownership_files import read_ledger
from tests.support.failover_load import Client, acked_after, drain, steady_load, wait_started, stop_together
from tests.support.reassign_cluster import ReassignCluster

pytestmark = [pytest.mark.integration, pytest.mark.conformance]


def start_load(cluster: ReassignCluster, logs: Path) -> tuple[Client, list[Client]]:
    endpoint = cluster.endpoint(1)
    for args in (("update-topic", "--topic", "normal", "--type", "NORMAL", "--queues", "4"),
                 ("update-topic", "--topic", "fifo", "--type", "FIFO", "--queues", "4"),
                 ("update-group", "--group", "normal-group"), ("update-group", "--group", "fifo-group", "--fifo")):
        done = cluster.admin(*args)
        assert done.returncode == 0, done.stdout + done.stderr
    return steady_load(endpoint, logs, rate=300)


def fails(producer: Client) -> list[dict]:
    return [e for e in producer.snapshot() if e["event"] == "fail"]


def move(cluster: ReassignCluster, to: int, *extra: str) -> tuple[int, dict]:
    done = cluster.admin("reassign-broker", "--broker", "broker-a", "--to", cluster.endpoint(to), "--execute", "--json",
                         *extra)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def sends_go_on_through_the_relay(cluster: ReassignCluster, producer: Client) -> None:
    """After container-1 dropped broker-a (taken over while it was stopped), the clients,
    connected to container-1 only, go on through its relay at once: no send is refused as not
    served there (the official client would find the new owner only at its 30 s route refresh)."""
    dropped = time.monotonic()
    cluster.wait_for(lambda: acked_after(producer, time.monotonic() - 1) > 200, 10, "sends go on after the wake")
    refused = [e for e in fails(producer) if e["t"] > dropped and "is served here" in e.get("error", "")]
    assert refused == [], refused[:3]


def finish(producer: Client, consumers: list[Client]):
    producer.stop()
    counts = drain(consumers, [producer], timeout_s=90)
    stop_together(*consumers)
    return counts


@pytest.fixture
def cluster(tmp_path):
    cluster = ReassignCluster(tmp_path / "work", reassignReleaseTimeoutMillis=2000, reassignOpenTimeoutMillis=4000)
    try:
        yield cluster.start_all()
    finally:
        cluster.close()


def test_a_move_a_move_back_and_a_rolled_back_move_under_load_lose_nothing(cluster, tmp_path):
    """A move and a move back: no send fails.  Then a move whose target is stopped (SIGSTOP)
    once it is committed (the source, stopped too for that moment, holds it in COMMITTED): the
    source, woken, releases; the target does not open within reassignOpenTimeoutMillis; the
    source takes the broker back at a newer epoch, and the command exits 1 naming the rollback.
    The woken target's takeover, if its Open is still queued, would be at the older epoch,
    which the store's claims refuse: exactly one container serves."""
    plan = cluster.admin("reassign-broker", "--broker", "broker-a", "--to", cluster.endpoint(2))
    assert plan.returncode == 0 and "Dry run: nothing changed" in plan.stdout, plan.stdout + plan.stderr
    assert f"--to {cluster.endpoint(1)} --execute" in plan.stdout  # the rollback command
    assert cluster.moves_list()["moves"].get("active") == []
    nowhere = cluster.admin("reassign-broker", "--broker", "broker-a", "--to", cluster.endpoint(1), "--execute")
    assert nowhere.returncode == 1 and "already served by" in nowhere.stderr, nowhere.stdout + nowhere.stderr
    producer, consumers = start_load(cluster, tmp_path)
    cluster.wait_for(lambda: acked_after(producer, 0) > 600, 30, "the load runs")

    code, there = move(cluster, 2)
    assert code == 0 and there["move"]["step"] == "DONE" and there["serving"] == cluster.endpoint(2), there
    assert cluster.served_by("broker-a") == [cluster.endpoint(2)]
    moved_at = time.monotonic()
    cluster.wait_for(lambda: acked_after(producer, moved_at) > 600, 30, "sends go on through container-1's relay")

    code, back = move(cluster, 1)
    assert code == 0 and back["serving"] == cluster.endpoint(1) and back["move"]["epoch"] == there["move"]["epoch"] + 1
    back_at = time.monotonic()
    cluster.wait_for(lambda: acked_after(producer, back_at) > 600, 30, "sends go on after the move back")
    verify = cluster.admin("reassign-broker", "--verify", "--broker", "broker-a", "--json")
    assert verify.returncode == 0 and json.loads(verify.stdout)["servedBy"] == [cluster.endpoint(1)], verify.stdout
    assert fails(producer) == [], fails(producer)[:5]
    finished = cluster.moves_list()["moves"]["finished"]
    assert [m["step"] for m in finished] == ["DONE", "DONE"] and not any(m["fenced"] for m in finished)

    cluster.signal("container-1", signal.SIGSTOP)
    command = subprocess.Popen([sys.executable, "-m", "container", "admin", "reassign-broker", "--broker", "broker-a",
                                "--to", cluster.endpoint(2), "--execute", "--json", "-n", cluster.namesrv],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        cluster.wait_for(lambda: cluster.moves_list()["moves"].get("active"), 20, "the move is committed")
        cluster.signal("container-2", signal.SIGSTOP)
        cluster.signal("container-1", signal.SIGCONT)
        stdout, stderr = command.communicate(timeout=60)
    finally:
        if command.poll() is None:
            command.kill()
    outcome = json.loads(stdout)
    assert command.returncode == 1 and outcome["move"]["step"] == "ROLLED_BACK", stdout + stderr
    assert outcome["serving"] == cluster.endpoint(1) and "did not open within 4000 ms" in outcome["move"]["why"], outcome
    # the command samples the move every 50 ms: OPENING lasts the 4 s open timeout, ROLLING_BACK
    # only until the source reports taking the broker back, which can be sooner than one sample
    observed = [s["step"] for s in outcome["steps"]]
    legal = ["COMMITTED", "OPENING", "ROLLING_BACK", "ROLLED_BACK"]
    assert observed[-1] == "ROLLED_BACK" and "OPENING" in observed, outcome["steps"]
    assert observed == [step for step in legal if step in observed], outcome["steps"]
    ledger = read_ledger(cluster.workdir / "shared-store" / "broker-a")
    assert ledger.newest.owner == cluster.endpoint(1) and ledger.newest.epoch == outcome["move"]["epoch"] + 1
    rolled_back_at = time.monotonic()
    cluster.wait_for(lambda: acked_after(producer, rolled_back_at) > 600, 30, "sends go on on the source")
    cluster.signal("container-2", signal.SIGCONT)
    time.sleep(2)  # a queued Open would be answered now, and refused
    assert read_ledger(cluster.workdir / "shared-store" / "broker-a").newest.owner == cluster.endpoint(1)
    verify = cluster.admin("reassign-broker", "--verify", "--broker", "broker-a", "--json")
    assert verify.returncode == 0 and json.loads(verify.stdout)["servedBy"] == [cluster.endpoint(1)], verify.stdout
    counts = finish(producer, consumers)
    assert counts.lost == set(), f"{len(counts.lost)} acknowledged messages lost"
    assert counts.reorders() == 0
    # the controller counted them: three started, two completed, one rolled back
    assert cluster.metric("relaymq_broker_moves_total", outcome="started") == 3
    assert cluster.metric("relaymq_broker_moves_total", outcome="completed") == 2
    assert cluster.metric("relaymq_broker_moves_total", outcome="rolled_back") == 1
    assert cluster.metric("relaymq_broker_move_duration_seconds_count", outcome="completed") == 2


def test_a_move_away_from_a_stopped_source_completes_fenced_and_the_woken_source_writes_nothing(cluster, tmp_path):
    """First a move cancelled while its stopped source has not released (the source, woken,
    keeps the broker); then the same move left to run: it completes fenced after
    reassignReleaseTimeoutMillis, and the woken source acknowledges nothing more."""
    producer, consumers = start_load(cluster, tmp_path)
    cluster.wait_for(lambda: acked_after(producer, 0) > 600, 30, "the load runs")
    cluster.signal("container-1", signal.SIGSTOP)
    started = cluster.admin("reassign-broker", "--broker", "broker-a", "--to", cluster.endpoint(2), "--execute",
                            "--wait-ms", "200", "--json")
    assert started.returncode == 1 and json.loads(started.stdout)["move"]["step"] == "COMMITTED", started.stdout
    cancelled = cluster.admin("reassign-broker", "--cancel", "--broker", "broker-a", "--json")
    assert cancelled.returncode == 0 and json.loads(cancelled.stdout)["move"]["step"] == "CANCELLED", cancelled.stdout
    again = cluster.admin("reassign-broker", "--cancel", "--broker", "broker-a")
    assert again.returncode == 1 and "already ended (CANCELLED)" in again.stderr, again.stderr
    cluster.signal("container-1", signal.SIGCONT)
    time.sleep(1)
    cluster.wait_for(lambda: cluster.admin("reassign-broker", "--verify", "--broker", "broker-a").returncode == 0, 20,
                     "container-1 alone serves broker-a after the cancel")
    assert cluster.served_by("broker-a") == [cluster.endpoint(1)]
    cluster.signal("container-1", signal.SIGSTOP)
    stopped_at = time.monotonic()
    code, there = move(cluster, 2)
    assert code == 0 and there["move"]["fenced"] and "did not release" in there["move"]["why"], there
    ledger = read_ledger(cluster.workdir / "shared-store" / "broker-a")
    assert ledger.newest.owner == cluster.endpoint(2) and ledger.newest.epoch == there["move"]["epoch"]
    sealed_end = ledger.entries[-2].end
    cluster.signal("container-1", signal.SIGCONT)  # its sends in flight complete now: none may be acknowledged
    cluster.wait_for(lambda: cluster.served_by("broker-a") == [cluster.endpoint(2)], 20, "container-1 drops broker-a")
    assert read_ledger(cluster.workdir / "shared-store" / "broker-a").entries[-2].end == sealed_end

    sends_go_on_through_the_relay(cluster, producer)
    counts = finish(producer, consumers)
    assert counts.lost == set(), f"{len(counts.lost)} acknowledged messages lost (stopped at {stopped_at})"
    assert counts.reorders() == 0


def test_a_move_with_the_source_killed_and_the_controller_restarted_halfway_completes_fenced(cluster, tmp_path):
    """The move is committed, its source stopped so it cannot release; then the source is
    killed and the controller (embedded in the nameserver) is killed and restarted: the new
    leader resumes the move from its replicated record and completes it, fenced.  The target
    is killed after and restarted: it serves the broker moved to it, which its file does not
    name (container/moves.py remembers it)."""
    producer, consumers = start_load(cluster, tmp_path)
    cluster.wait_for(lambda: acked_after(producer, 0) > 600, 30, "the load runs")
    stop_together(producer, *consumers)  # the clients were on container-1: here they reconnect to container-2 after
    cluster.signal("container-1", signal.SIGSTOP)  # the release cannot happen: the move waits in COMMITTED
    started = cluster.admin("reassign-broker", "--broker", "broker-a", "--to", cluster.endpoint(2), "--execute",
                            "--wait-ms", "300", "--json")
    assert started.returncode == 1 and json.loads(started.stdout)["ended"] is False, started.stdout + started.stderr
    assert json.loads(started.stdout)["move"]["step"] == "COMMITTED"
    cluster.kill("container-1")  # killed halfway: after the commit, before any release
    cluster.kill("namesrv")
    cluster.start("namesrv")
    cluster.wait_for(lambda: cluster.admin("reassign-broker", "--verify", "--broker", "broker-a").returncode == 0, 30,
                     "the move completes fenced and container-2 alone serves broker-a")
    finished = cluster.moves_list()["moves"]["finished"][-1]
    assert finished["step"] == "DONE" and finished["fenced"], finished
    cluster.kill("container-2")  # the new host dies after the move: restarted, it serves the broker moved to it
    cluster.start("container-2")
    cluster.wait_for(lambda: cluster.served_by("broker-a") == [cluster.endpoint(2)], 20, "container-2 serves broker-a again")
    after = [Client("consume", "--endpoint", cluster.endpoint(2), "--topic", "normal", "--group", "normal-group",
                    "--seconds", "600", log_path=tmp_path / "after-normal.log"),
             Client("consume", "--endpoint", cluster.endpoint(2), "--fifo-topic", "fifo", "--group", "fifo-group",
                    "--seconds", "600", log_path=tmp_path / "after-fifo.log")]
    wait_started(*after)
    counts = drain([*consumers, *after], [producer], timeout_s=90)
    stop_together(*after)
    assert counts.lost == set(), f"{len(counts.lost)} acknowledged messages lost"


def test_a_move_whose_controller_leader_is_killed_midway_is_completed_by_the_next_leader(tmp_path):
    """Three controller members (tests/support/reassign_cluster.py ``controllers=3``).  The move
    is committed while its source is stopped, so it waits in COMMITTED; the controller leader is
    then killed (SIGKILL).  The command, still following the move, asks the next leader, which
    resumes the move from the replicated record: fenced after reassignReleaseTimeoutMillis (10 s
    here, so that the leader is killed well before it could decide it), the target opens, and the command exits 0 naming container-2.  The woken source serves nothing
    more; nothing acknowledged is lost, no FIFO message is reordered."""
    cluster = ReassignCluster(tmp_path / "work", controllers=3, reassignReleaseTimeoutMillis=10000,
                              reassignOpenTimeoutMillis=4000)
    try:
        cluster.start_all()
        producer, consumers = start_load(cluster, tmp_path)
        cluster.wait_for(lambda: acked_after(producer, 0) > 600, 30, "the load runs")
        leader = cluster.controller_leader()
        assert leader in cluster.controller_names(), leader
        cluster.signal("container-1", signal.SIGSTOP)
        command = subprocess.Popen([sys.executable, "-m", "container", "admin", "reassign-broker", "--broker", "broker-a",
                                    "--to", cluster.endpoint(2), "--execute", "--json", "--wait-ms", "60000",
                                    "-n", cluster.namesrv, "--controller", cluster.controller_addr],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen: dict = {}

        def committed() -> bool:
            seen["steps"] = [m["step"] for m in cluster.moves_list()["moves"].get("active", [])]
            return seen["steps"] != []
        cluster.wait_for(committed, 20, "the move is committed")
        assert seen["steps"] == ["COMMITTED"], seen  # the release timeout is long: the old leader decides no more
        cluster.kill(leader)
        stdout, stderr = command.communicate(timeout=90)
        assert command.returncode == 0, stdout + stderr
        outcome = json.loads(stdout)
        assert outcome["ended"] and outcome["move"]["step"] == "DONE" and outcome["move"]["fenced"], outcome
        assert outcome["serving"] == cluster.endpoint(2), outcome
        assert cluster.controller_leader() not in (None, leader)
        cluster.signal("container-1", signal.SIGCONT)  # its sends in flight complete now: none may be acknowledged
        cluster.wait_for(lambda: cluster.served_by("broker-a") == [cluster.endpoint(2)], 20, "container-1 drops broker-a")
        sends_go_on_through_the_relay(cluster, producer)
        counts = finish(producer, consumers)
        assert counts.lost == set(), f"{len(counts.lost)} acknowledged messages lost"
        assert counts.reorders() == 0
    finally:
        cluster.close()
