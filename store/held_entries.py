"""Consume-queue entries a failed write left to write (a full disk, an I/O error).

Rules:

* A record whose bytes are in the commit log but whose consume-queue entry could not be
  written is *held*: the store keeps the entries, in log order, as runs per queue (topic,
  queue id, first queue offset, entries), writes them before anything newer once writes
  work again, and refuses new writes until then (DISK_FULL).
* Held entries are part of the store's index for everything but readers: the replication
  index ships them to slaves (found by bench/chaos.py: records copied while their entries
  were held reached the slave without entries, as if their topic had been deleted, and the
  slave's queue then refused the master's next entries), the next queue offset counts them,
  and a truncation cuts them as it cuts consume queues (an entry ending past the cut goes,
  and the holes after the last entry kept).
* A restart needs nothing from here: the checkpoint's consume-queue offset stays below the
  first held record, so recovery rewrites their entries from the log.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from store.config import CQ_ENTRY_SIZE
from store.cq_entry import ENTRY

Run = tuple[str, int, int, bytes]   # (topic, queue id, first queue offset, entries)

# one pending (written, not yet indexed) record: (end offset, topic, queue id, queue offset, CQ entry)
Pending = tuple[int, str, int, int, bytes]


def runs_of(pending: Sequence[Pending]) -> list[Run]:
    """Pending records' entries as one run per queue (concatenated, from its first queue offset)."""
    runs: dict[tuple[str, int], tuple[int, list[bytes]]] = {}
    for _, topic, queue_id, queue_offset, entry in pending:
        first, entries = runs.setdefault((topic, queue_id), (queue_offset, []))
        assert first + len(entries) == queue_offset, "queue offsets are consecutive"
        entries.append(entry)
    return [(topic, queue_id, first, b"".join(entries)) for (topic, queue_id), (first, entries) in runs.items()]


@dataclass(frozen=True)
class HeldWrite:
    runs: tuple[Run, ...]
    end_offset: int          # the commit-log end of the records they index


class HeldEntries:
    def __init__(self) -> None:
        self._writes: deque[HeldWrite] = deque()

    def __len__(self) -> int:
        return sum(len(entries) // CQ_ENTRY_SIZE for write in self._writes for _, _, _, entries in write.runs)

    def __bool__(self) -> bool:
        return bool(self._writes)

    def hold(self, runs: tuple[Run, ...], end_offset: int) -> None:
        self._writes.append(HeldWrite(runs, end_offset))

    def write_all(self, index_runs: Callable[[tuple[Run, ...], int], None]) -> None:
        """Write every held run, oldest first; what was written is no longer held (an OSError
        stops here and keeps the rest)."""
        while self._writes:
            write = self._writes[0]
            index_runs(write.runs, write.end_offset)
            self._writes.popleft()

    def entries(self) -> Iterator[tuple[int, str, int, int, bytes]]:
        """Each held entry as the store's pending list has it: (end, topic, queue id, queue offset, entry)."""
        for write in self._writes:
            for topic, queue_id, first, entries in write.runs:
                for index in range(len(entries) // CQ_ENTRY_SIZE):
                    entry = entries[index * CQ_ENTRY_SIZE:(index + 1) * CQ_ENTRY_SIZE]
                    yield write.end_offset, topic, queue_id, first + index, entry

    def queue_ends(self) -> dict[tuple[str, int], int]:
        """The queue offset after the last held entry, per queue."""
        ends: dict[tuple[str, int], int] = {}
        for write in self._writes:
            for topic, queue_id, first, entries in write.runs:
                key = (topic, queue_id)
                ends[key] = max(ends.get(key, 0), first + len(entries) // CQ_ENTRY_SIZE)
        return ends

    def cut_beyond(self, log_end: int) -> None:
        """The log was cut at ``log_end``: drop the entries of records ending past it."""
        kept: deque[HeldWrite] = deque()
        for write in self._writes:
            runs = tuple(run for run in (_cut_run(run, log_end) for run in write.runs) if run is not None)
            if runs:
                kept.append(HeldWrite(runs, min(write.end_offset, log_end)))
        self._writes = kept


def _cut_run(run: Run, log_end: int) -> Run | None:
    topic, queue_id, first, entries = run
    keep = 0
    for index in range(len(entries) // CQ_ENTRY_SIZE):
        commit_offset, size, _ = ENTRY.unpack_from(entries, index * CQ_ENTRY_SIZE)
        if size > 0 and commit_offset + size <= log_end:
            keep = index + 1
    return (topic, queue_id, first, entries[:keep * CQ_ENTRY_SIZE]) if keep else None
