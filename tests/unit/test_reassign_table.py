"""ha.reassign.table: the controller's replicated record of broker moves (issue 26), its Raft
entry and its snapshot."""
from __future__ import annotations

from dataclasses import replace

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ha.controller.events import decode_event, encode_event
from ha.controller.liveness import BrokerLiveness
from ha.raft.types import Entry
from ha.reassign.move import Move, Step
from ha.reassign.table import FINISHED_KEPT, MoveRecord, Reassignments, move_from_json, move_to_json
from services.controller.machine import ControllerMachine

MOVE = Move("broker-a", "127.0.0.1:8081", "127.0.0.1:8082", 3, Step.COMMITTED, 100, 100)


def test_a_move_is_active_until_it_ends_then_kept_among_the_finished():
    table = Reassignments().apply(MoveRecord(MOVE))
    assert table.moving() == {"broker-a"} and table.active["broker-a"] == MOVE
    opening = replace(MOVE, step=Step.OPENING, since_ms=200, handed_end=4096)
    table = table.apply(MoveRecord(opening))
    assert table.active["broker-a"] == opening and table.finished == ()
    done = replace(opening, step=Step.DONE, since_ms=900)
    table = table.apply(MoveRecord(done))
    assert table.moving() == frozenset() and table.finished == (done,)
    assert table.apply(MoveRecord(done)).finished == (done,)  # replayed: kept once


def test_an_older_moves_record_does_not_replace_a_newer_one():
    newer = replace(MOVE, epoch=5)
    table = Reassignments().apply(MoveRecord(newer))
    assert table.apply(MoveRecord(replace(MOVE, step=Step.OPENING))).active["broker-a"] == newer


def test_the_finished_history_is_bounded():
    table = Reassignments()
    for epoch in range(1, FINISHED_KEPT + 10):
        table = table.apply(MoveRecord(replace(MOVE, epoch=epoch, step=Step.DONE)))
    assert len(table.finished) == FINISHED_KEPT and table.finished[-1].epoch == FINISHED_KEPT + 9


moves = st.builds(Move, st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20),
                  st.text(min_size=1, max_size=20), st.integers(1, 2**40), st.sampled_from(list(Step)),
                  st.integers(0, 2**50), st.integers(0, 2**50), st.none() | st.integers(0, 2**50), st.booleans(),
                  st.text(max_size=40))


@given(moves)
def test_a_record_round_trips_through_the_raft_log(move):
    assert decode_event(encode_event(MoveRecord(move))) == MoveRecord(move)
    assert move_from_json(orjson.loads(orjson.dumps(move_to_json(move)))) == move


@pytest.mark.parametrize("change, named", [
    ({"broker": ""}, "broker"), ({"epoch": 0}, "epoch"), ({"epoch": "3"}, "epoch"), ({"step": "FLYING"}, "step"),
    ({"handedEnd": -1}, "handedEnd"), ({"fenced": "yes"}, "fenced"), ({"startedMs": True}, "startedMs"),
])
def test_a_bad_record_names_its_field(change, named):
    with pytest.raises(ValueError, match=named):
        move_from_json({**move_to_json(MOVE), **change})


@given(st.dictionaries(st.sampled_from(["broker", "source", "target", "epoch", "step", "startedMs", "sinceMs",
                                        "handedEnd", "fenced", "why", "x"]),
                       st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5)))
def test_any_object_reads_as_a_move_or_a_named_error(body):
    try:
        move_from_json(body)
    except ValueError as error:
        assert str(error).startswith("move: ")


def test_the_controller_applies_records_and_its_snapshot_keeps_them():
    machine = ControllerMachine(BrokerLiveness(1000, 10), lambda: 0, lambda name, view: None)
    machine.apply_entry(Entry(1, 1, encode_event(MoveRecord(MOVE))))
    machine.apply_entry(Entry(1, 2, encode_event(MoveRecord(replace(MOVE, broker="broker-b", step=Step.DONE)))))
    assert machine.reassignments.moving() == {"broker-a"}
    restored = ControllerMachine(BrokerLiveness(1000, 10), lambda: 0, lambda name, view: None)
    restored.restore(machine.snapshot_encoder()())
    assert restored.reassignments == machine.reassignments
    plain = ControllerMachine(BrokerLiveness(1000, 10), lambda: 0, lambda name, view: None).snapshot_encoder()()
    assert b"reassignments" not in plain
    restored.restore(plain)
    assert restored.reassignments == Reassignments()
