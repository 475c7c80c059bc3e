"""``Overlay``: a mapping that reads through to a base mapping and keeps its own changes.

Rules:
- Reads see the overlay's own writes and deletions first, then the base.  Writes never
  touch the base.  Creating one costs O(1), whatever the size of the base, which is what
  lets a leader decide a batch of commands against "the tables plus this batch" without
  copying hundreds of thousands of broker sets per batch.
- The base must not change while an overlay over it is in use: an overlay is a scratch
  view for one synchronous decision, never something kept across an ``await``.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Overlay(MutableMapping[K, V]):
    def __init__(self, base: Mapping[K, V]) -> None:
        self._base = base
        self._changes: dict[K, V] = {}
        self._removed: set[K] = set()

    def __getitem__(self, key: K) -> V:
        if key in self._changes:
            return self._changes[key]
        if key in self._removed:
            raise KeyError(key)
        return self._base[key]

    def __contains__(self, key: object) -> bool:
        if key in self._changes:
            return True
        return key not in self._removed and key in self._base

    def __setitem__(self, key: K, value: V) -> None:
        self._changes[key] = value
        self._removed.discard(key)

    def __delitem__(self, key: K) -> None:
        if key not in self:
            raise KeyError(key)
        self._changes.pop(key, None)
        if key in self._base:
            self._removed.add(key)

    def __iter__(self) -> Iterator[K]:
        for key in self._base:
            if key not in self._removed and key not in self._changes:
                yield key
        yield from self._changes

    def __len__(self) -> int:
        # a removed key is in the base and not among the changes (set/del keep it so)
        return len(self._base) - len(self._removed) + sum(1 for key in self._changes if key not in self._base)
