"""Send de-duplication: a bounded LRU of recently answered message ids.

Rules: the official clients retry a failed send immediately with the same message id; a
message id answered within ``window_ms`` gets the same outcome again instead of a second
copy.  At most ``max_entries`` ids are kept (oldest dropped first).  Pure: now_ms is an input.
"""
from __future__ import annotations

from collections import OrderedDict
from itertools import repeat
from operator import itemgetter
from typing import Generic, Sequence, TypeVar

T = TypeVar("T")
_message_id = itemgetter(1)  # of a (topic, message id) key


class SendDedupe(Generic[T]):
    def __init__(self, window_ms: int, max_entries: int):
        self.window_ms = window_ms
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str], tuple[int, T]] = OrderedDict()

    def lookup(self, topic: str, message_id: str, now_ms: int) -> T | None:
        if not message_id:
            return None
        found = self._entries.get((topic, message_id))
        if found is None or now_ms - found[0] > self.window_ms:
            return None
        return found[1]

    def knows_none(self, keys: set[tuple[str, str]]) -> bool:
        """No (topic, message id) of ``keys`` is kept, expired or not (one C set test)."""
        return self._entries.keys().isdisjoint(keys)

    def clear(self) -> None:
        self._entries.clear()

    def remember(self, topic: str, message_id: str, outcome: T, now_ms: int) -> None:
        self.remember_many([(topic, message_id)], [outcome], now_ms)

    def remember_many(self, keys: Sequence[tuple[str, str]], outcomes: Sequence[T], now_ms: int) -> None:
        """:meth:`remember` each (topic, message id) key with its outcome, in order; one trim."""
        if self.max_entries == 0 or self.window_ms == 0:
            return
        entries = self._entries
        if entries.keys().isdisjoint(keys) and all(map(_message_id, keys)):
            entries.update(zip(keys, zip(repeat(now_ms), outcomes)))  # all new: added at the end, in C
        else:
            move_to_end = entries.move_to_end
            for key, outcome in zip(keys, outcomes):
                if key[1]:
                    entries[key] = (now_ms, outcome)
                    move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        while self._entries and now_ms - next(iter(self._entries.values()))[0] > self.window_ms:
            self._entries.popitem(last=False)
