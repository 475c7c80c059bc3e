"""The EscapeBridge: where an acting slave's writes go (RIP-32; reference 2.6).

Rules (the choice itself is ``ha.acting.escape_target``'s):
- One call escapes messages of one kind that need one topic (the real topic of a delay or
  transaction message, the original topic of a retry) to one target master, in one put: a
  master in this container is called in-process, another container's over the ActingService
  (``EscapePut``, deadline ``escapeTimeoutMillis``) on the internal address its route names.
- A master of this container still in pre-online is no target (``escape_target``); another
  container's is not in routes until it is online, and refuses an escape meanwhile.
- Other containers' masters come from the topic's route, read again from the nameserver when
  the copy is older than ``escapeRouteMaxAgeMillis`` or after a failed escape.  A target that
  does not answer or refuses is excluded (another container's for ``escapeExcludeMillis``, one
  of this container for ``escapeRetryIntervalMillis``: ``escape_target.exclusion_ms``) and the
  next candidate is tried; when none is left the call raises :class:`EscapeFailed` and the caller keeps the
  messages where they are (nothing advances).  Escapes of that kind and topic are then refused
  at once for ``escapeRetryIntervalMillis`` (the callers run every 100 ms: no route lookup
  each time), and tried again after it.
- Each message carries an escape key (origin broker, kind, origin offset): the target
  remembers keys it stored (its send de-duplication window), so an escape repeated after a
  lost reply is stored once.
- Properties are copied for every escape, never shared with the origin's message (#7601).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from types import MappingProxyType
from typing import Awaitable, Callable, Sequence

from ha.acting.escape_target import (EscapeKind, Exclusions, MasterCandidate, NoTarget, NoTargetReason, Target,
                                     choose_target, exclusion_ms)
from metadata.message import MessageDraft
from metadata.route_types import MASTER_ID, TopicRoute
from metadata.status import RequestRejected
from metadata.topic_config import PERM_WRITE
from proto import acting_pb2 as pb
from services.acting.client import ActingClient, ActingError

log = logging.getLogger(__name__)

RouteSource = Callable[[str], Awaitable["TopicRoute | None"]]
LocalMasters = Callable[[], Sequence[object]]  # services.broker.broker.Broker objects that are masters here


@dataclass(frozen=True)
class EscapedItem:
    key: str  # "<origin broker>:<kind>:<origin position>": the target stores one key once
    kind: EscapeKind
    draft: MessageDraft


@dataclass(frozen=True)
class EscapedPlace:
    broker_name: str
    topic: str
    queue_id: int
    queue_offset: int


class EscapeFailed(Exception):
    def __init__(self, message: str, no_target: NoTargetReason | None = None):
        super().__init__(message)
        self.no_target = no_target


def copied(draft: MessageDraft) -> MessageDraft:
    """The same message with property maps of its own (#7601: a shared map was mutated by an escape)."""
    return MessageDraft(draft.topic, draft.queue_id, draft.body, draft.born_timestamp_ms, draft.born_host,
                        MappingProxyType(dict(draft.properties)), MappingProxyType(dict(draft.user_properties)))


def _writable(config) -> bool:
    return config is not None and bool(config.perm & PERM_WRITE) and config.write_queue_nums > 0


class EscapeBridge:
    def __init__(self, own_name: str, config, clock, local_masters: LocalMasters, route_of: RouteSource,
                 client: ActingClient):
        """``config``: the acting broker's BrokerConfig (escape keys and limits)."""
        self.own_name, self.config, self.clock = own_name, config, clock
        self.local_masters, self.route_of, self.client = local_masters, route_of, client
        self.exclusions = Exclusions(config.escape_exclude_ms)
        self._routes: dict[str, tuple[int, TopicRoute | None]] = {}
        self._turn = 0
        self._resting: dict[tuple[EscapeKind, str], tuple[int, NoTargetReason]] = {}  # no target until then
        self.escaped = 0  # messages escaped by this bridge (status, tests)

    async def escape(self, kind: EscapeKind, topic: str, items: Sequence[EscapedItem]) -> list[EscapedPlace]:
        """Store ``items`` on one live master that can take ``kind`` for ``topic``; their places."""
        resting = self._resting.get((kind, topic))
        if resting is not None and self.clock.now_ms() < resting[0]:
            raise EscapeFailed(f"{kind.value} messages of {topic} wait: {resting[1].value}", resting[1])
        tried: set[str] = set()
        while True:
            candidates = await self._candidates(kind, topic)
            excluded = self.exclusions.active(self.clock.now_ms()) | tried
            choice = choose_target(self.own_name, kind, candidates, excluded, self.config.enable_remote_escape, self._turn)
            if isinstance(choice, NoTarget):
                self._resting[(kind, topic)] = (self.clock.now_ms() + self.config.escape_retry_interval_ms, choice.reason)
                raise EscapeFailed(f"no master to escape {len(items)} {kind.value} message(s) of {topic} to: "
                                   f"{choice.reason.value}", choice.reason)
            self._turn += 1
            try:
                places = await self._put(choice, items)
            except (RequestRejected, ActingError, EscapeFailed) as failure:
                excluded_ms = exclusion_ms(choice, self.config.escape_exclude_ms, self.config.escape_retry_interval_ms)
                log.warning("escape of %d %s message(s) of %s to %s failed (%s); excluded for %d ms", len(items),
                            kind.value, topic, choice.broker_name, failure, excluded_ms)
                self.exclusions.exclude(choice.broker_name, self.clock.now_ms(), excluded_ms)
                self._routes.pop(topic, None)
                tried.add(choice.broker_name)
                continue
            self._resting.pop((kind, topic), None)
            self.escaped += len(items)
            return places

    async def _candidates(self, kind: EscapeKind, topic: str) -> list[MasterCandidate]:
        local = [MasterCandidate(b.name, True, "", _writable(b.topics.get(topic)), bool(b.pre_online_pending))
                 for b in self.local_masters()]
        if not self.config.enable_remote_escape:
            return local
        names = {c.broker_name for c in local}
        route = await self._route(topic)
        remote = []
        for broker in (route.brokers if route is not None else ()):
            master = broker.addresses.get(MASTER_ID)
            if master is None or broker.broker_name in names or broker.broker_name == self.own_name:
                continue
            hosts = bool(broker.queue_data.perm & PERM_WRITE) and broker.queue_data.write_queue_nums > 0
            remote.append(MasterCandidate(broker.broker_name, False, master.address, hosts))
        return local + remote

    async def _route(self, topic: str) -> TopicRoute | None:
        now = self.clock.now_ms()
        cached = self._routes.get(topic)
        if cached is not None and now - cached[0] <= self.config.escape_route_max_age_ms:
            return cached[1]
        try:
            route = await self.route_of(topic)
        except Exception as exc:  # the nameserver is down: only what is local is known
            log.debug("escape: route of %s unavailable (%s)", topic, exc)
            return None
        self._routes[topic] = (now, route)
        return route

    async def _put(self, target: Target, items: Sequence[EscapedItem]) -> list[EscapedPlace]:
        if target.local:
            broker = next((b for b in self.local_masters() if b.name == target.broker_name), None)
            if broker is None:
                raise EscapeFailed(f"{target.broker_name} is no longer a master here")
            return await broker.escape_put([EscapedItem(i.key, i.kind, copied(i.draft)) for i in items])
        request = pb.ActingEscapePutRequest(broker_name=target.broker_name, messages=[to_proto(i) for i in items])
        reply = await self.client.call(target.address, "EscapePut", request, self.config.escape_timeout_ms)
        if len(reply.places) != len(items):
            raise EscapeFailed(f"{target.broker_name} answered {len(reply.places)} places for {len(items)} messages")
        return [EscapedPlace(target.broker_name, p.topic, p.queue_id, p.queue_offset) for p in reply.places]


def to_proto(item: EscapedItem) -> pb.ActingEscapedMessage:
    draft = item.draft
    return pb.ActingEscapedMessage(topic=draft.topic, queue_id=draft.queue_id, body=draft.body,
                                   born_timestamp_ms=draft.born_timestamp_ms, born_host=draft.born_host,
                                   properties=dict(draft.properties), user_properties=dict(draft.user_properties),
                                   escape_key=item.key, kind=item.kind.value)
