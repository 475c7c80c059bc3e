"""The backlog board: when a receive that found nothing here may end at once (scheduler/pop/backlog_board)."""
from __future__ import annotations

import random

import pytest

from scheduler.pop.backlog_board import BacklogBoard, BoardSettings

KEY = ("orders", "billing")


def board(**settings) -> BacklogBoard:
    return BacklogBoard(BoardSettings(**{"probe_interval_ms": 500, "fresh_ms": 1000, **settings}))


def test_a_first_waiter_gets_a_probe_at_once_and_one_per_interval_while_it_waits():
    b = board()
    assert b.probe_due(0) == [] and b.next_deadline_ms() is None  # nobody waits: nothing to probe
    b.waiting(KEY, "broker-a", +1)
    assert b.next_deadline_ms() == 0
    assert b.probe_due(10) == [KEY]
    assert b.probe_due(20) == [] and b.next_deadline_ms() is None  # in flight: one at a time
    b.heard(KEY, {"broker-b": 0}, 12)
    assert b.next_deadline_ms() == 510
    assert b.probe_due(509) == [] and b.probe_due(510) == [KEY]
    b.heard(KEY, {}, 515)
    b.waiting(KEY, "broker-a", -1)
    assert b.probe_due(5000) == [] and len(b) == 0  # nobody waits, the answer is stale: forgotten


@pytest.mark.parametrize("backlog, here, heard_at, now, expected", [
    ({"broker-b": 120}, "broker-a", 0, 900, True),       # another broker holds messages: end now
    ({"broker-b": 120}, "broker-a", 0, 1001, False),     # older than fresh_ms: long-poll as upstream
    ({"broker-a": 120}, "broker-a", 0, 10, False),       # the backlog is here (it is being delivered)
    ({"broker-b": 0, "broker-c": 0}, "broker-a", 0, 10, False),
    ({"broker-a": 3, "broker-c": 7}, "broker-a", 0, 10, True),
    ({}, "broker-a", 0, 10, False),                      # nobody answered (unreachable): wait
])
def test_elsewhere(backlog, here, heard_at, now, expected):
    b = board()
    b.waiting(KEY, here, +1)
    b.probe_due(heard_at)
    b.heard(KEY, backlog, heard_at)
    assert b.elsewhere(KEY, here, now) is expected


def test_heard_wakes_the_brokers_whose_waiters_have_a_backlog_elsewhere():
    b = board()
    b.waiting(KEY, "broker-a", +1)
    b.waiting(KEY, "broker-b", +1)
    b.probe_due(0)
    assert b.heard(KEY, {"broker-a": 0, "broker-b": 40}, 1) == ("broker-a",)
    b.probe_due(600)
    assert b.heard(KEY, {"broker-a": 5, "broker-b": 40}, 601) == ("broker-a", "broker-b")
    b.probe_due(1200)
    assert b.heard(KEY, {}, 1201) == ()


def test_a_failed_probe_is_tried_again_at_its_interval_and_says_nothing():
    b = board()
    b.waiting(KEY, "broker-a", +1)
    assert b.probe_due(0) == [KEY]
    b.failed(KEY)
    assert not b.elsewhere(KEY, "broker-a", 1)
    assert b.probe_due(100) == [] and b.probe_due(500) == [KEY]


def test_answers_for_forgotten_keys_are_ignored_and_unknown_waiters_leaving_is_harmless():
    b = board()
    assert b.heard(KEY, {"broker-b": 1}, 0) == ()
    b.waiting(KEY, "broker-a", -1)
    assert len(b) == 0


def test_a_round_takes_along_keys_half_way_to_their_probe_so_they_fall_into_step():
    b = board()
    b.waiting(KEY, "broker-a", +1)
    assert b.probe_due(0) == [KEY]
    b.heard(KEY, {}, 1)
    other = ("audit", "billing")
    b.waiting(other, "broker-a", +1)
    assert b.probe_due(200) == [other]             # new: at once, alone (KEY is 200 ms into its 500)
    b.heard(other, {}, 201)
    assert b.probe_due(499) == []
    assert b.probe_due(500) == [KEY, other]        # KEY is due, other is 300 ms in: along with it
    b.heard(KEY, {}, 501), b.heard(other, {}, 501)
    assert b.probe_due(999) == [] and b.probe_due(1000) == [KEY, other]


def test_keys_are_bounded_least_recently_wanted_first():
    b = board(max_keys=2)
    for topic in ("t1", "t2", "t3"):
        b.waiting((topic, "g"), "broker-a", +1)
    assert b.probe_due(0) == [("t2", "g"), ("t3", "g")]


def test_seeded_runs_keep_the_rules():
    """Random waits, probes and answers: never two probes of a key in flight, a probe only for a
    key someone waits for, and ``elsewhere`` only from an answer at most fresh_ms old."""
    for seed in range(200):
        rng = random.Random(seed)
        b, now, waiting, in_flight, last_heard = board(), 0, {}, set(), {}
        for _ in range(300):
            now += rng.randint(0, 300)
            key = (rng.choice("xy"), "g")
            here = rng.choice(("broker-a", "broker-b"))
            action = rng.random()
            if action < 0.3:
                b.waiting(key, here, +1)
                waiting[(key, here)] = waiting.get((key, here), 0) + 1
            elif action < 0.5 and waiting.get((key, here)):
                b.waiting(key, here, -1)
                waiting[(key, here)] -= 1
            elif action < 0.8:
                for due in b.probe_due(now):
                    assert due not in in_flight, seed
                    assert any(n for (k, _), n in waiting.items() if k == due), seed
                    in_flight.add(due)
            elif in_flight:
                done = rng.choice(sorted(in_flight))
                in_flight.discard(done)
                b.heard(done, {"broker-a": rng.randint(0, 2), "broker-b": rng.randint(0, 2)}, now)
                last_heard[done] = now
            if b.elsewhere(key, here, now):
                assert now - last_heard[key] <= 1000, seed
