"""The official rocketmq-python-client 5.1.2, unchanged, against a running RelayMQ."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.conformance
ROOT = Path(__file__).resolve().parents[2]
DESCRIBE = ROOT / "tests" / "support" / "official_client" / "describe_protocol.py"
# Ours may be newer than the 5.1.2 client's protocol; these additions change nothing on its wire.
NEWER_THAN_CLIENT = {"apache.rocketmq.v2.Settings": {"client_properties"}, "apache.rocketmq.v2.Code": {40021}}


def _events(events, kind):
    return [e for e in events if e["event"] == kind]


def test_our_protos_match_the_clients_wire_format(tmp_path):
    def describe(which, cwd):
        out = subprocess.run([sys.executable, str(DESCRIBE), which], cwd=cwd, capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    theirs, ours = describe("theirs", tmp_path), describe("ours", ROOT)
    assert set(theirs) <= set(ours)
    for name, shape in theirs.items():
        mine = ours[name]
        extra = NEWER_THAN_CLIENT.get(name, set())
        if isinstance(shape, list):
            assert [v for v in mine if v not in extra] == shape, name
        else:
            assert {k: v for k, v in mine.items() if k not in extra and not k.endswith("Entry")} == \
                {k: v for k, v in shape.items()}, name


def test_normal_messages_round_trip_with_tag_keys_and_properties(relaymq):
    code, sent = relaymq.drive("produce", "--topic", "c-normal", "--count", "3", "--tag", "TagA")
    assert code == 0 and len(_events(sent, "sent")) == 3
    code, got = relaymq.drive("simple", "--topic", "c-normal", "--group", "g-normal", "--expect", "3")
    assert code == 0
    received = {e["body"]: e for e in _events(got, "received")}
    assert set(received) == {"m0", "m1", "m2"}
    ids = {e["body"]: e["message_id"] for e in _events(sent, "sent")}
    for body, event in received.items():
        assert event["message_id"] == ids[body] and event["tag"] == "TagA" and event["keys"] == [f"key-{body}"]
        assert event["properties"] == {"origin": "driver"} and event["attempt"] == 1 and event["topic"] == "c-normal"


def test_tag_filter_delivers_only_matching_messages(relaymq):
    relaymq.drive("produce", "--topic", "c-filter", "--count", "2", "--tag", "skip", "--prefix", "s")
    relaymq.drive("produce", "--topic", "c-filter", "--count", "2", "--tag", "keep", "--prefix", "k")
    code, got = relaymq.drive("simple", "--topic", "c-filter", "--group", "g-filter", "--filter", "keep||other", "--expect", "2")
    assert code == 0
    assert {e["body"] for e in _events(got, "received")} == {"k0", "k1"}


def test_sql92_filter_delivers_only_messages_whose_properties_match(relaymq):
    relaymq.drive("produce", "--topic", "c-sql", "--count", "6", "--tag", "TagA", "--numbered")
    relaymq.drive("produce", "--topic", "c-sql", "--count", "2", "--tag", "TagB", "--numbered", "--prefix", "b")
    sql = "TAGS = 'TagA' AND n BETWEEN 2 AND 4 AND origin IS NOT NULL"
    code, got = relaymq.drive("simple", "--topic", "c-sql", "--group", "g-sql", "--sql", "--filter", sql, "--expect", "3")
    assert code == 0
    assert {e["body"] for e in _events(got, "received")} == {"m2", "m3", "m4"}


def test_fifo_messages_arrive_in_order_per_message_group(relaymq):
    code, sent = relaymq.drive("produce", "--topic", "c-fifo", "--kind", "fifo", "--count", "6")
    assert code == 0
    code, got = relaymq.drive("simple", "--topic", "c-fifo", "--group", "fifo-g", "--expect", "6", "--batch", "32")
    assert code == 0
    for group in ("group-0", "group-1"):
        bodies = [e["body"] for e in _events(got, "received") if e["group"] == group]
        assert bodies == sorted(bodies, key=lambda b: int(b[1:])) and len(bodies) == 3


def test_delay_message_is_delivered_and_a_recall_answers_its_id(relaymq):
    code, sent = relaymq.drive("produce", "--topic", "c-delay", "--kind", "delay", "--count", "1", "--delay-s", "1")
    assert code == 0 and _events(sent, "sent")[0]["recall_handle"]
    code, got = relaymq.drive("simple", "--topic", "c-delay", "--group", "g-delay", "--expect", "1")
    assert code == 0 and [e["body"] for e in _events(got, "acked")] == ["m0"]
    code, recalled = relaymq.drive("produce", "--topic", "c-delay", "--kind", "delay", "--count", "1", "--delay-s", "3600",
                                   "--recall", "--prefix", "r")
    assert code == 0
    assert _events(recalled, "recalled")[0]["message_id"] == _events(recalled, "sent")[0]["message_id"]


def test_transactions_commit_rollback_and_orphan_check_through_telemetry(relaymq):
    code, events = relaymq.drive("transaction", "--topic", "c-tx", "--deadline-s", "15")
    assert code == 0, events
    assert [e["body"] for e in _events(events, "checked")][:1] == ["orphan"]
    code, got = relaymq.drive("simple", "--topic", "c-tx", "--group", "g-tx", "--expect", "2", "--deadline-s", "10")
    assert code == 0
    assert {e["body"] for e in _events(got, "received")} == {"commit", "orphan"}


def test_change_invisible_duration_redelivers_with_a_higher_attempt(relaymq):
    relaymq.drive("produce", "--topic", "c-redo", "--count", "2")
    code, got = relaymq.drive("simple", "--topic", "c-redo", "--group", "g-redo", "--expect", "2", "--mode", "nack-first")
    assert code == 0
    attempts = {(e["body"], e["attempt"]) for e in _events(got, "received")}
    assert attempts == {("m0", 1), ("m0", 2), ("m1", 1), ("m1", 2)}


def test_messages_past_max_attempts_go_to_the_dead_letter_queue(relaymq):
    relaymq.drive("produce", "--topic", "c-dlq", "--count", "1")
    code, got = relaymq.drive("simple", "--topic", "c-dlq", "--group", "dlq-g", "--mode", "never-ack", "--invisible-s", "1",
                              "--deadline-s", "5")
    assert sorted(e["attempt"] for e in _events(got, "received")) == [1, 2]
    code, dead = relaymq.drive("simple", "--topic", "%DLQ%dlq-g", "--group", "dlq-reader", "--expect", "1")
    assert code == 0 and [e["body"] for e in _events(dead, "acked")] == ["m0"]


def test_push_consumer_consumes_and_retries_a_failed_message(relaymq):
    relaymq.drive("produce", "--topic", "c-pushfail", "--count", "2")
    code, got = relaymq.drive("push", "--topic", "c-pushfail", "--group", "g-pushfail", "--expect", "2",
                              "--mode", "fail-first", "--deadline-s", "25")
    assert code == 0, got
    attempts = {(e["body"], e["attempt"]) for e in _events(got, "received")}
    assert {("m0", 1), ("m0", 2), ("m1", 1), ("m1", 2)} <= attempts
