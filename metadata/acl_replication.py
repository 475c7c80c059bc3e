"""Users and ACLs kept in the controller's Raft state: which version wins, and what each side does.

Under a controller (``enableControllerMode``) the users and ACLs are one replicated value,
:class:`ReplicatedAcl`: an *origin* (a token chosen when the value was first seeded) and an
:class:`metadata.acl_state.AclState` whose version counts the changes since.  Containers
enforce a copy and learn newer ones by asking the controller with the stamp they enforce.

Rules, the controller's side:
- The value is changed only by committing an :class:`AclDocument` (origin, version, the whole
  state as an ACL document, :mod:`metadata.acl_files`' TOML); applying it is a replacement,
  so replay and snapshots are trivial.  A document is produced here only from a state that
  :mod:`metadata.acl_state`'s commands accepted, and is parsed back before it is offered for
  commit (:func:`decide_change`): a bad document is never committed.
- An empty controller (no origin) takes the first seed a container offers (its file, or the
  copy it cached), at version 1 under the origin that container chose; every later seed is
  refused ``ALREADY_SEEDED`` and the seeder adopts the controller's value instead.  So two
  containers started with different files end up enforcing the same one: the first to
  reach the controller.
- Documents are at most :data:`MAX_DOCUMENT_BYTES` (one Raft entry, one gRPC reply).

Rules, a container's side (:func:`decide_sync`), from the stamp it enforces and the
controller's answer:

=====================================  ==================  ==========================================
controller answers                     document            the container
=====================================  ==================  ==========================================
no origin (never seeded)               -                   ``SEED``: offers what it enforces
the stamp it enforces                  -                   ``IN_STEP``
another origin                         parses              ``ADOPT`` (a new history: a re-seeded
                                                           controller, or another container's seed)
same origin, newer version             parses              ``ADOPT``
same origin, older version             -                   ``KEEP``: a stale answer never rolls back
anything to adopt                      missing or bad      ``BAD``: keeps what it enforces, logs why
=====================================  ==================  ==========================================

A container that was down adopts on its first answer after it returns (newer version or
other origin), whatever it missed in between: the document is the whole state.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from metadata.acl_files import dump_acl_toml, parse_acl_toml
from metadata.acl_state import AclCommandDecision, AclState, apply_all
from metadata.config import ConfigError

MAX_DOCUMENT_BYTES = 3 << 20  # under the 4 MiB of a default gRPC message, with room for the envelope
MAX_ORIGIN_CHARS = 64


@dataclass(frozen=True)
class AclStamp:
    """Which value a state is: ``origin`` "" is a container's own file, never confirmed."""
    origin: str
    version: int

    @property
    def seeded(self) -> bool:
        return bool(self.origin)

    def __str__(self) -> str:
        return f"version {self.version}" + (f" (origin {self.origin})" if self.origin else " (local, not confirmed)")


UNSEEDED = AclStamp("", 0)


@dataclass(frozen=True)
class ReplicatedAcl:
    """The controller's users and ACLs: empty (no origin, version 0) until a container seeds it."""
    origin: str = ""
    state: AclState = AclState()

    @property
    def stamp(self) -> AclStamp:
        return AclStamp(self.origin, self.state.version)


@dataclass(frozen=True)
class AclDocument:
    """What the controller commits: the whole state at ``version`` as ACL document text."""
    origin: str
    version: int
    text: str


@dataclass(frozen=True)
class EnforcerReport:
    """Which version a container enforces, for its brokers (``list-acl``); ``at_ms`` on the
    reporter's clock (the controller's monotonic one when it keeps the report)."""
    container: str
    brokers: tuple[str, ...]
    stamp: AclStamp
    at_ms: int = 0


class AclReplicationRejection(str, Enum):
    ALREADY_SEEDED = "ALREADY_SEEDED"
    BAD_DOCUMENT = "BAD_DOCUMENT"
    BAD_ORIGIN = "BAD_ORIGIN"
    DOCUMENT_TOO_LARGE = "DOCUMENT_TOO_LARGE"


@dataclass(frozen=True)
class Refused:
    reason: AclReplicationRejection
    detail: str


class CorruptDocument(ValueError):
    """A committed document that does not parse: a bug or corruption, never user input."""


def _where(origin: str, version: int) -> str:
    return f"controller ACL version {version}" + (f" of origin {origin}" if origin else "")


def _sized(text: str) -> Refused | None:
    size = len(text.encode("utf-8"))
    if size > MAX_DOCUMENT_BYTES:
        return Refused(AclReplicationRejection.DOCUMENT_TOO_LARGE,
                       f"the users and ACLs would take {size} bytes; at most {MAX_DOCUMENT_BYTES} are replicated")
    return None


def check_origin(origin: object) -> Refused | None:
    if not isinstance(origin, str) or not origin or len(origin) > MAX_ORIGIN_CHARS \
            or not all(c.isalnum() or c in "-_." for c in origin):
        return Refused(AclReplicationRejection.BAD_ORIGIN,
                       f"{origin!r} is not an origin (1-{MAX_ORIGIN_CHARS} letters, digits, '-', '_', '.')")
    return None


# ---- the controller's side ------------------------------------------------------------------

def decide_seed(current: ReplicatedAcl, origin: str, text: str) -> AclDocument | Refused:
    """A container offers its users and ACLs: version 1 of a new origin when the controller has none."""
    if current.origin:
        return Refused(AclReplicationRejection.ALREADY_SEEDED, f"the controller already holds {current.stamp}")
    problem = check_origin(origin) or _sized(text)
    if problem is not None:
        return problem
    try:
        state = parse_acl_toml(text, "the offered ACL document", version=1)
    except ConfigError as exc:
        return Refused(AclReplicationRejection.BAD_DOCUMENT, str(exc))
    return AclDocument(origin, 1, dump_acl_toml(state))


def decide_change(current: ReplicatedAcl, decision: AclCommandDecision) -> AclDocument | Refused | None:
    """The document to commit for an accepted command (None when it was rejected: nothing to commit)."""
    assert current.origin, "a change before the controller was seeded"
    if decision.rejected:
        return None
    state = apply_all(current.state, decision.events)
    text = dump_acl_toml(state)
    problem = _sized(text)
    if problem is not None:
        return problem
    try:  # what every member and every container will parse: refuse here what they could not
        parse_acl_toml(text, _where(current.origin, state.version), version=state.version)
    except ConfigError as exc:
        return Refused(AclReplicationRejection.BAD_DOCUMENT, str(exc))
    return AclDocument(current.origin, state.version, text)


def apply_document(current: ReplicatedAcl, document: AclDocument) -> ReplicatedAcl:
    """The value after a committed document (trusted: it was checked before it was proposed)."""
    assert document.origin, "a committed ACL document without an origin"
    assert document.origin != current.origin or document.version > current.state.version, \
        f"ACL document {document.version} does not follow {current.stamp}"
    try:
        state = parse_acl_toml(document.text, _where(document.origin, document.version), version=document.version)
    except ConfigError as exc:
        raise CorruptDocument(str(exc)) from None
    return ReplicatedAcl(document.origin, state)


def answer_with_document(current: ReplicatedAcl, known: AclStamp) -> bool:
    """Whether a container enforcing ``known`` needs the document (not when it is in step)."""
    return current.origin != "" and current.stamp != known


# ---- a container's side ---------------------------------------------------------------------

class SyncStep(str, Enum):
    IN_STEP = "IN_STEP"
    SEED = "SEED"
    ADOPT = "ADOPT"
    KEEP = "KEEP"
    BAD = "BAD"


@dataclass(frozen=True)
class SyncOutcome:
    step: SyncStep
    state: AclState | None = None  # the state to enforce, for ADOPT
    detail: str = ""


def decide_sync(enforced: AclStamp, offered: AclStamp, text: str | None) -> SyncOutcome:
    """What a container enforcing ``enforced`` does with the controller's answer (``offered``,
    with the document ``text`` when the controller sent one)."""
    if not offered.seeded:
        return SyncOutcome(SyncStep.SEED, detail="the controller holds no users and ACLs yet")
    if offered == enforced:
        return SyncOutcome(SyncStep.IN_STEP)
    if offered.origin == enforced.origin and offered.version < enforced.version:
        return SyncOutcome(SyncStep.KEEP, detail=f"the controller answered {offered}, older than the enforced "
                                                 f"{enforced}: a stale answer never rolls back")
    if text is None:
        return SyncOutcome(SyncStep.BAD, detail=f"the controller holds {offered} but sent no document; {enforced} "
                                                f"stays enforced")
    if len(text.encode("utf-8")) > MAX_DOCUMENT_BYTES:
        return SyncOutcome(SyncStep.BAD, detail=f"the document of {offered} is larger than {MAX_DOCUMENT_BYTES} bytes; "
                                                f"{enforced} stays enforced")
    try:
        state = parse_acl_toml(text, _where(offered.origin, offered.version), version=offered.version)
    except ConfigError as exc:
        return SyncOutcome(SyncStep.BAD, detail=f"{offered} is not valid, {enforced} stays enforced: {exc}")
    return SyncOutcome(SyncStep.ADOPT, state, f"{offered} replaces {enforced}")
