"""What a store tells its listeners: appends, writes, and which topics became readable.

Rules:

* Append listeners hear ``(topic, queue id, next queue offset)`` after a queue's entries are
  written, if consumers can read any of them now: a put of user topics wholly past the read
  limit is heard by the visibility listeners when the limit rises over it (a receive woken before
  then looked, found nothing and waited again: a wasted look per group per put on a
  replicated master).  Write listeners hear the commit log's write offset after every
  write, before it is flushed.  A listener's exception is logged and never fails a put.
* With replication a read limit (the confirm offset) caps what consumers see of user topics.
  A rise of it tells the visibility listeners *which topics* it made readable
  (:class:`NewlyVisible`), so a long poll waiting on another topic sleeps on: every rise
  woke every receive waiting in the broker, and each looked again (about 40 us of the loop
  each), so the master's loop spent ``waiting receives x batches replicated`` on nothing.
  Lifting the limit, more records past it than the table keeps, or records hidden when the
  limit was set or lowered below them, name every topic (None).
* Mixed into MessageStore, which owns the state it reads (``_read_limit``, ``_indexed_offset``
  and the listener lists, made by :meth:`Notifications._init_notifications`).
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Callable, Iterable, Sequence

from metadata.names import SYSTEM_TOPIC_PREFIX
from store.cq_entry import ENTRY

log = logging.getLogger(__name__)

VisibilityListener = Callable[[frozenset[str] | None], None]  # topics made readable; None: every topic


class NewlyVisible:
    """The user topics written past the read limit, each with where the put that wrote it
    ends, in log order; :meth:`rose` names those a new limit covers.  At most ``max_entries``
    are kept (a put each: the ones past the confirm offset, a few dozen under load); past that
    every topic is named until the limit passes the last record written meanwhile.  (Keeping
    one entry for a topic's consecutive puts, at its last end, missed a rise that covered the
    first put only: the model test found it.)"""

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._ends: deque[tuple[int, str]] = deque()  # (end offset, topic), ends increasing
        self._everything_until: int | None = None  # overflowed: every topic, up to here

    def __len__(self) -> int:
        return len(self._ends)

    def written(self, topics: Iterable[str], end_offset: int, limit: int | None) -> None:
        """A put wrote ``topics``, its records ending at ``end_offset``; ``limit``: the read limit."""
        if limit is None or end_offset <= limit:
            return
        ends = self._ends
        for topic in topics:
            if topic.startswith(SYSTEM_TOPIC_PREFIX):
                continue  # never capped: their appends wake their waiters
            if ends and ends[-1] == (end_offset, topic):
                continue  # another queue of the same topic in the same put
            if self._everything_until is not None or len(ends) >= self.max_entries:
                self._everything_until = max(self._everything_until or 0, end_offset)
            else:
                ends.append((end_offset, topic))

    def hidden(self, end_offset: int) -> None:
        """The limit was set or lowered below records that were readable, up to ``end_offset``:
        their topics are not in the table, so every topic is named until the limit passes them."""
        self._everything_until = max(self._everything_until or 0, end_offset)

    def rose(self, limit: int | None) -> frozenset[str] | None:
        """The topics whose records a read limit raised to ``limit`` made readable (None: lifted,
        or too many to name: every topic)."""
        ends = self._ends
        if limit is None:
            ends.clear()
            self._everything_until = None
            return None
        topics = set()
        while ends and ends[0][0] <= limit:
            topics.add(ends.popleft()[1])
        if self._everything_until is not None:
            if limit >= self._everything_until:
                self._everything_until = None
            return None
        return frozenset(topics)


class Notifications:
    """The listener half of MessageStore."""

    _read_limit: int | None
    _indexed_offset: int

    def _init_notifications(self) -> None:
        self._listeners: list[Callable[[str, int, int], None]] = []
        self._write_listeners: list[Callable[[int], None]] = []
        self._visibility_listeners: list[VisibilityListener] = []
        self._newly_visible = NewlyVisible()
        # replication: consumers read no record ending beyond this offset (the confirm offset); None: all
        self._read_limit = None

    def add_append_listener(self, fn: Callable[[str, int, int], None]) -> None:
        self._listeners.append(fn)

    def add_write_listener(self, fn: Callable[[int], None]) -> None:
        """``fn(write_offset)`` after every write to the commit log, before it is flushed."""
        self._write_listeners.append(fn)

    def remove_write_listener(self, fn: Callable[[int], None]) -> None:
        if fn in self._write_listeners:
            self._write_listeners.remove(fn)

    def add_visibility_listener(self, fn: VisibilityListener) -> None:
        """``fn(topics)`` when a rise of the read limit made records of ``topics`` readable
        (None: every topic may have more)."""
        self._visibility_listeners.append(fn)

    @property
    def read_limit(self) -> int | None:
        return self._read_limit

    def set_read_limit(self, offset: int | None) -> None:
        """Replication: consumers read no record of a user topic ending beyond ``offset`` (the
        confirm offset); None lifts the limit (a master alone in its SyncStateSet, no replication).
        Raising or lifting it tells the visibility listeners (long polls wait on them)."""
        before, self._read_limit = self._read_limit, offset
        if offset is not None and (before is None or offset < before) and offset < self._indexed_offset:
            self._newly_visible.hidden(self._indexed_offset)
        if before is None or (offset is not None and offset <= before):
            return
        topics = self._newly_visible.rose(offset)
        if topics is not None and not topics:
            return
        for listener in self._visibility_listeners:
            try:
                listener(topics)
            except Exception:  # a listener's bug must not fail replication
                log.exception("visibility listener failed")

    def _notify_indexed(self, ends: list[tuple[str, int, int]], end_offset: int,
                        runs: Sequence[tuple[str, int, int, bytes]]) -> None:
        """Queues' entries were written up to ``ends`` (topic, queue id, next queue offset) for
        records ending at ``end_offset``; ``runs``: the entries (store.held_entries)."""
        limit = self._read_limit
        # none of the put readable yet: even its first record ends past the limit
        hidden = limit is not None and _first_end(runs, end_offset) > limit
        if limit is not None and end_offset > limit:
            self._newly_visible.written((topic for topic, _, _ in ends), end_offset, limit)
        for topic, queue_id, end in ends:
            if hidden and not topic.startswith(SYSTEM_TOPIC_PREFIX):
                continue  # readable once the limit rises over it: the visibility listeners hear it then
            for listener in self._listeners:
                try:
                    listener(topic, queue_id, end)
                except Exception:  # a listener's bug must not fail a put
                    log.exception("append listener failed")

    def _notify_written(self, write_offset: int) -> None:
        for listener in self._write_listeners:
            try:
                listener(write_offset)
            except Exception:  # a listener's bug must not fail a put
                log.exception("write listener failed")


def _first_end(runs: Sequence[tuple[str, int, int, bytes]], end_offset: int) -> int:
    """Where the first record of a put's ``runs`` ends (``end_offset`` if only holes say)."""
    first = end_offset
    for _, _, _, entries in runs:
        commit_offset, size, _ = ENTRY.unpack_from(entries)
        if size > 0:
            first = min(first, commit_offset + size)
    return first
