"""Send de-duplication: a bounded memory of recently answered message ids.

Rules: the official clients retry a failed send immediately with the same message id; a
message id answered within ``window_ms`` gets the same outcome again instead of a second
copy.  Pure: now_ms is an input.

Bounds: ids are kept in two generations, young and old, of at most ``max_entries / 2`` each
(plus one put's ids).  When the young one is full, or older than the window, it becomes the
old one and the old one is dropped whole.  So at most ``max_entries`` ids (and one put's) are
kept, an id is kept for at least the window unless ``max_entries / 2`` newer ones came after
it, and nothing is kept past two windows.  Why generations rather than an LRU: evicting one
entry per message sent from an OrderedDict, in Python, and moving each to its end was about
4% of a batched send's CPU (bench/profile_broker.py); dropping a generation is one C call.
"""
from __future__ import annotations

from itertools import repeat
from operator import itemgetter
from typing import Generic, Sequence, TypeVar

T = TypeVar("T")
_message_id = itemgetter(1)  # of a (topic, message id) key


class SendDedupe(Generic[T]):
    def __init__(self, window_ms: int, max_entries: int):
        self.window_ms = window_ms
        self.max_entries = max_entries
        self._generation_size = max(1, max_entries // 2)
        self._young: dict[tuple[str, str], tuple[int, T]] = {}
        self._old: dict[tuple[str, str], tuple[int, T]] = {}
        self._young_since_ms: int | None = None  # when the young generation got its first id

    def lookup(self, topic: str, message_id: str, now_ms: int) -> T | None:
        if not message_id:
            return None
        key = (topic, message_id)
        found = self._young.get(key)
        if found is None:
            found = self._old.get(key)
        if found is None or now_ms - found[0] > self.window_ms:
            return None
        return found[1]

    def knows_none(self, keys: set[tuple[str, str]]) -> bool:
        """No (topic, message id) of ``keys`` is kept, expired or not (C set tests)."""
        return self._young.keys().isdisjoint(keys) and self._old.keys().isdisjoint(keys)

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def clear(self) -> None:
        self._young, self._old, self._young_since_ms = {}, {}, None

    def remember(self, topic: str, message_id: str, outcome: T, now_ms: int) -> None:
        self.remember_many([(topic, message_id)], [outcome], now_ms)

    def remember_many(self, keys: Sequence[tuple[str, str]], outcomes: Sequence[T], now_ms: int) -> None:
        """:meth:`remember` each (topic, message id) key with its outcome (keys without an id
        are not kept); the young generation turns old once full or older than the window."""
        if self.max_entries == 0 or self.window_ms == 0:
            return
        young = self._young
        if self._young_since_ms is None:
            self._young_since_ms = now_ms
        elif now_ms - self._young_since_ms > self.window_ms or len(young) >= self._generation_size:
            self._old, young = young, {}
            self._young, self._young_since_ms = young, now_ms
        if all(map(_message_id, keys)):
            young.update(zip(keys, zip(repeat(now_ms), outcomes)))  # in C
        else:
            for key, outcome in zip(keys, outcomes):
                if key[1]:
                    young[key] = (now_ms, outcome)
