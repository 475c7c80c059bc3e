"""ha.reassign.move: a broker's move as the controller decides it, and every interrupted move.

The exploration at the end runs the move's record together with the ownership ledger
(store.ownership) the containers write: every message between controller and containers may
be late, every report may come after the record moved on, the source may never answer, the
target may fail at any point, an operator may cancel.  In every quiescent end the container
the record names as serving is the one the ledger lets acknowledge."""
from __future__ import annotations

import pytest

from ha.reassign.move import (AskOpen, AskRelease, AskResume, AskTakeBack, Finished, Flip, Move, MoveRefused,
                              Settings, Step, cancel, next_deadline_ms, resume, source_released, source_took_back,
                              start, target_failed, target_opened, target_serving, tick)
from store.ownership import Ledger, LedgerError, begin_takeover, may_acknowledge, seal

S, T = "10.0.0.1:10911", "10.0.0.2:10911"
HOSTS = {S: frozenset({"broker-a", "broker-b"}), T: frozenset({"broker-b"}), "10.0.0.3:10911": frozenset()}
SET = Settings(release_timeout_ms=5000, open_timeout_ms=10000)


def begun(now: int = 0) -> Move:
    return start("broker-a", S, "10.0.0.3:10911", 1, HOSTS, frozenset(), now).move


def test_a_move_walks_its_steps_and_says_what_each_asks():
    decided = start("broker-a", S, "10.0.0.3:10911", 4, HOSTS, frozenset(), 100)
    move = decided.move
    assert (move.step, move.epoch, decided.actions) == (Step.COMMITTED, 5, (AskRelease(S, "broker-a", 5),))
    decided = source_released(move, 4096, 300)
    assert decided.actions == (AskOpen("10.0.0.3:10911", "broker-a", 5, 4096),) and decided.move.serving == S
    decided = target_opened(decided.move, 700)
    assert decided.actions == (Flip("broker-a", "10.0.0.3:10911", S),) and decided.move.serving == "10.0.0.3:10911"
    decided = target_serving(decided.move, 900)
    assert decided.move.step is Step.DONE and decided.actions == (Finished("broker-a", Step.DONE, 800),)


@pytest.mark.parametrize("broker, source, target, moving, why", [
    ("broker-a", S, S, (), "already served by"),
    ("broker-a", S, "10.9.9.9:1", (), "no live container"),
    ("broker-b", S, T, (), "already hosts a replica"),
    ("broker-c", S, T, (), "not served by"),
    ("broker-a", S, T, ("broker-a",), "already moving"),
])
def test_moves_that_cannot_start(broker, source, target, moving, why):
    with pytest.raises(MoveRefused, match=why):
        start(broker, source, target, 1, HOSTS, frozenset(moving), 0)


def test_a_silent_source_does_not_block_the_move():
    move = begun(0)
    assert next_deadline_ms(move, SET) == 5000 and tick(move, SET, 4999).move == move
    decided = tick(move, SET, 5000)
    assert decided.move.step is Step.OPENING and decided.move.fenced
    assert decided.actions == (AskOpen("10.0.0.3:10911", "broker-a", 2, None),)  # from the checkpoint
    assert "did not release within 5000 ms" in decided.move.why


def test_a_target_that_fails_before_opening_rolls_back_at_a_newer_epoch():
    opening = source_released(begun(0), 10, 10).move
    decided = tick(opening, SET, 10 + 10000)
    assert decided.move.step is Step.ROLLING_BACK and decided.actions == (AskTakeBack(S, "broker-a", 3),)
    done = source_took_back(decided.move, 20050)
    assert done.move.step is Step.ROLLED_BACK and done.move.serving == S


def test_after_opening_the_move_only_goes_forward():
    opened = target_opened(source_released(begun(0), 10, 10).move, 20).move
    assert target_failed(opened, "killed", 30).move == opened
    assert cancel(opened, 30).refused.startswith("the move of broker-a is past the point of cancelling")


def test_cancel_only_before_the_target_is_asked():
    decided = cancel(begun(0), 50)
    assert decided.move.step is Step.CANCELLED and decided.actions[0] == AskResume(S, "broker-a", 2)
    assert "already ended" in cancel(decided.move, 60).refused


def test_reports_are_idempotent_and_a_new_leader_resumes_from_the_record():
    opening = source_released(begun(0), 10, 10).move
    assert source_released(opening, 99, 11).move == opening  # a repeated or late report
    assert resume(opening) == (AskOpen("10.0.0.3:10911", "broker-a", 2, 10),)
    assert resume(target_serving(target_opened(opening, 20).move, 30).move) == ()


# --- every interrupted move, with the ledger the containers write --------------------------------
TARGET = "10.0.0.3:10911"


def _explore(max_depth: int) -> tuple[int, int]:
    """Depth-first over every order of: a pending message delivered (or a report), a timeout, a
    target failure, a cancel.  Returns (states seen, quiescent ends checked)."""
    ledger0 = seal(begin_takeover(Ledger.fresh(), 1, S), 0, 1000)
    first = start("broker-a", S, TARGET, 1, HOSTS, frozenset(), 0)
    seen, ends = 0, 0
    stack = [(first.move, ledger0, tuple(first.actions), (), frozenset({S}), 0, 0)]
    while stack:
        move, ledger, pending, reports, writers, now, depth = stack.pop()
        seen += 1
        acking = {c for c in writers if isinstance(c, str) and may_acknowledge_as(c, ledger)}
        assert len(acking) <= 1, (move, ledger)
        if not pending and not reports and move.step in (Step.DONE, Step.ROLLED_BACK, Step.CANCELLED):
            ends += 1
            assert acking == {move.serving}, (move, ledger, writers)
            continue
        if depth >= max_depth:
            continue
        nexts = []
        for i, action in enumerate(pending):  # a container carries out a message
            rest = pending[:i] + pending[i + 1:]
            nexts.append(_deliver(action, move, ledger, rest, reports, writers, now))
        for i, report in enumerate(reports):  # the controller gets a report
            rest = reports[:i] + reports[i + 1:]
            decided = report(move, now + 1)
            nexts.append((decided.move, ledger, pending + _sent(decided), rest, writers, now + 1))
        for decided in (tick(move, SET, now + 10_000), target_failed(move, "killed", now + 1), cancel(move, now + 1)):
            if decided.move.step is move.step and set(_sent(decided)) <= set(pending):
                continue  # a fenced open asked again while the first ask is pending: no message is lost here
            if decided.move != move:
                nexts.append((decided.move, ledger, pending + _sent(decided), reports, writers, decided.move.since_ms))
        for state in nexts:
            stack.append((*state, depth + 1))
    return seen, ends


def may_acknowledge_as(container: str, ledger: Ledger) -> bool:
    newest = ledger.newest
    return newest.owner == container and may_acknowledge(newest.epoch, ledger)


def _sent(decided) -> tuple:
    return tuple(a for a in decided.actions if not isinstance(a, (Finished, Flip)))


def _deliver(action, move, ledger, pending, reports, writers, now):
    if isinstance(action, AskRelease):  # the source stops writing and hands its end over
        if any(isinstance(m, tuple) and m[1] >= action.epoch for m in writers):  # resumed or took back since
            return move, ledger, pending, reports, writers, now
        return move, ledger, pending, reports + (lambda m, t: source_released(m, 0, t),), writers - {S}, now
    if isinstance(action, AskResume):
        return move, ledger, pending, reports, writers | {S, ("resumed", action.epoch)}, now
    if isinstance(action, AskOpen):
        try:
            taken = seal(begin_takeover(ledger, action.epoch, TARGET), 0, 1000)
        except LedgerError:  # a newer owner took the store first: the target refuses
            return move, ledger, pending, reports, writers, now
        report = lambda m, t: target_serving(target_opened(m, t).move, t)  # noqa: E731
        return move, taken, pending, reports + (report,), writers | {TARGET}, now
    assert isinstance(action, AskTakeBack)
    try:
        taken = seal(begin_takeover(ledger, action.epoch, S), 0, 1000)
    except LedgerError:
        return move, ledger, pending, reports, writers, now
    return move, taken, pending, reports + (source_took_back,), writers | {S, ("took back", action.epoch)}, now


def test_every_interrupted_move_ends_with_exactly_the_serving_container_acknowledging():
    seen, ends = _explore(12)  # exhaustive: depth 9 already reaches every state
    assert ends > 50 and seen > 1000, (seen, ends)


def test_a_fenced_moves_slow_target_is_asked_again_not_rolled_back_to_the_silent_source():
    fenced = tick(begun(0), SET, 5000).move
    again = tick(fenced, SET, 5000 + 10000)
    assert again.move.step is Step.OPENING and again.move.fenced and again.move.since_ms == 15000
    assert again.actions == (AskOpen("10.0.0.3:10911", "broker-a", 2, None),)
    assert "did not release within 5000 ms" in again.move.why and "asked again" in again.move.why
    twice = tick(again.move, SET, 25000).move
    assert twice.why == again.move.why  # the reason does not grow with every retry
    assert target_failed(again.move, "refused: disk full", 15001).move.step is Step.ROLLING_BACK  # a failure still does
