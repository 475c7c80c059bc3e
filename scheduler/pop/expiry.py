"""In-flight entries by deadline, so the revive visits the expired ones, not every one.

Why: :meth:`scheduler.pop.table.PopTable.expired` walked every in-flight entry of every queue
on each ``reviveInterval`` (1 s) to find the few whose deadline had passed: 6.4 ms of the
event loop a second with 160,000 in flight (docs/performance.md), growing with the backlog
consumers hold, while every call waited.

Rules:

* A heap of ``(deadline_ms, n, key, entries)`` (``n`` a counter: ties never compare keys): one item per delivery (a receive's entries
  share one invisible duration, so one push per receive, not per message) and one per change
  of invisible duration.  FIFO entries are never listed: they are not revived.
* Lazy: an ack, a skip, a reset, a newer delivery or change of the same offset, or a dropped
  group leaves the item in the heap; an entry counts only while it is still the very object
  its queue holds in flight (``state.inflight[offset] is entry``).  A stale item is dropped
  when its deadline comes up.
* :meth:`due` returns the live expired entries, earliest deadline first, up to a limit, and
  keeps them listed: an entry the revive could not move (a full disk, an escape that failed)
  is found again on the next run, as it was by the walk.
* Acked entries whose deadline is far off (an invisible duration of hours) would pile up:
  when the heap outgrows twice the live entries it last held after a rebuild, and 4,096, it
  is rebuilt from the entries still in flight.  Each rebuild is O(in flight) and at least
  doubles the size of the next, so its cost per push stays constant.
"""
from __future__ import annotations

import heapq
import itertools
from operator import attrgetter
from typing import Callable, Iterator

from scheduler.pop.records import InFlight, QueueKey

REBUILD_FLOOR = 4096
_fifo, _deadline = attrgetter("fifo"), attrgetter("deadline_ms")

Item = tuple[int, int, QueueKey, tuple[InFlight, ...]]  # deadline_ms, n, key, entries


class ExpiryIndex:
    def __init__(self, live: Callable[[QueueKey, InFlight], bool],
                 every_entry: Callable[[], Iterator[tuple[QueueKey, InFlight]]]):
        """``live(key, entry)``: the entry is still in flight as that very object;
        ``every_entry()``: every (key, entry) in flight now (a rebuild walks it)."""
        self._live = live
        self._every_entry = every_entry
        self._heap: list[Item] = []
        self._n = itertools.count()
        self._rebuild_at = REBUILD_FLOOR

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, key: QueueKey, entries: tuple[InFlight, ...]) -> None:
        if any(map(_fifo, entries)):  # a receive's entries are all FIFO or none: C loops, not Python ones
            entries = tuple(entry for entry in entries if not entry.fifo)
        if not entries:
            return
        heapq.heappush(self._heap, (min(map(_deadline, entries)), next(self._n), key, entries))
        if len(self._heap) > self._rebuild_at:
            self.rebuild()

    def rebuild(self) -> None:
        """List again exactly the entries in flight: one item per run of a queue's entries that
        share a deadline (a receive's, as :meth:`add` listed them)."""
        heap: list[Item] = []
        n, run, run_key, run_deadline = self._n, [], None, None
        for key, entry in self._every_entry():
            if entry.fifo:
                continue
            if run and (key is not run_key or entry.deadline_ms != run_deadline):
                heap.append((run_deadline, next(n), run_key, tuple(run)))
                run = []
            run.append(entry)
            run_key, run_deadline = key, entry.deadline_ms
        if run:
            heap.append((run_deadline, next(n), run_key, tuple(run)))
        heapq.heapify(heap)
        self._heap = heap
        self._rebuild_at = max(REBUILD_FLOOR, 2 * len(heap))

    def due(self, now_ms: int, limit: int) -> list[tuple[QueueKey, InFlight]]:
        """Live entries whose deadline is at or before ``now_ms``, earliest first, at most ``limit``;
        they stay listed."""
        heap, found, keep = self._heap, [], []
        while heap and heap[0][0] <= now_ms and len(found) < limit:
            _, _, key, entries = heapq.heappop(heap)
            live = [e for e in entries if self._live(key, e)]
            later = tuple(e for e in live if e.deadline_ms > now_ms)
            if later:
                keep.append((min(e.deadline_ms for e in later), next(self._n), key, later))
            expired = tuple(e for e in live if e.deadline_ms <= now_ms)
            if expired:
                keep.append((min(e.deadline_ms for e in expired), next(self._n), key, expired))
                found.extend((key, e) for e in expired[:limit - len(found)])
        for item in keep:
            heapq.heappush(heap, item)
        return found
