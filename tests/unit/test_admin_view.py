"""container/admin_view.py: what admin queries show when replicas are unreachable or missing."""
from __future__ import annotations

from container import admin_view as view


def row(broker: str, broker_id: int, queue: int, broker_offset: int, consumer_offset: int) -> dict:
    return {"topic": "T", "brokerName": broker, "brokerId": broker_id, "queueId": queue, "brokerOffset": broker_offset,
            "consumerOffset": consumer_offset, "inflight": 0, "lag": broker_offset - consumer_offset}


def test_replica_states_mark_unreachable_and_missing_master():
    ok = view.replica_states(view.Group("C", "broker-a", {0: "h:1", 1: "h:2"}), {0: object(), 1: view.Failure("down")})
    assert ok.master == view.OK and ok.servable
    assert [(r["brokerId"], r["state"], r["detail"]) for r in ok.replicas] == [(0, "OK", ""), (1, "UNREACHABLE", "down")]
    masterless = view.replica_states(view.Group("C", "broker-b", {1: "h:3"}), {1: object()})
    assert masterless.master == view.NOT_REGISTERED and not masterless.servable
    assert [r["state"] for r in masterless.replicas] == ["NOT_REGISTERED", "OK"]
    down = view.replica_states(view.Group("C", "broker-c", {0: "h:4"}), {0: view.Failure("refused")})
    assert down.master == view.UNREACHABLE


def test_progress_of_a_masterless_group_is_stranded_lag_read_from_the_fullest_slave():
    states = [view.replica_states(view.Group("C", "broker-a", {0: "h:1", 1: "h:2"}), {0: object(), 1: object()}),
              view.replica_states(view.Group("C", "broker-b", {1: "h:3", 2: "h:4"}), {1: object(), 2: object()}),
              view.replica_states(view.Group("C", "broker-c", {0: "h:5"}), {0: view.Failure("down")})]
    rows = {"broker-a": {0: [row("broker-a", 0, 0, 10, 4)], 1: [row("broker-a", 1, 0, 9, 4)]},
            "broker-b": {1: [row("broker-b", 1, 0, 20, 5)], 2: [row("broker-b", 2, 0, 30, 5)]},
            "broker-c": {}}
    document = view.progress_document("G", "T", states, rows)
    assert [(q["brokerName"], q["brokerId"], q["source"], q["stranded"]) for q in document["queues"]] == [
        ("broker-a", 0, "master", False), ("broker-b", 2, "slave 2", True)]
    assert document["totalLag"] == 6 + 25 and document["strandedLag"] == 25 and not document["complete"]
    groups = {g["brokerName"]: g for g in document["groups"]}
    assert groups["broker-c"]["lag"] is None and groups["broker-c"]["source"] == ""
    footer = view.progress_footer(document)
    assert footer[0] == "total lag: 31"
    assert "broker-b: master not registered; 25 messages stranded there (read from slave 2" in footer[1]
    assert footer[2] == "broker-c: no replica answered; its lag is unknown and not in the total"
    assert footer[3] == "stranded lag: 25 of 31"


def test_unknown_group_needs_an_answer_and_nobody_knowing_it():
    assert view.unknown_group([(False, 0), (False, 0)])
    assert not view.unknown_group([(False, 0), (True, 0)])
    assert not view.unknown_group([(False, 3)])
    assert not view.unknown_group([])  # nobody answered: unknown is not claimed


def test_unreachable_lines_name_each_replica_and_the_unservable_group():
    states = [view.replica_states(view.Group("C", "broker-a", {1: "h:2"}), {1: view.Failure("container h:2 is unreachable")})]
    lines = view.unreachable_lines(states)
    assert lines[0].startswith("broker-a id 0: NOT_REGISTERED (no master registered")
    assert lines[1] == "broker-a id 1 at h:2: UNREACHABLE (container h:2 is unreachable)"
    assert lines[2] == "broker-a: no reachable master; its queues cannot be written or consumed"


def test_a_slave_acting_for_its_absent_master_serves_its_group_but_does_not_write_it():
    group = view.Group("C", "broker-a", {1: "h:2", 2: "h:3"})
    acting = view.replica_states(group, {1: object(), 2: object()}, acting={1})
    assert acting.master == view.NOT_REGISTERED and acting.acting_id == 1
    assert acting.servable and not acting.writable and acting.served_by == "acting slave 1"
    assert acting.to_json()["actingSlave"] == 1 and acting.to_json()["servedBy"] == "acting slave 1"
    unanswered = view.replica_states(group, {1: view.Failure("down"), 2: object()}, acting={1})
    assert unanswered.acting_id is None and not unanswered.servable  # an answer is what says it acts
    with_master = view.replica_states(view.Group("C", "broker-a", {0: "h:1", 1: "h:2"}), {0: object(), 1: object()},
                                      acting={1})
    assert with_master.acting_id is None and with_master.served_by == "master"  # a live master serves, not the slave


def test_progress_of_an_acting_group_is_the_acting_slaves_and_not_stranded():
    states = [view.replica_states(view.Group("C", "broker-a", {1: "h:2", 2: "h:3"}), {1: object(), 2: object()}, acting={1}),
              view.replica_states(view.Group("C", "broker-b", {0: "h:4"}), {0: object()})]
    rows = {"broker-a": {1: [row("broker-a", 1, 0, 20, 5)], 2: [row("broker-a", 2, 0, 30, 5)]},
            "broker-b": {0: [row("broker-b", 0, 0, 7, 7)]}}
    document = view.progress_document("G", "T", states, rows)
    assert [(q["brokerName"], q["brokerId"], q["source"], q["stranded"]) for q in document["queues"]] == [
        ("broker-a", 1, "acting slave 1", False), ("broker-b", 0, "master", False)]
    assert document["totalLag"] == 15 and document["strandedLag"] == 0 and document["complete"]
    footer = view.progress_footer(document)
    assert footer == ["total lag: 15",
                      "broker-a: master not registered; slave 1 acts for it and serves its 15 messages "
                      "(consumable there; it takes no sends)"]
    assert not any("not consumable" in line or "stranded" in line for line in footer)


def test_unreachable_lines_say_the_acting_slave_serves_the_group():
    states = [view.replica_states(view.Group("C", "broker-a", {1: "h:2"}), {1: object()}, acting={1})]
    lines = view.unreachable_lines(states)
    assert lines[0].startswith("broker-a id 0: NOT_REGISTERED")
    assert lines[1] == ("broker-a: no reachable master; slave 1 acts for it: its queues are read and consumed there, "
                        "not written")
