"""Where an acting slave's write goes (RIP-32 ``EscapeBridge``; reference 2.6, upstream #7923).

An acting slave never writes its own commit log (its log must stay a copy of its master's).
What it must write -- a due delay message, a committed half message, a retry or dead-letter
copy -- escapes to a live master of another group.

Rules:
* Candidates are masters of other groups that can take the message: for a delay message or
  a committed transaction, a master hosting the message's topic and writable; for a retry,
  a master hosting the original topic (its consumers then read the retry topic there); for a
  dead-letter copy, any writable master.
* A master still in pre-online (it has not taken its own group's state back from its slaves,
  ``ha.role.pre_online``) takes nothing: it serves no one yet, its special services are off,
  and what it would store is judged against tables it is about to replace (issue 24 defect 2:
  delay messages escaped into such a master were delivered twice).  With only such masters
  left there is no target (MASTER_PRE_ONLINE): the messages wait and are tried again.
* A master in the same container comes first (no remote call: upstream's local escape).
  Another container's masters are used only with ``enableRemoteEscape``, and come from a
  fresh route of the topic (the driver refreshes it; it never escapes by a stale cache).
* A master that did not answer (or refused) recently is excluded for a while
  (:class:`Exclusions`): upstream #7923 escaped to a dead master from a stale route and lost
  the messages.  How long is :func:`exclusion_ms`: another container's master, which may be
  dead, for ``escapeExcludeMillis``; a master in this container only until the next retry
  (``escapeRetryIntervalMillis``): it is alive (a master of this process), its failure was
  an answer (a replica wait that ran out while its own slave died with the other container,
  a full disk), and it is often the only target -- excluding it for 10 s held every due
  message of the acting group for that long after one failed put (issue 24 defect 3).
* Among equal candidates the choice rotates (``turn``), so escapes spread over the masters.
* No candidate: :class:`NoTarget` with the reason; the caller leaves the message where it is
  (nothing advances) and tries again later.
* Pure: candidates, exclusions and now in, a choice out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Sequence, Union


class EscapeKind(str, Enum):
    DELAY = "DELAY"  # a due delay/timer message, to its real topic
    TRANSACTION = "TRANSACTION"  # a committed half message, to its real topic
    RETRY = "RETRY"  # a popped message not acked in time, to the retry topic of its original topic
    DEAD_LETTER = "DEAD_LETTER"  # past its attempts, to %DLQ%<group>


@dataclass(frozen=True)
class MasterCandidate:
    broker_name: str
    local: bool  # hosted by this container
    address: str  # the hosting container's internal address ("" for a local one)
    hosts_topic: bool  # the master has the topic the kind needs, writable
    pre_online: bool = False  # still in pre-online: takes nothing yet


@dataclass(frozen=True)
class Target:
    broker_name: str
    local: bool
    address: str


class NoTargetReason(str, Enum):
    NO_LIVE_MASTER = "NO_LIVE_MASTER"  # no other group's master hosts the topic
    MASTER_PRE_ONLINE = "MASTER_PRE_ONLINE"  # the masters that host it are all still in pre-online
    REMOTE_ESCAPE_DISABLED = "REMOTE_ESCAPE_DISABLED"  # only other containers' masters could take it
    ALL_EXCLUDED = "ALL_EXCLUDED"  # every candidate failed recently


@dataclass(frozen=True)
class NoTarget:
    reason: NoTargetReason


Choice = Union[Target, NoTarget]


def needs_topic(kind: EscapeKind) -> bool:
    return kind is not EscapeKind.DEAD_LETTER


def choose_target(own_broker_name: str, kind: EscapeKind, candidates: Sequence[MasterCandidate],
                  excluded: frozenset[str], remote_enabled: bool, turn: int = 0) -> Choice:
    usable = [c for c in candidates if c.broker_name != own_broker_name and (c.hosts_topic or not needs_topic(kind))]
    if not usable:
        return NoTarget(NoTargetReason.NO_LIVE_MASTER)
    online = [c for c in usable if not c.pre_online]
    if not online:
        return NoTarget(NoTargetReason.MASTER_PRE_ONLINE)
    allowed = [c for c in online if c.local or remote_enabled]
    if not allowed:
        return NoTarget(NoTargetReason.REMOTE_ESCAPE_DISABLED)
    alive = [c for c in allowed if c.broker_name not in excluded]
    if not alive:
        return NoTarget(NoTargetReason.ALL_EXCLUDED)
    local = [c for c in alive if c.local]
    pool = sorted(local or alive, key=lambda c: c.broker_name)
    chosen = pool[turn % len(pool)]
    return Target(chosen.broker_name, chosen.local, chosen.address)


def exclusion_ms(target: Target, exclude_ms: int, retry_ms: int) -> int:
    """How long ``target`` is not chosen again after an escape to it failed."""
    return min(retry_ms, exclude_ms) if target.local else exclude_ms


@dataclass
class Exclusions:
    """Masters that did not answer an escape, each excluded until a deadline (``now_ms`` based)."""

    exclude_ms: int
    until: dict[str, int] = field(default_factory=dict)

    def exclude(self, broker_name: str, now_ms: int, for_ms: int | None = None) -> None:
        self.until[broker_name] = now_ms + (self.exclude_ms if for_ms is None else for_ms)

    def forgive(self, broker_name: str) -> None:
        self.until.pop(broker_name, None)

    def active(self, now_ms: int) -> frozenset[str]:
        for name in [n for n, t in self.until.items() if t <= now_ms]:
            del self.until[name]
        return frozenset(self.until)
