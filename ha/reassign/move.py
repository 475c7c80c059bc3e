"""One broker's move between containers, as the controller decides it (issue 26; docs/reassign.md).

Rules:

* A move is a record in the controller's replicated state (:class:`Move`); every input is a
  call carrying ``now_ms`` that returns the next record and the actions the controller's
  driver sends (:class:`Decided`).  A new controller leader resumes any move from its record
  alone (:func:`resume` gives the current step's actions again); every input is idempotent
  (a report the record has passed changes nothing and sends nothing).
* The steps, in order: COMMITTED (the source is asked to release: refuse new puts, drain,
  flush, seal, hand the sealed end over), OPENING (the target is asked to take the store
  over at the move's ownership epoch and open it, from the handed end or, fenced, from the
  checkpoint), OPENED (the target opened the store: routes and roles flip to it), DONE (it
  serves).  AutoMQ #1169: the target opens *before* anything flips.
* A source that does not release within ``release_timeout_ms`` (dead or stopped) does not
  block the move: it goes on fenced (the ownership ledger keeps the source out,
  store.ownership).
* A target that fails or does not open within ``open_timeout_ms`` rolls the move back: the
  source takes the broker again at a newer epoch (the target may have begun its takeover,
  so the source must take over like any new owner), ROLLING_BACK until it reports, then
  ROLLED_BACK.  Except a fenced move's slow target: its source did not release (dead or
  stopped), so the target, the only container known to answer, is asked again at every
  ``open_timeout_ms`` (a fenced open recovers from the checkpoint, which takes longer;
  found by the test of a controller leader killed mid-move, where a rollback to the stopped
  source left the broker served by no one).  A target that fails outright still rolls back.  Once OPENED the move only goes forward: the target's container finishes it
  when it restarts (it owns the store by the ledger).
* Cancel is taken in COMMITTED only (the target has not been asked to open, so the source
  resumes with nothing to undo); later the answer names why not.  Messages may arrive out of
  order (a retry, a new leader resending): a source that resumed from a move, or took the
  broker back from it, ignores that move's release if it comes after (the exploration found
  sources that released after their resume or take-back and then served nothing).
* Exactly one container is asked to serve the broker in every final state: the target in
  DONE, the source in ROLLED_BACK and CANCELLED (tests/unit/test_reassign_move.py walks every
  interrupted move).
* Pure: values in, values out; no clock.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Union


class Step(str, Enum):
    COMMITTED = "COMMITTED"
    OPENING = "OPENING"
    OPENED = "OPENED"
    DONE = "DONE"
    ROLLING_BACK = "ROLLING_BACK"
    ROLLED_BACK = "ROLLED_BACK"
    CANCELLED = "CANCELLED"


FINAL = frozenset({Step.DONE, Step.ROLLED_BACK, Step.CANCELLED})


@dataclass(frozen=True)
class Settings:
    release_timeout_ms: int = 5000    # reassignReleaseTimeoutMillis
    open_timeout_ms: int = 10000      # reassignOpenTimeoutMillis


@dataclass(frozen=True)
class Move:
    broker: str
    source: str           # the owning container's internal address
    target: str
    epoch: int            # the ownership epoch the target takes the store at
    step: Step
    started_ms: int
    since_ms: int         # when the current step began
    handed_end: int | None = None
    fenced: bool = False  # the source never released: the target took over without its hand-over
    why: str = ""         # what ended a rollback or a fenced move (status, the command's output)
    entry: str = ""       # the broker's configuration keys (JSON), for the container that opens it next

    @property
    def serving(self) -> str:
        """The container that serves the broker now (the target from OPENED on)."""
        return self.target if self.step in (Step.OPENED, Step.DONE) else self.source


# --- actions the driver sends ----------------------------------------------------------------------
@dataclass(frozen=True)
class AskRelease:
    container: str
    broker: str
    epoch: int


@dataclass(frozen=True)
class AskOpen:
    container: str
    broker: str
    epoch: int
    handed_end: int | None     # None: fenced, recover from the checkpoint


@dataclass(frozen=True)
class Flip:
    """Routes and roles name the target; the source relays what still reaches it, then drops the broker."""
    broker: str
    to: str
    source: str


@dataclass(frozen=True)
class AskTakeBack:
    container: str
    broker: str
    epoch: int                 # newer than the move's: the target may have begun its takeover


@dataclass(frozen=True)
class AskResume:
    """The source serves again; it ignores any release of this move it gets afterwards."""
    container: str
    broker: str
    epoch: int


@dataclass(frozen=True)
class Finished:
    broker: str
    step: Step
    duration_ms: int


Action = Union[AskRelease, AskOpen, Flip, AskTakeBack, AskResume, Finished]


@dataclass(frozen=True)
class Decided:
    move: Move
    actions: tuple[Action, ...] = ()
    refused: str = ""          # an input the record does not take, and why (cancel too late, ...)


class MoveRefused(ValueError):
    """A move that cannot start; the message says why."""


def start(broker: str, source: str, target: str, last_epoch: int, hosts: dict[str, frozenset[str]],
          moving: frozenset[str], now_ms: int, entry: str = "") -> Decided:
    """Commit a move of ``broker`` from ``source`` to ``target``.  ``hosts``: each live
    container's internal address -> the brokers it serves; ``moving``: brokers with a move in
    progress; ``last_epoch``: the broker's newest ownership epoch."""
    if broker in moving:
        raise MoveRefused(f"{broker} is already moving; wait for it, or cancel it (reassign-broker --cancel)")
    if broker not in hosts.get(source, frozenset()):
        raise MoveRefused(f"{broker} is not served by {source}")
    if target == source:
        raise MoveRefused(f"{broker} is already served by {target}")
    if target not in hosts:
        raise MoveRefused(f"no live container at {target}")
    if broker in hosts[target]:
        raise MoveRefused(f"{target} already hosts a replica of {broker}: a move needs a container without one")
    move = Move(broker, source, target, last_epoch + 1, Step.COMMITTED, now_ms, now_ms, entry=entry)
    return Decided(move, (AskRelease(source, broker, move.epoch),))


def resume(move: Move) -> tuple[Action, ...]:
    """What the current step asks for, again (a new controller leader, a lost message)."""
    if move.step is Step.COMMITTED:
        return (AskRelease(move.source, move.broker, move.epoch),)
    if move.step is Step.OPENING:
        return (AskOpen(move.target, move.broker, move.epoch, move.handed_end),)
    if move.step is Step.OPENED:
        return (Flip(move.broker, move.target, move.source),)
    if move.step is Step.ROLLING_BACK:
        return (AskTakeBack(move.source, move.broker, move.epoch + 1),)
    return ()


def _to(move: Move, step: Step, now_ms: int, **changes) -> Move:
    return replace(move, step=step, since_ms=now_ms, **changes)


def _finish(move: Move, step: Step, now_ms: int, *actions: Action, **changes) -> Decided:
    done = _to(move, step, now_ms, **changes)
    return Decided(done, (*actions, Finished(move.broker, step, now_ms - move.started_ms)))


def source_released(move: Move, handed_end: int, now_ms: int, entry: str = "") -> Decided:
    """``entry``: the keys the source answered (they replace the reported ones)."""
    if move.step is not Step.COMMITTED:
        return Decided(move)  # a late or repeated report
    opening = _to(move, Step.OPENING, now_ms, handed_end=handed_end, entry=entry or move.entry)
    return Decided(opening, resume(opening))


def target_opened(move: Move, now_ms: int) -> Decided:
    if move.step is not Step.OPENING:
        return Decided(move)
    opened = _to(move, Step.OPENED, now_ms)
    return Decided(opened, resume(opened))


def target_serving(move: Move, now_ms: int) -> Decided:
    if move.step is not Step.OPENED:
        return Decided(move)
    return _finish(move, Step.DONE, now_ms)


def target_failed(move: Move, why: str, now_ms: int) -> Decided:
    """The target's container died or refused to open (its reason)."""
    if move.step not in (Step.COMMITTED, Step.OPENING):
        return Decided(move)  # from OPENED on the target owns the store: it finishes when it returns
    back = _to(move, Step.ROLLING_BACK, now_ms, why=f"target {move.target}: {why}")
    return Decided(back, resume(back))


def source_took_back(move: Move, now_ms: int) -> Decided:
    if move.step is not Step.ROLLING_BACK:
        return Decided(move)
    return _finish(move, Step.ROLLED_BACK, now_ms)


def cancel(move: Move, now_ms: int) -> Decided:
    if move.step is Step.COMMITTED:
        return _finish(move, Step.CANCELLED, now_ms, AskResume(move.source, move.broker, move.epoch))
    if move.step in FINAL:
        return Decided(move, refused=f"the move of {move.broker} already ended ({move.step.value})")
    return Decided(move, refused=f"the move of {move.broker} is past the point of cancelling ({move.step.value}): "
                                 "the target has been asked to take the store over")


def tick(move: Move, settings: Settings, now_ms: int) -> Decided:
    """Timeouts: a source that does not release, a target that does not open."""
    waited = now_ms - move.since_ms
    if move.step is Step.COMMITTED and waited >= settings.release_timeout_ms:
        opening = _to(move, Step.OPENING, now_ms, fenced=True,
                      why=f"source {move.source} did not release within {settings.release_timeout_ms} ms")
        return Decided(opening, resume(opening))
    if move.step is Step.OPENING and waited >= settings.open_timeout_ms:
        if move.fenced:  # the source never released: a rollback would hand the broker to a dead container
            released = move.why.split("; ", 1)[0]
            again = _to(move, Step.OPENING, now_ms,
                        why=f"{released}; target {move.target} not open within {settings.open_timeout_ms} ms: asked again")
            return Decided(again, resume(again))
        return target_failed(move, f"did not open within {settings.open_timeout_ms} ms", now_ms)
    return Decided(move)


def next_deadline_ms(move: Move, settings: Settings) -> int | None:
    if move.step is Step.COMMITTED:
        return move.since_ms + settings.release_timeout_ms
    if move.step is Step.OPENING:
        return move.since_ms + settings.open_timeout_ms
    return None
