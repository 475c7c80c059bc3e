"""Clients known to this server: their settings, liveness and open Telemetry streams.

Rules:
- Keyed by ``x-mq-client-id``.  A client may have several Telemetry streams (one per
  broker endpoint it talks to); each stream has a bounded outbox of server commands
  (``telemetryOutboxSize``); a full outbox refuses the push instead of growing.
- :meth:`push_transaction_check` implements ``TransactionCheckSink``: it hands the orphan
  check to one live producer stream whose settings list the topic, rotating between
  producers; False when none is connected (the broker re-checks later).
- At most ``maxClientNum`` clients are remembered; clients silent for
  ``clientIdleTimeoutMillis`` and without a stream are forgotten by :meth:`expire_idle`.
- The table is kept in the order clients were last heard from, oldest first, so a new client
  at capacity evicts the oldest one without a stream by looking at the front, and the idle
  expiry stops at the first client heard from lately.  Before, each new client at capacity
  scanned every client: with the default 100,000, milliseconds of the loop per client of a
  reconnect storm.
Runs on the server's event loop; no locks needed.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field, replace

from services.broker.api import TransactionCheck
from services.messaging import responses
from services.messaging.config import MessagingConfig
from services.messaging.settings import PRODUCER, ClientSettings

log = logging.getLogger(__name__)


class TelemetryStream:
    """The server -> client half of one Telemetry stream."""

    def __init__(self, client_id: str, capacity: int):
        self.client_id = client_id
        self.outbox: asyncio.Queue = asyncio.Queue(maxsize=capacity)

    def offer(self, command) -> bool:
        try:
            self.outbox.put_nowait(command)
            return True
        except asyncio.QueueFull:
            return False


@dataclass
class _Client:
    last_seen_ms: int
    settings: ClientSettings | None = None
    client_type: str = ""
    group: str = ""
    streams: list[TelemetryStream] = field(default_factory=list)


@dataclass(frozen=True)
class ClientInfo:
    """One client as ``relaymq admin consumer-connection | producer-connection`` shows it."""

    client_id: str
    client_type: str
    group: str
    topics: frozenset[str]
    idle_ms: int
    streams: int


class ClientRegistry:
    def __init__(self, config: MessagingConfig, clock):
        self._config = config
        self._clock = clock
        self._clients: dict[str, _Client] = {}
        self._rotation = itertools.count()

    def _touch(self, client_id: str) -> _Client:
        now = self._clock.monotonic_ms()
        client = self._clients.pop(client_id, None)  # put back at the end: the newest
        if client is None:
            if len(self._clients) >= self._config.max_clients:
                self._evict_one()
            client = _Client(last_seen_ms=now)
        self._clients[client_id] = client
        client.last_seen_ms = now
        return client

    def _evict_one(self) -> None:
        """The oldest client without a stream, or the oldest of all if every one has streams."""
        for client_id, client in self._clients.items():
            if not client.streams:
                break
        else:
            client_id = next(iter(self._clients))
        del self._clients[client_id]

    def open_stream(self, client_id: str) -> TelemetryStream:
        stream = TelemetryStream(client_id, self._config.telemetry_outbox_size)
        self._touch(client_id).streams.append(stream)
        return stream

    def close_stream(self, stream: TelemetryStream) -> None:
        client = self._clients.get(stream.client_id)
        if client is not None and stream in client.streams:
            client.streams.remove(stream)

    def update_settings(self, client_id: str, settings: ClientSettings) -> None:
        client = self._touch(client_id)
        client.settings = settings
        client.group = settings.group or client.group

    def heartbeat(self, client_id: str, client_type: str, group: str) -> None:
        client = self._touch(client_id)
        client.client_type, client.group = client_type or client.client_type, group or client.group

    def note_publishing(self, client_id: str, topic: str) -> None:
        """A producer that sends to a topic can answer checks for it, even before settings arrive."""
        client = self._touch(client_id)
        settings = client.settings or ClientSettings(PRODUCER)
        if settings.client_type == PRODUCER and topic not in settings.topics:
            client.settings = replace(settings, topics=settings.topics | {topic})

    def terminate(self, client_id: str) -> None:
        """Forget a client that said goodbye; one with open streams stays routable until they close."""
        client = self._clients.get(client_id)
        if client is not None and not client.streams:
            del self._clients[client_id]

    def settings_of(self, client_id: str) -> ClientSettings | None:
        client = self._clients.get(client_id)
        return client.settings if client else None

    def client_type(self, client_id: str) -> str:
        """PRODUCER, PUSH_CONSUMER, SIMPLE_CONSUMER, ... as its heartbeat or settings said ("" unknown)."""
        client = self._clients.get(client_id)
        if client is None:
            return ""
        return client.client_type or (client.settings.client_type if client.settings else "")

    def max_attempts(self, client_id: str) -> int | None:
        settings = self.settings_of(client_id)
        return settings.max_attempts if settings else None

    def expire_idle(self) -> int:
        horizon = self._clock.monotonic_ms() - self._config.client_idle_timeout_ms
        stale = []
        for client_id, client in self._clients.items():
            if client.last_seen_ms >= horizon:
                break  # every later one was heard from later still
            if not client.streams:
                stale.append(client_id)
        for client_id in stale:
            del self._clients[client_id]
        return len(stale)

    def __len__(self) -> int:
        return len(self._clients)

    def snapshot(self) -> list[ClientInfo]:
        now = self._clock.monotonic_ms()
        return [ClientInfo(client_id, client.client_type or (client.settings.client_type if client.settings else ""),
                           client.group, frozenset(client.settings.topics) if client.settings else frozenset(),
                           max(0, now - client.last_seen_ms), len(client.streams))
                for client_id, client in sorted(self._clients.items())]

    def producer_streams(self, topic: str) -> list[TelemetryStream]:
        return [stream for client in self._clients.values()
                if client.settings is not None and client.settings.client_type == PRODUCER and topic in client.settings.topics
                for stream in client.streams]

    def push_transaction_check(self, check: TransactionCheck) -> bool:
        streams = self.producer_streams(check.topic)
        if not streams:
            return False
        command = responses.transaction_check_command(check)
        start = next(self._rotation)
        for index in range(len(streams)):
            if streams[(start + index) % len(streams)].offer(command):
                return True
        log.warning("every producer stream of topic %s is full; transaction check %s deferred", check.topic, check.transaction_id)
        return False
