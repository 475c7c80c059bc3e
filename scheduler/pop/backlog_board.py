"""Where a consumer group's backlog sits, as a container last heard it: the early end of a long poll.

Why: the official SimpleConsumers pick the next route queue for every receive, round robin
over every broker's queues, and a receive that reaches a broker with nothing for the group
long-polls there (at least ``grpcClientConsumerMinLongPollingTimeoutMillis``, upstream's 5 s,
and by default the client's 20 s).  Once a backlog sits on one broker only (a broker made
read-only for maintenance, an uneven failover, FIFO groups hashed unevenly), every receive
that lands on another broker is lost time, and the drain collapses to a message every few
seconds (issue 23).  So a receive that finds nothing here ends at once when another broker
of the topic holds messages the group could receive now: the client's next receive goes to
the next queue.  Only receives that pick their queue per call do this (``auto_renew`` false:
SimpleConsumer); a PushConsumer polls every assigned broker in its own loop and is never
sent away.

Rules:
- A key is (topic, group).  A receive that waits here counts itself in for the key and the
  broker it waits at (:meth:`BacklogBoard.waiting`, +1 then -1 when it ends); the board is
  only about keys someone waits for.
- A key is probed (every broker of the topic asked how many messages the group could
  receive there now) when a receive first waits for it, then every ``probe_interval_ms``
  while receives still wait; one probe of a key in flight at a time (:meth:`probe_due`).
  A round takes along every other waited-for key whose last probe is at least half an
  interval old, so the keys fall into step and the driver asks each broker once per round
  for all of them: idle consumers cost one question per broker and interval, whatever the
  number of keys or receives waiting (bench/bench_idle_consumers.py).
- :meth:`heard` records a probe's answer; it returns the brokers whose waiting receives
  should wake: those that wait for the key while another broker holds a backlog.
- :meth:`elsewhere` says whether the last answer, at most ``fresh_ms`` old, names a broker
  other than ``here`` with a backlog.  No answer yet, a failed probe, or an old answer: no
  (the receive long-polls as upstream's would: an unreachable broker never turns long polls
  into a busy loop).
- A key nobody waits for is forgotten once its last answer is older than ``fresh_ms`` and no
  probe of it is in flight; at most ``max_keys`` keys are kept (the least recently wanted
  goes first).
- Pure: ``now_ms`` is an argument; nothing here sends or sleeps.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

Key = tuple[str, str]  # (topic, group)


@dataclass(frozen=True)
class BoardSettings:
    probe_interval_ms: int = 500
    fresh_ms: int = 1000
    max_keys: int = 10_000

    def __post_init__(self) -> None:
        assert 0 < self.probe_interval_ms <= self.fresh_ms, self
        assert self.max_keys > 0, self


@dataclass
class _Entry:
    waiting_at: dict[str, int] = field(default_factory=dict)  # broker here -> receives waiting there
    probe_sent_ms: int | None = None   # a probe in flight since then
    last_probe_ms: int | None = None   # when the last probe was sent (answered or not)
    heard_ms: int | None = None        # when the last answer came
    backlog: dict[str, int] = field(default_factory=dict)  # broker -> messages receivable there, as last heard


class BacklogBoard:
    def __init__(self, settings: BoardSettings = BoardSettings()):
        self.settings = settings
        self._entries: dict[Key, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def waiting(self, key: Key, here: str, change: int) -> None:
        """A receive at broker ``here`` starts (+1) or stops (-1) waiting for ``key``."""
        assert change in (1, -1), change
        entry = self._entries.get(key)
        if change < 0:
            if entry is not None and entry.waiting_at.get(here, 0) > 0:
                entry.waiting_at[here] -= 1
                if not entry.waiting_at[here]:
                    del entry.waiting_at[here]
            return
        if entry is None:
            entry = _Entry()
        else:
            del self._entries[key]
        entry.waiting_at[here] = entry.waiting_at.get(here, 0) + 1
        self._entries[key] = entry  # most recently wanted last
        while len(self._entries) > self.settings.max_keys:
            del self._entries[next(iter(self._entries))]

    def probe_due(self, now_ms: int) -> list[Key]:
        """Keys to probe now (marked in flight): wanted, none in flight, the last probe sent at
        least ``probe_interval_ms`` ago (or never)."""
        self._forget(now_ms)
        interval = self.settings.probe_interval_ms
        idle = [(key, entry) for key, entry in self._entries.items() if entry.probe_sent_ms is None and entry.waiting_at]
        if not any(entry.last_probe_ms is None or now_ms - entry.last_probe_ms >= interval for _, entry in idle):
            return []
        due = []
        for key, entry in idle:  # the due ones, and those half way there: they fall into step
            if entry.last_probe_ms is None or 2 * (now_ms - entry.last_probe_ms) >= interval:
                entry.probe_sent_ms = entry.last_probe_ms = now_ms
                due.append(key)
        return due

    def heard(self, key: Key, backlog: Mapping[str, int], now_ms: int) -> tuple[str, ...]:
        """A probe of ``key`` answered (``backlog``: broker -> messages receivable there; the
        brokers it could not reach are left out).  Returns the brokers whose waiting receives
        should wake: another broker holds a backlog for them."""
        entry = self._entries.get(key)
        if entry is None:
            return ()
        entry.probe_sent_ms = None
        entry.heard_ms = now_ms
        entry.backlog = {broker: count for broker, count in backlog.items() if count > 0}
        return tuple(sorted(here for here in entry.waiting_at if any(b != here for b in entry.backlog)))

    def failed(self, key: Key) -> None:
        """The probe of ``key`` could not be made (no route): the next one goes at its interval."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.probe_sent_ms = None

    def elsewhere(self, key: Key, here: str, now_ms: int) -> bool:
        entry = self._entries.get(key)
        if entry is None or entry.heard_ms is None or now_ms - entry.heard_ms > self.settings.fresh_ms:
            return False
        return any(broker != here for broker in entry.backlog)

    def next_deadline_ms(self) -> int | None:
        """When :meth:`probe_due` next has something to do (None: nothing is wanted)."""
        deadlines = [entry.last_probe_ms + self.settings.probe_interval_ms if entry.last_probe_ms is not None else 0
                     for entry in self._entries.values() if entry.probe_sent_ms is None and entry.waiting_at]
        return min(deadlines, default=None)

    def _forget(self, now_ms: int) -> None:
        fresh_ms = self.settings.fresh_ms
        for key in [k for k, e in self._entries.items() if not e.waiting_at and e.probe_sent_ms is None
                    and (e.heard_ms is None or now_ms - e.heard_ms > fresh_ms)]:
            del self._entries[key]
