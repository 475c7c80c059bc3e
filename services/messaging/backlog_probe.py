"""The driver of the backlog board (scheduler.pop.backlog_board): ask, wake, answer.

Rules:
- One per container.  Receives waiting on its brokers count themselves in
  (:meth:`BacklogProbe.waiting`); one task asks, for every key the board says is due, each
  broker of the topic's route how many messages the group could receive there now: its own
  brokers in process, the others by one ``BacklogService.Backlog`` call per broker and
  round, carrying every due key of that broker, within ``timeout_ms``.  A broker that does
  not answer is left out of the answer (never counted as a backlog).
- The broker asked is the member the route's queues point at: id 0 (the master), else the
  smallest id (a slave acting for its absent master, RIP-32), as ``queue_routes`` picks it.
- Routes come from the nameserver, kept ``ROUTE_TTL_MS`` per topic (at most ``ROUTE_CACHE``
  topics); while it cannot be reached, the container's registration answers the last route
  it gave for anyone (the clients' route queries too).  No route: the key's probe failed;
  the board tries again at its interval.
- An answer that shows a backlog on another broker wakes the receives waiting on this
  container's brokers (their long poll looks again, sees :meth:`elsewhere`, and ends).
- :class:`BacklogServicer` answers other containers: the named broker's
  ``PopService.receivable`` (0 when it is not served here or not master), every request
  validated first.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Protocol

import grpc

from metadata.names import is_valid_group_name, is_valid_topic_name
from metadata.route_types import TopicRoute
from proto import backlog_pb2 as pb
from proto import backlog_pb2_grpc as pb_grpc
from scheduler.pop.backlog_board import BacklogBoard, BoardSettings, Key
from services import metrics
from services.cluster_auth import internal_channel

log = logging.getLogger(__name__)
ROUTE_TTL_MS = 2_000
ROUTE_CACHE = 1_024
MAX_KEYS_PER_CALL = 1_024
MAX_LIMIT = 1_000_000
RECEIVABLE_LIMIT = 1_024  # counting stops here: "some" is all a long poll needs to know


class Receivable(Protocol):
    def receivable(self, group: str, topic: str, limit: int) -> int: ...


class LocalBrokers(Protocol):
    def serving_pop(self, broker_name: str) -> Receivable | None:
        """The broker of that name hosted here, when it serves pop calls (master or acting)."""

    def wake(self, broker_name: str, topic: str) -> None:
        """Receives waiting for ``topic`` on that local broker look again."""


class BacklogProbe:
    def __init__(self, settings: BoardSettings, clock, routes: Callable[[str], Awaitable[TopicRoute | None]],
                 local: LocalBrokers, timeout_ms: int = 300):
        self.board = BacklogBoard(settings)
        self.clock, self._routes, self._local, self._timeout_s = clock, routes, local, timeout_ms / 1000
        self._route_cache: dict[str, tuple[int, TopicRoute | None]] = {}
        self._kick = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._probes: set[asyncio.Task] = set()
        self._channels: dict[str, tuple[grpc.aio.Channel, pb_grpc.BacklogServiceStub]] = {}

    # ---- the pop service's side (BacklogHint) -------------------------------------------------
    def elsewhere(self, topic: str, group: str, here: str) -> bool:
        """Asked by a receive that found nothing here: True ends its long poll (counted)."""
        if self.board.elsewhere((topic, group), here, self.clock.monotonic_ms()):
            metrics.labelled(metrics.RECEIVES_SENT_ELSEWHERE, here).inc()
            return True
        return False

    def waiting(self, topic: str, group: str, here: str, change: int) -> None:
        self.board.waiting((topic, group), here, change)
        if change > 0:
            self._kick.set()

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="backlog-probe")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._probes) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for channel, _ in self._channels.values():
            await channel.close()
        self._channels.clear()

    async def _run(self) -> None:
        while True:
            self._kick.clear()
            due = self.board.probe_due(self.clock.monotonic_ms())
            if due:
                task = asyncio.get_running_loop().create_task(self._probe_round(due))
                self._probes.add(task)
                task.add_done_callback(self._probes.discard)
            deadline = self.board.next_deadline_ms()
            timeout = None if deadline is None else max(0.0, (deadline - self.clock.monotonic_ms()) / 1000)
            try:
                async with asyncio.timeout(timeout):
                    await self._kick.wait()
            except TimeoutError:
                pass

    # ---- one round ----------------------------------------------------------------------------
    async def _probe_round(self, keys: list[Key]) -> None:
        try:
            await self._answer_round(keys)
        finally:
            self._kick.set()  # the keys are no longer in flight: the next round's time is to be worked out

    async def _answer_round(self, keys: list[Key]) -> None:
        try:
            plan = await self._plan(keys)
            answers = await self._ask(plan)
        except Exception:  # noqa: BLE001 - a bug here must not stop the probing of later rounds
            log.exception("backlog probe of %d keys failed", len(keys))
            for key in keys:
                self.board.failed(key)
            return
        now = self.clock.monotonic_ms()
        for key in keys:
            if key not in answers:
                self.board.failed(key)
                continue
            for here in self.board.heard(key, answers[key], now):
                self._local.wake(here, key[0])

    async def _plan(self, keys: list[Key]) -> dict[tuple[str, str], list[Key]]:
        """(broker name, address) -> the keys to ask it about; keys with no route are left out."""
        plan: dict[tuple[str, str], list[Key]] = {}
        for key in keys:
            route = await self._route(key[0])
            if route is None:
                continue
            for broker in route.brokers:
                member = broker.addresses.get(0) or (broker.addresses[min(broker.addresses)] if broker.addresses else None)
                if member is None or not broker.queue_data.perm & 4:  # no one serves it, or not readable
                    continue
                plan.setdefault((broker.broker_name, member.address), []).append(key)
        return plan

    async def _ask(self, plan: dict[tuple[str, str], list[Key]]) -> dict[Key, dict[str, int]]:
        answers: dict[Key, dict[str, int]] = {}
        calls = [(name, keys, self._ask_one(name, address, keys)) for (name, address), keys in plan.items()]
        results = await asyncio.gather(*(call for _, _, call in calls), return_exceptions=True)
        for (name, keys, _), counts in zip(calls, results):
            for key in keys:
                answers.setdefault(key, {})  # asked: an unreachable broker counts as no answer, not as a backlog
            if isinstance(counts, BaseException):
                log.debug("backlog of %s not known: %s", name, counts)
                continue
            for key, count in zip(keys, counts):
                answers[key][name] = count
        return answers

    async def _ask_one(self, broker_name: str, address: str, keys: list[Key]) -> list[int]:
        local = self._local.serving_pop(broker_name)
        if local is not None:
            return [local.receivable(group, topic, RECEIVABLE_LIMIT) for topic, group in keys]
        metrics.labelled(metrics.BACKLOG_PROBES, broker_name).inc()
        counts: list[int] = []
        for start in range(0, len(keys), MAX_KEYS_PER_CALL):
            chunk = keys[start:start + MAX_KEYS_PER_CALL]
            request = pb.BacklogRequest(broker_name=broker_name, limit=RECEIVABLE_LIMIT,
                                        keys=[pb.BacklogKey(topic=t, group=g) for t, g in chunk])
            reply = await self._stub(address).Backlog(request, timeout=self._timeout_s)
            if len(reply.receivable) != len(chunk):
                raise ValueError(f"{address} answered {len(reply.receivable)} counts for {len(chunk)} keys")
            counts += list(reply.receivable)
        return counts

    async def _route(self, topic: str) -> TopicRoute | None:
        now = self.clock.monotonic_ms()
        cached = self._route_cache.get(topic)
        if cached is not None and now - cached[0] < ROUTE_TTL_MS:
            return cached[1]
        try:
            route = await self._routes(topic)
        except Exception as failure:  # noqa: BLE001 - the nameserver is down: the last route, if any
            log.debug("route of %s for the backlog probe: %s", topic, failure)
            return cached[1] if cached is not None else None
        self._route_cache.pop(topic, None)
        self._route_cache[topic] = (now, route)
        while len(self._route_cache) > ROUTE_CACHE:
            del self._route_cache[next(iter(self._route_cache))]
        return route

    def _stub(self, address: str) -> pb_grpc.BacklogServiceStub:
        if address not in self._channels:
            channel = internal_channel(address, options=[("grpc.max_reconnect_backoff_ms", 1000)])
            self._channels[address] = (channel, pb_grpc.BacklogServiceStub(channel))
        return self._channels[address][1]


class BacklogServicer(pb_grpc.BacklogServiceServicer):
    """Answers other containers' probes for the brokers served here."""

    def __init__(self, local: LocalBrokers):
        self._local = local

    async def Backlog(self, request, context):
        problem = _invalid(request)
        if problem is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        broker = self._local.serving_pop(request.broker_name)
        if broker is None:
            return pb.BacklogResponse(receivable=[0] * len(request.keys))
        return pb.BacklogResponse(receivable=[broker.receivable(key.group, key.topic, request.limit) for key in request.keys])


def _invalid(request) -> str | None:
    if not request.broker_name or len(request.broker_name) > 255:
        return "broker_name must be 1 to 255 characters"
    if len(request.keys) > MAX_KEYS_PER_CALL:
        return f"at most {MAX_KEYS_PER_CALL} keys per call"
    if not 1 <= request.limit <= MAX_LIMIT:
        return f"limit must be 1 to {MAX_LIMIT}"
    for key in request.keys:
        if not is_valid_topic_name(key.topic) or not is_valid_group_name(key.group):
            return f"key {key.topic[:100]!r}/{key.group[:100]!r} is not a valid topic and group"
    return None
