"""A backlog written at load, then drained by the official SimpleConsumer, on a replicated
controller-mode cluster (real processes, official Python client 5.1.2).

The backlog sits on broker-b alone (broker-a's queues of both topics are read-only, as for an
operator draining broker-a), while the consumers' receives go round robin over both brokers'
queues.  A receive that reaches broker-a finds nothing there; it must end at once, since broker-b
holds messages for the group, instead of long-polling its 20 s (issue 23: the drain collapsed to
a message every few seconds).  FIFO receives take consecutive messages of a queue.  Checked:
every acknowledged message received, none twice, FIFO order per message group, and no receive
that waited out a long poll while messages were still to come."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.controller_cluster import ControllerModeCluster
from tests.support.failover_load import Client

pytestmark = [pytest.mark.integration, pytest.mark.conformance]
BACKLOG = Path(__file__).resolve().parents[1] / "support" / "official_client" / "backlog.py"
LONG_POLL_S = 20


def test_a_backlog_on_one_broker_drains_without_long_polls_on_the_empty_one(tmp_path):
    cluster = ControllerModeCluster(tmp_path).start()
    try:
        for topic, kind in (("backlog-normal", "NORMAL"), ("backlog-fifo", "FIFO")):
            cluster.admin_when_registered("update-topic", "-t", topic, "--type", kind, "--queues", "4", "-b", "broker-a",
                                          "--perm", "4")
            cluster.admin_when_registered("update-topic", "-t", topic, "--type", kind, "--queues", "4", "-b", "broker-b")
        cluster.admin_when_registered("update-group", "-g", "backlog-group")
        cluster.admin_when_registered("update-group", "-g", "backlog-fifo-group", "--fifo")
        endpoint = cluster.endpoint(1)
        producer = Client("produce", "--endpoint", endpoint, "--topic", "backlog-normal", "--fifo-topic", "backlog-fifo",
                          "--groups", "8", "--rate", "50", "--seconds", "6", log_path=tmp_path / "producer.log",
                          script=BACKLOG)
        assert producer.process.wait(90) == 0
        producer.stop()
        # each drain ends once it has every acknowledged message (else after 8 s with nothing new):
        # waiting for the idle time ended in a long poll of 20 s on nothing
        consumer = Client("drain", "--endpoint", endpoint, "--topic", "backlog-normal", "--fifo-topic", "backlog-fifo",
                          "--await-s", str(LONG_POLL_S), "--idle-s", "8", "--max-s", "120",
                          "--expect-normal", str(_expected(producer, "normal")),
                          "--expect-fifo", str(_expected(producer, "fifo")),
                          log_path=tmp_path / "consumer.log", script=BACKLOG)
        assert consumer.process.wait(200) == 0
        consumer.stop()
    finally:
        cluster.close()
    acked = {e["body"] for e in producer.snapshot() if e["event"] == "ack"}
    events = consumer.snapshot()
    received = [e for e in events if e["event"] == "recv"]
    bodies = [e["body"] for e in received]
    assert len(acked) > 1500, "the backlog was written at load"
    assert acked - set(bodies) == set(), f"{len(acked - set(bodies))} acknowledged messages not received"
    assert len(bodies) == len(set(bodies)), "no message received twice (nothing expired, nothing failed)"
    assert _late_fifo(bodies) == 0
    last = {group: max(e["t"] for e in received if e["group"] == group) for group in ("backlog-group", "backlog-fifo-group")}
    waited_out = [e for e in events if e["event"] == "receive" and e["n"] == 0 and e["t"] < last[e["group"]]
                  and e["t"] - e["began"] >= LONG_POLL_S / 4]
    assert waited_out == [], f"{len(waited_out)} receives long-polled an empty broker while broker-b held the backlog"


def _expected(producer: Client, kind: str) -> int:
    """How many ``kind`` messages a drain may stop at: the acknowledged ones, or 0 (drain until
    idle) when a send failed (such a message may be stored all the same, and counting it as one
    of the acknowledged would stop the drain one short)."""
    events = [e for e in producer.snapshot() if e.get("kind") == kind]
    return 0 if any(e["event"] == "fail" for e in events) else sum(1 for e in events if e["event"] == "ack")


def _late_fifo(bodies: list[str]) -> int:
    highest: dict[str, int] = defaultdict(int)
    late = 0
    for body in bodies:
        kind, group, seq = body.split(":")
        if kind == "fifo":
            late += int(seq) < highest[group]
            highest[group] = max(highest[group], int(seq))
    return late
