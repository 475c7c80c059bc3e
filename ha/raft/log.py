"""RaftLog: the in-memory view of one node's log, snapshot offset and commit/apply marks.

Rules:
- Indexes start at 1; index 0 with term 0 is the empty log's sentinel.
- The log is `entries` after a snapshot offset (`snapshot_index`, `snapshot_term`).
- `stable_index` is the last index known durable; entries above it are handed to
  the driver in the next Ready and become stable in advance().
- A committed entry is never truncated (asserted: it would be a bug, never peer input).
- applied <= commit <= last_index always holds.
"""

from __future__ import annotations

from ha.raft.types import Entry, Snapshot


class RaftLog:
    def __init__(self, snapshot: Snapshot | None, entries: tuple[Entry, ...], commit: int) -> None:
        self.snapshot: Snapshot | None = snapshot
        self.snapshot_index = snapshot.index if snapshot else 0
        self.snapshot_term = snapshot.term if snapshot else 0
        self.entries: list[Entry] = [e for e in entries if e.index > self.snapshot_index]
        for offset, entry in enumerate(self.entries):
            assert entry.index == self.snapshot_index + 1 + offset, "recovered log is not contiguous"
        self.stable_index = self.last_index
        self.commit = max(min(commit, self.last_index), self.snapshot_index)
        self.applied = self.snapshot_index
        self.pending_snapshot: Snapshot | None = None  # received from a leader, not yet persisted

    @property
    def first_index(self) -> int:
        return self.snapshot_index + 1

    @property
    def last_index(self) -> int:
        return self.entries[-1].index if self.entries else self.snapshot_index

    @property
    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.snapshot_term

    def term(self, index: int) -> int | None:
        """Term of the entry at index, or None when compacted away or beyond the end."""
        if index == self.snapshot_index:
            return self.snapshot_term
        if index < self.snapshot_index or index > self.last_index:
            return None
        return self.entries[index - self.snapshot_index - 1].term

    def matches(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft's voting rule: the candidate's ledger end is at least as new as ours."""
        return last_term > self.last_term or (
            last_term == self.last_term and last_index >= self.last_index)

    def slice(self, low: int, high: int, limit: int) -> tuple[Entry, ...]:
        """Entries with low <= index <= high, at most `limit` of them."""
        assert low > self.snapshot_index, "slice below the snapshot"
        high = min(high, self.last_index, low + limit - 1)
        if high < low:
            return ()
        base = self.snapshot_index + 1
        return tuple(self.entries[low - base: high - base + 1])

    def append(self, entries: tuple[Entry, ...]) -> None:
        """Append, truncating a conflicting suffix from entries[0].index."""
        if not entries:
            return
        first = entries[0].index
        assert first > self.commit, f"truncating committed entry {first} <= {self.commit}"
        assert first <= self.last_index + 1, "gap in the log"
        del self.entries[first - self.snapshot_index - 1:]
        self.entries.extend(entries)
        self.stable_index = min(self.stable_index, first - 1)

    def maybe_append(self, prev_index: int, prev_term: int, commit: int,
                     entries: tuple[Entry, ...]) -> int | None:
        """A leader's append: returns the last new index, or None when prev does not match."""
        if not self.matches(prev_index, prev_term):
            return None
        last_new = prev_index + len(entries)
        for entry in entries:
            if entry.index <= self.snapshot_index:
                continue
            existing = self.term(entry.index)
            if existing != entry.term:
                self.append(tuple(e for e in entries if e.index >= entry.index))
                break
        self.commit_to(min(commit, last_new))
        return last_new

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """Largest (i, term(i)) with i <= index and term(i) <= term; the log-repair hint."""
        index = min(index, self.last_index)
        while index > self.snapshot_index:
            entry_term = self.term(index)
            assert entry_term is not None
            if entry_term <= term:
                return index, entry_term
            index -= 1
        return self.snapshot_index, self.snapshot_term

    def commit_to(self, index: int) -> bool:
        index = min(index, self.last_index)
        if index <= self.commit:
            return False
        self.commit = index
        return True

    def next_committed(self, limit: int) -> tuple[Entry, ...]:
        """Committed, not yet applied entries, waiting for a pending snapshot first."""
        if self.pending_snapshot is not None or self.commit <= self.applied:
            return ()
        return self.slice(self.applied + 1, self.commit, limit)

    def unstable(self) -> tuple[Entry, ...]:
        if self.last_index <= self.stable_index:
            return ()
        return self.slice(max(self.stable_index + 1, self.first_index), self.last_index,
                          len(self.entries))

    def stable_to(self, index: int, term: int) -> None:
        if self.matches(index, term) and index > self.stable_index:
            self.stable_index = index

    def applied_to(self, index: int) -> None:
        assert self.applied <= index <= self.commit, (self.applied, index, self.commit)
        self.applied = index

    def restore(self, snapshot: Snapshot) -> None:
        """Replace the whole log with a leader's snapshot (the log did not match it)."""
        self.snapshot = snapshot
        self.snapshot_index, self.snapshot_term = snapshot.index, snapshot.term
        self.entries = []
        self.stable_index = snapshot.index
        self.commit = snapshot.index
        self.pending_snapshot = snapshot

    def snapshot_applied(self, snapshot: Snapshot) -> None:
        if self.pending_snapshot == snapshot:
            self.pending_snapshot = None
        self.applied = max(self.applied, snapshot.index)

    def compact(self, snapshot: Snapshot) -> None:
        """Drop entries up to snapshot.index (applied state), keeping the rest."""
        assert snapshot.index <= self.applied, "compacting beyond applied"
        if snapshot.index <= self.snapshot_index:
            return
        assert self.term(snapshot.index) == snapshot.term
        del self.entries[: snapshot.index - self.snapshot_index]
        self.snapshot = snapshot
        self.snapshot_index, self.snapshot_term = snapshot.index, snapshot.term
