"""Pre-online: a returning master stays out of routes until it took its group's tables back
(RIP-32, upstream ``BrokerPreOnlineService``; reference 2.5).

Rules:
- Needed (:func:`pre_online_needed`) by a fixed-role master (not controller mode: there the
  controller elects an in-sync master) with ``totalReplicas > 1`` and without
  ``skipPreOnline``.  Until it is ONLINE the master registers with no nameserver, sends no
  heartbeat, runs no special service and holds pop calls (the driver's side).
- An attempt reads the group's members (the nameserver's member set, the master itself left
  out), then visits each member not synced yet, in ascending id:
  1. OFFER: tells it where its master is (upstream's ``EXCHANGE_BROKER_HA_INFO``): a slave
     finds no master in the nameserver while this one is unregistered.
  2. WAIT_TRANSFER: waits until the member's replication connection reached TRANSFER
     (matched by broker id, not by IP as upstream), at most ``transfer_timeout_ms``.
  3. SYNC: pulls the member's tables, then adopts the newer ones
     (``metadata.pre_online_merge``) only if its connection is still in TRANSFER when the
     pull answered (a slave that lost its master may act again while this one is
     unregistered: what it advanced after the pull would be lost).
  A member that does not answer the offer is *unreachable* and skipped in this attempt; one
  that answered but then did not reach TRANSFER in time, lost it, or failed the pull *fails*
  the attempt.
- The end of an attempt: no member failed -> ONLINE: ``SYNCED`` (every member synced and still
  connected), ``NO_MEMBERS`` (nobody else registered), ``NO_PEER_REACHABLE`` (nobody answered:
  scenario 36, online after the first failed attempt), ``UNREACHABLE_SKIPPED`` (the reachable
  ones synced, the others did not answer).  A member synced in an earlier attempt whose
  connection dropped since is synced again.  Otherwise RETRY_WAIT for ``retry_interval_ms``,
  then a new attempt with the members still pending (progress is kept across attempts, as
  upstream's ``waitBrokerIndex``), and after ``max_attempts`` failed attempts (0: no limit)
  ONLINE (``GAVE_UP``).  An error the driver did not expect fails the attempt the same way
  (``DRIVER_ERROR``): the master neither goes online with unmerged tables nor stops trying.
- A member set that cannot be read fails the attempt and is retried (the nameserver is needed
  to go online at all); it is not "no peer reachable".
- Pure: events in, one :class:`Action` out; time is an argument; :meth:`PreOnline.next_deadline_ms`
  says when :meth:`PreOnline.tick` is due.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Mapping


class Step(str, Enum):
    FETCH_MEMBERS = "FETCH_MEMBERS"
    OFFER = "OFFER"
    WAIT_TRANSFER = "WAIT_TRANSFER"
    SYNC = "SYNC"
    ADOPT = "ADOPT"
    RETRY_WAIT = "RETRY_WAIT"
    ONLINE = "ONLINE"


class OnlineReason(str, Enum):
    SYNCED = "SYNCED"
    NO_MEMBERS = "NO_MEMBERS"
    NO_PEER_REACHABLE = "NO_PEER_REACHABLE"
    UNREACHABLE_SKIPPED = "UNREACHABLE_SKIPPED"
    GAVE_UP = "GAVE_UP"


class Failure(str, Enum):
    MEMBERS_UNAVAILABLE = "MEMBERS_UNAVAILABLE"
    TRANSFER_TIMEOUT = "TRANSFER_TIMEOUT"
    CONNECTION_LOST = "CONNECTION_LOST"
    PULL_FAILED = "PULL_FAILED"
    ADOPT_FAILED = "ADOPT_FAILED"
    DRIVER_ERROR = "DRIVER_ERROR"  # the driver met an error it did not expect (a bug, a full disk)


@dataclass(frozen=True)
class Settings:
    self_id: int
    transfer_timeout_ms: int  # preOnlineTransferTimeoutMillis
    retry_interval_ms: int  # preOnlineRetryIntervalMillis
    max_attempts: int = 0  # preOnlineMaxAttempts, 0: until it is done


@dataclass(frozen=True)
class Member:
    broker_id: int
    address: str  # its container's internal (admin) address


@dataclass(frozen=True)
class Action:
    """What the driver does next; at most one field is set (none: wait for the deadline or a
    connection change)."""

    fetch_members: bool = False
    offer: Member | None = None
    pull: Member | None = None
    adopt: Member | None = None
    online: OnlineReason | None = None


WAIT = Action()


def pre_online_needed(is_master: bool, total_replicas: int, skip_pre_online: bool, controller_mode: bool) -> bool:
    return is_master and total_replicas > 1 and not skip_pre_online and not controller_mode


class PreOnline:
    def __init__(self, settings: Settings, now_ms: int):
        self.settings = settings
        self.step = Step.FETCH_MEMBERS
        self.started_ms = self.since_ms = now_ms
        self.attempt = 0
        self.members: Mapping[int, Member] = MappingProxyType({})
        self.synced: set[int] = set()
        self.transferring: frozenset[int] = frozenset()
        self._queue: list[Member] = []  # this attempt's members still to visit
        self._reached: set[int] = set()  # answered the offer in this attempt
        self._unreachable: set[int] = set()
        self.current: Member | None = None
        self.deadline_ms: int | None = None
        self.last_failure = ""
        self.online_reason: OnlineReason | None = None
        self.online_ms: int | None = None

    # ---- events --------------------------------------------------------------------------------
    def start(self, now_ms: int) -> Action:
        return self._new_attempt(now_ms)

    def members_fetched(self, members: Mapping[int, str], now_ms: int) -> Action:
        assert self.step is Step.FETCH_MEMBERS
        self.members = MappingProxyType({i: Member(i, a) for i, a in sorted(members.items()) if i != self.settings.self_id})
        self.synced &= {i for i in self.members if i in self.transferring}  # a dropped connection syncs again
        self._queue = [m for m in self.members.values() if m.broker_id not in self.synced]
        self._reached, self._unreachable = set(), set()
        return self._next_member(now_ms)

    def members_unavailable(self, detail: str, now_ms: int) -> Action:
        assert self.step is Step.FETCH_MEMBERS
        return self._fail(Failure.MEMBERS_UNAVAILABLE, detail, now_ms)

    def offer_answered(self, member_id: int, reached: bool, now_ms: int, detail: str = "") -> Action:
        """The member answered the offer (``reached``), or could not be reached."""
        assert self.step is Step.OFFER and self.current is not None and self.current.broker_id == member_id
        if not reached:
            self._unreachable.add(member_id)
            self.last_failure = f"member {member_id} unreachable: {detail}"
            return self._next_member(now_ms)
        self._reached.add(member_id)
        if member_id in self.transferring:
            return self._to_pull(now_ms)
        self._enter(Step.WAIT_TRANSFER, now_ms, now_ms + self.settings.transfer_timeout_ms)
        return WAIT

    def connections(self, transferring: frozenset[int], now_ms: int) -> Action:
        """The ids of the members whose replication connection is in TRANSFER now."""
        self.transferring = frozenset(transferring)
        if self.step is Step.WAIT_TRANSFER and self.current.broker_id in self.transferring:
            return self._to_pull(now_ms)
        return WAIT

    def pulled(self, member_id: int, ok: bool, now_ms: int, detail: str = "") -> Action:
        """The pull of the member's tables answered (``ok``) or failed."""
        assert self.step is Step.SYNC and self.current is not None and self.current.broker_id == member_id
        if not ok:
            return self._fail(Failure.PULL_FAILED, f"member {member_id}: {detail}", now_ms)
        if member_id not in self.transferring:
            return self._fail(Failure.CONNECTION_LOST, f"member {member_id}'s connection left TRANSFER during the pull", now_ms)
        self._enter(Step.ADOPT, now_ms)
        return Action(adopt=self.current)

    def adopted(self, member_id: int, ok: bool, now_ms: int, detail: str = "") -> Action:
        assert self.step is Step.ADOPT and self.current is not None and self.current.broker_id == member_id
        if not ok:
            return self._fail(Failure.ADOPT_FAILED, f"member {member_id}: {detail}", now_ms)
        self.synced.add(member_id)
        return self._next_member(now_ms)

    def driver_failed(self, detail: str, now_ms: int) -> Action:
        """The driver could not carry out the last action: the attempt fails (and is retried)."""
        assert self.step is not Step.ONLINE
        return self._fail(Failure.DRIVER_ERROR, detail, now_ms)

    def tick(self, now_ms: int) -> Action:
        if self.deadline_ms is None or now_ms < self.deadline_ms:
            return WAIT
        if self.step is Step.WAIT_TRANSFER:
            return self._fail(Failure.TRANSFER_TIMEOUT, f"member {self.current.broker_id} did not reach TRANSFER within "
                                                        f"{self.settings.transfer_timeout_ms} ms", now_ms)
        assert self.step is Step.RETRY_WAIT
        return self._new_attempt(now_ms)

    def next_deadline_ms(self) -> int | None:
        return self.deadline_ms

    # ---- transitions ---------------------------------------------------------------------------
    def _enter(self, step: Step, now_ms: int, deadline_ms: int | None = None) -> None:
        self.step, self.since_ms, self.deadline_ms = step, now_ms, deadline_ms

    def _new_attempt(self, now_ms: int) -> Action:
        self.attempt += 1
        self.current = None
        self._enter(Step.FETCH_MEMBERS, now_ms)
        return Action(fetch_members=True)

    def _to_pull(self, now_ms: int) -> Action:
        self._enter(Step.SYNC, now_ms)
        return Action(pull=self.current)

    def _next_member(self, now_ms: int) -> Action:
        if self._queue:
            self.current = self._queue.pop(0)
            self._enter(Step.OFFER, now_ms)
            return Action(offer=self.current)
        self.current = None
        lost = sorted(i for i in self.synced if i in self.members and i not in self.transferring)
        if lost:  # it may act again while this master is unregistered: sync it again
            return self._fail(Failure.CONNECTION_LOST, f"members {lost} left TRANSFER after their sync", now_ms)
        return self._online(self._end_reason(), now_ms)

    def _end_reason(self) -> OnlineReason:
        if not self.members:
            return OnlineReason.NO_MEMBERS
        if self.synced >= set(self.members):
            return OnlineReason.SYNCED
        synced_now = self.synced & set(self.members)
        return OnlineReason.UNREACHABLE_SKIPPED if synced_now or self._reached else OnlineReason.NO_PEER_REACHABLE

    def _fail(self, failure: Failure, detail: str, now_ms: int) -> Action:
        self.last_failure = f"{failure.value}: {detail}"
        if self.settings.max_attempts and self.attempt >= self.settings.max_attempts:
            return self._online(OnlineReason.GAVE_UP, now_ms)
        self._enter(Step.RETRY_WAIT, now_ms, now_ms + self.settings.retry_interval_ms)
        return WAIT

    def _online(self, reason: OnlineReason, now_ms: int) -> Action:
        self._enter(Step.ONLINE, now_ms)
        self.online_reason, self.online_ms = reason, now_ms
        return Action(online=reason)

    # ---- status --------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.step is Step.ONLINE

    def status(self, now_ms: int) -> dict:
        """What ``relaymq admin ha-status --json`` shows as ``preOnline``."""
        member = self.current
        return {"step": self.step.value, "attempt": self.attempt, "waitingOn": member.broker_id if member else None,
                "waitingOnAddress": member.address if member else None,
                "waitedMs": now_ms - self.since_ms, "members": sorted(self.members), "synced": sorted(self.synced),
                "unreachable": sorted(self._unreachable), "lastFailure": self.last_failure,
                "onlineReason": self.online_reason.value if self.online_reason else None,
                "onlineAfterMs": self.online_ms - self.started_ms if self.online_ms is not None else None}
