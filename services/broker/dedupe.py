"""Send de-duplication: a bounded memory of recently answered message ids.

Rules: the official clients retry a failed send immediately with the same message id; a
message id answered within ``window_ms`` gets the same outcome again instead of a second
copy.  Pure: now_ms is an input.

Bounds: ids are kept in two generations, young and old, of at most ``max_entries / 2`` each
(plus one put's ids).  When the young one is full, or older than the window, it becomes the
old one and the old one is dropped whole.  An id is answered while its generation is at most
two windows old: so it is kept for at least the window unless ``max_entries / 2`` newer ones
came after it, and never past two windows.  Why generations rather than an LRU: evicting one
entry per message sent from an OrderedDict, in Python, and moving each to its end was about
4% of a batched send's CPU (bench/profile_broker.py); dropping a generation is one C call.

Why per topic, id -> outcome, with the time kept per generation: the memory holds up to
100k ids, and what each costs is memory the next sends miss in the cache, not Python.  A
(topic, id) key tuple and a (time, outcome) tuple per id, besides the outcome, made the memory
cost a single send 5-6 us and a batched message 1.2-1.4 us of the 10 of its Python
(``bench/send_path.py`` with ``sendDedupeMaxEntries`` 0 against the default); per topic, the
id string the message already has is the key and the outcome the value.
"""
from __future__ import annotations

from typing import Generic, Iterable, Sequence, TypeVar

T = TypeVar("T")
_NONE: dict = {}


class SendDedupe(Generic[T]):
    def __init__(self, window_ms: int, max_entries: int):
        self.window_ms = window_ms
        self.max_entries = max_entries
        self._generation_size = max(1, max_entries // 2)
        self._young: dict[str, dict[str, T]] = {}  # topic -> message id -> outcome
        self._old: dict[str, dict[str, T]] = {}
        self._young_count = 0  # ids put into the young generation (a repeated id counts again)
        self._young_since_ms: int | None = None  # when the young generation got its first id
        self._old_since_ms: int | None = None

    def lookup(self, topic: str, message_id: str, now_ms: int) -> T | None:
        if not message_id:
            return None
        found = self._young.get(topic, _NONE).get(message_id)
        if found is not None:
            return found if now_ms - self._young_since_ms <= 2 * self.window_ms else None
        found = self._old.get(topic, _NONE).get(message_id)
        if found is not None and now_ms - self._old_since_ms <= 2 * self.window_ms:
            return found
        return None

    def knows(self, topic: str, message_id: str) -> bool:
        """:meth:`knows_none` of one id, negated."""
        return message_id in self._young.get(topic, _NONE) or message_id in self._old.get(topic, _NONE)

    def knows_none(self, topic: str, message_ids: Iterable[str]) -> bool:
        """No id of ``message_ids`` sent to ``topic`` is kept, expired or not (C set tests)."""
        return (self._young.get(topic, _NONE).keys().isdisjoint(message_ids)
                and self._old.get(topic, _NONE).keys().isdisjoint(message_ids))

    def __len__(self) -> int:
        return sum(map(len, self._young.values())) + sum(map(len, self._old.values()))

    def clear(self) -> None:
        self._young, self._old, self._young_count = {}, {}, 0
        self._young_since_ms = self._old_since_ms = None

    def remember(self, topic: str, message_id: str, outcome: T, now_ms: int) -> None:
        self.remember_many(topic, (message_id,), (outcome,), now_ms)

    def remember_many(self, topic: str, message_ids: Sequence[str], outcomes: Iterable[T], now_ms: int) -> None:
        """:meth:`remember` each id sent to ``topic`` with its outcome (an empty id is not
        kept); the young generation turns old once full or older than the window."""
        if self.max_entries == 0 or self.window_ms == 0:
            return
        if self._young_since_ms is None:
            self._young_since_ms = now_ms
        elif now_ms - self._young_since_ms > self.window_ms or self._young_count >= self._generation_size:
            self._old, self._old_since_ms = self._young, self._young_since_ms
            self._young, self._young_since_ms, self._young_count = {}, now_ms, 0
        bucket = self._young.get(topic)
        if bucket is None:
            bucket = self._young[topic] = {}
        if all(message_ids):
            bucket.update(zip(message_ids, outcomes))  # in C
        else:
            for message_id, outcome in zip(message_ids, outcomes):
                if message_id:
                    bucket[message_id] = outcome
        self._young_count += len(message_ids)
