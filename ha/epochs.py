"""Epoch history of one commit log and the consistent point between two of them (RIP-44).

An epoch is the controller's master epoch; its entry records the commit-log offset at which
that master started writing.  Rules:

* Entries are ordered by epoch *and* by start offset; epochs only grow, but may skip numbers
  (the controller bumps its epoch also when no master is elected).
* An entry's ``end_offset`` is the next entry's start; the last entry is open (``None``)
  until a caller closes it at its log's max offset with :meth:`EpochHistory.closed_at`.
* An epoch that holds no record (its start equals the next start) is superseded: appending
  a newer epoch at the same start offset replaces it, as upstream's
  ``truncateSuffixByOffset(max)`` + ``appendEntry`` does in ``changeToMaster``.
* :func:`find_consistent_point` walks the slave's epochs from the newest down; the first one
  the master has with the same start offset gives ``min(slave end, master end)``.  Both
  histories must be closed (each last end = that side's max offset).  ``None``: no match.
* A peer's bad entry is a returned :class:`EpochRejection`; calling :meth:`append` with one
  anyway is misuse (:class:`EpochError`).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable


class EpochRejection(str, Enum):
    EPOCH_NOT_NEWER = "EPOCH_NOT_NEWER"          # epoch <= the last epoch
    START_BEFORE_LAST = "START_BEFORE_LAST"      # start offset < the last entry's start
    NEGATIVE = "NEGATIVE"                        # epoch or offset below zero


class EpochError(ValueError):
    """An epoch history was asked to do something its rules forbid (a caller's bug)."""

    def __init__(self, reason: EpochRejection, detail: str):
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int
    end_offset: int | None = None  # exclusive; None: open (the last entry)

    def contains(self, offset: int) -> bool:
        return self.start_offset <= offset and (self.end_offset is None or offset < self.end_offset)


@dataclass(frozen=True)
class EpochHistory:
    entries: tuple[EpochEntry, ...] = ()

    def __post_init__(self) -> None:
        for before, after in zip(self.entries, self.entries[1:]):
            assert before.epoch < after.epoch, self.entries
            assert before.start_offset <= after.start_offset, self.entries
            assert before.end_offset == after.start_offset, self.entries

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[int, int]]) -> EpochHistory:
        """Build from ``(epoch, start_offset)`` pairs (the file's content), ends derived."""
        history = cls()
        for epoch, start in pairs:
            history = history.append(epoch, start)
        return history

    def pairs(self) -> tuple[tuple[int, int], ...]:
        return tuple((entry.epoch, entry.start_offset) for entry in self.entries)

    # --- queries -----------------------------------------------------------------------------
    @property
    def last(self) -> EpochEntry | None:
        return self.entries[-1] if self.entries else None

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def is_empty(self) -> bool:
        return not self.entries

    def entry_of(self, epoch: int) -> EpochEntry | None:
        for entry in self.entries:
            if entry.epoch == epoch:
                return entry
        return None

    def entry_for(self, offset: int) -> EpochEntry | None:
        """The entry whose [start, end) holds ``offset``, or None."""
        for entry in reversed(self.entries):
            if entry.contains(offset):
                return entry
        return None

    def next_after(self, epoch: int) -> EpochEntry | None:
        for entry in self.entries:
            if entry.epoch > epoch:
                return entry
        return None

    # --- transitions -------------------------------------------------------------------------
    def check_append(self, epoch: int, start_offset: int) -> EpochRejection | None:
        if epoch < 0 or start_offset < 0:
            return EpochRejection.NEGATIVE
        last = self.last
        if last is None:
            return None
        if epoch <= last.epoch:
            return EpochRejection.EPOCH_NOT_NEWER
        if start_offset < last.start_offset:
            return EpochRejection.START_BEFORE_LAST
        return None

    def append(self, epoch: int, start_offset: int) -> EpochHistory:
        """A new epoch starting at ``start_offset``; an empty last epoch at that start is replaced."""
        rejection = self.check_append(epoch, start_offset)
        if rejection is not None:
            raise EpochError(rejection, f"append <{epoch},{start_offset}> after {self.last}")
        kept = [e for e in self.entries if e.start_offset < start_offset]
        if kept:
            kept[-1] = EpochEntry(kept[-1].epoch, kept[-1].start_offset, start_offset)
        return EpochHistory(tuple(kept) + (EpochEntry(epoch, start_offset),))

    def truncate_suffix(self, offset: int) -> EpochHistory:
        """Drop entries starting at or after ``offset``; the new last entry is open again."""
        kept = [e for e in self.entries if e.start_offset < offset]
        if kept:
            kept[-1] = EpochEntry(kept[-1].epoch, kept[-1].start_offset, None)
        return EpochHistory(tuple(kept))

    def truncate_suffix_from_epoch(self, epoch: int) -> EpochHistory:
        """Drop entries with epoch >= ``epoch`` (upstream ``truncateSuffixByEpoch``)."""
        kept = [e for e in self.entries if e.epoch < epoch]
        if kept:
            kept[-1] = EpochEntry(kept[-1].epoch, kept[-1].start_offset, None)
        return EpochHistory(tuple(kept))

    def truncate_prefix(self, min_offset: int) -> EpochHistory:
        """Retention: drop entries that end at or before ``min_offset`` (the last entry stays)."""
        kept = tuple(e for e in self.entries if e.end_offset is None or e.end_offset > min_offset)
        return EpochHistory(kept)

    def within(self, min_offset: int, max_offset: int) -> EpochHistory:
        """Recovery: the history matching a log of [min_offset, max_offset) (open last entry).

        Entries starting beyond the log's end are dropped (an empty epoch at the end is kept),
        then those ending at or before its start.
        """
        kept = [e for e in self.entries if e.start_offset <= max_offset]
        if kept:
            kept[-1] = EpochEntry(kept[-1].epoch, kept[-1].start_offset, None)
        return EpochHistory(tuple(kept)).truncate_prefix(min_offset)

    def closed_at(self, max_offset: int) -> EpochHistory:
        """The same history with the last entry ending at ``max_offset`` (the log's end)."""
        if not self.entries:
            return self
        last = self.entries[-1]
        assert max_offset >= last.start_offset, (max_offset, last)
        return EpochHistory(self.entries[:-1] + (EpochEntry(last.epoch, last.start_offset, max_offset),))

    def opened(self) -> EpochHistory:
        if not self.entries or self.entries[-1].end_offset is None:
            return self
        last = self.entries[-1]
        return EpochHistory(self.entries[:-1] + (EpochEntry(last.epoch, last.start_offset, None),))


def find_consistent_point(master: EpochHistory, slave: EpochHistory) -> int | None:
    """Offset up to which the slave's log equals the master's, or None if no epoch matches.

    Both histories must be closed at their own max offsets (:meth:`EpochHistory.closed_at`).
    """
    for local in reversed(slave.entries):
        remote = master.entry_of(local.epoch)
        if remote is not None and remote.start_offset == local.start_offset:
            assert local.end_offset is not None and remote.end_offset is not None, "close both histories"
            return min(local.end_offset, remote.end_offset)
    return None
