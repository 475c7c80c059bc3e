"""The ownership ledger of a broker store on shared storage: which owner's bytes count, and
whether an owner may still acknowledge (issue 26; docs/reassign.md, "Fencing").

Rules:

* The ledger lists every ownership epoch, oldest first: its number, its owner (the container's
  internal address), the commit-log offset its bytes start at and, once sealed, where they
  end.  A store with no ledger file was owned by one process since it was created: one open
  epoch 0 from offset 0, its segment files named by start offset alone.
* Taking over is two writes.  :func:`begin_takeover` appends the new epoch with no start:
  from then on :func:`may_acknowledge` is False for every older epoch, so a woken old owner,
  which reads the ledger after writing and before acknowledging, acknowledges nothing more.
  :func:`seal` then closes the epoch that owned bytes last at the end the new owner's scan
  found, and starts the new epoch at the next segment boundary (the rest of the old segment
  is a hole, as a BLANK record would make it).  A takeover interrupted between the two writes
  leaves an epoch that owns nothing; the next takeover seals the last epoch that did.
* Bytes count by the ledger (:func:`plan`): for each segment, only the file of the epoch whose
  range covers it, and only within that range.  A file of another epoch, or of the right
  epoch past its sealed end, is what a fenced owner wrote after the fact: never read.
* The file (:func:`encode`, :func:`decode`): text, one epoch per line
  ``epoch owner start end`` (``-`` for none), after a count and a CRC32 line; a bad file is a
  :class:`LedgerError` naming the line.
* Pure: bytes and values in, values out.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

FILE_NAME = "ownership"
_NONE = "-"


class LedgerError(ValueError):
    """An unreadable or inconsistent ledger; the message names the line and what is wrong."""


@dataclass(frozen=True)
class Ownership:
    epoch: int
    owner: str            # the owning container's internal address ("" for epoch 0)
    start: int | None     # None: a takeover that has not sealed its predecessor yet
    end: int | None       # None: not sealed (the newest owner that started)


@dataclass(frozen=True)
class Ledger:
    entries: tuple[Ownership, ...]

    @staticmethod
    def fresh() -> "Ledger":
        return Ledger((Ownership(0, "", 0, None),))

    @property
    def newest(self) -> Ownership:
        return self.entries[-1]

    def owning(self) -> Ownership:
        """The newest epoch that owns bytes (has a start)."""
        return next(entry for entry in reversed(self.entries) if entry.start is not None)


def may_acknowledge(own_epoch: int, ledger: Ledger) -> bool:
    """An owner acknowledges a write only while the ledger it read after writing names no newer epoch."""
    newest = ledger.newest
    return newest.epoch == own_epoch and newest.start is not None


def begin_takeover(ledger: Ledger, epoch: int, owner: str) -> Ledger:
    """The first write of a takeover: ``epoch`` is newest, owning nothing yet."""
    if epoch <= ledger.newest.epoch:
        raise LedgerError(f"epoch {epoch} is not newer than the ledger's {ledger.newest.epoch}")
    if not owner or owner == _NONE or any(c.isspace() for c in owner):
        raise LedgerError(f"owner {owner!r} must be a non-empty address without spaces")
    return Ledger(ledger.entries + (Ownership(epoch, owner, None, None),))


def seal(ledger: Ledger, scanned_end: int, segment_size: int) -> Ledger:
    """The second write: the last owning epoch ends at ``scanned_end`` (where the new owner's
    scan found its last valid record), the newest starts at the next segment boundary."""
    newest, owning = ledger.newest, ledger.owning()
    if newest.start is not None:
        raise LedgerError(f"epoch {newest.epoch} already started at {newest.start}")
    if scanned_end < owning.start:
        raise LedgerError(f"scanned end {scanned_end} is below epoch {owning.epoch}'s start {owning.start}")
    start = -(-scanned_end // segment_size) * segment_size
    entries = tuple(replace(entry, end=scanned_end) if entry is owning
                    else replace(entry, start=start) if entry is newest else entry
                    for entry in ledger.entries)
    return Ledger(entries)


def owner_of(ledger: Ledger, offset: int) -> int | None:
    """The epoch whose bytes ``offset`` is in; None for a hole or below every start."""
    for entry in reversed(ledger.entries):
        if entry.start is None or offset < entry.start:
            continue
        return entry.epoch if entry.end is None or offset < entry.end else None
    return None


@dataclass(frozen=True)
class SegmentRead:
    """Read the file of ``epoch`` for the segment at ``segment_start``, bytes [low, high)
    (``high`` None: to the end of the data, the open epoch)."""
    segment_start: int
    epoch: int
    low: int
    high: int | None


@dataclass(frozen=True)
class Plan:
    reads: tuple[SegmentRead, ...]
    ignored: tuple[tuple[int, int], ...]   # (segment start, epoch) files no range counts: a fenced owner's


def plan(ledger: Ledger, files: frozenset[tuple[int, int]], segment_size: int) -> Plan:
    """Which bytes of which segment files count, from the files present ((start, epoch) each)."""
    reads, used = [], set()
    for entry in ledger.entries:
        if entry.start is None or entry.end == entry.start:
            continue
        for start, epoch in sorted(files):
            if epoch != entry.epoch or start + segment_size <= entry.start:
                continue
            if entry.end is not None and start >= entry.end:
                continue
            high = None if entry.end is None else min(entry.end, start + segment_size)
            reads.append(SegmentRead(start, epoch, max(start, entry.start), high))
            used.add((start, epoch))
    return Plan(tuple(reads), tuple(sorted(files - used)))


# --- the file -------------------------------------------------------------------------------------
def encode(ledger: Ledger) -> bytes:
    lines = "".join(f"{e.epoch} {e.owner or _NONE} {_text(e.start)} {_text(e.end)}\n" for e in ledger.entries)
    body = lines.encode("utf-8")
    return f"{len(ledger.entries)}\n{zlib.crc32(body)}\n".encode("ascii") + body


def decode(data: bytes, where: str = FILE_NAME) -> Ledger:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LedgerError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    lines = text.split("\n")
    if len(lines) < 3 or lines[-1] != "":
        raise LedgerError(f"{where}: truncated (expected a count line, a CRC line and entry lines)")
    count, crc, entries = _int(lines[0], where, 1, "count"), _int(lines[1], where, 2, "CRC"), lines[2:-1]
    if count != len(entries) or count == 0:
        raise LedgerError(f"{where}: line 1 says {count} entries, the file has {len(entries)}")
    if zlib.crc32("".join(line + "\n" for line in entries).encode("utf-8")) != crc:
        raise LedgerError(f"{where}: line 2: CRC does not match the entries (a torn or edited file)")
    parsed = tuple(_entry(line, where, number) for number, line in enumerate(entries, start=3))
    _check_order(parsed, where)
    return Ledger(parsed)


def _text(value: int | None) -> str:
    return _NONE if value is None else str(value)


def _int(text: str, where: str, line: int, what: str) -> int:
    if not text.isdigit():
        raise LedgerError(f"{where}: line {line}: {what} {text[:40]!r} is not a non-negative integer")
    return int(text)


def _entry(line: str, where: str, number: int) -> Ownership:
    fields = line.split(" ")
    if len(fields) != 4:
        raise LedgerError(f"{where}: line {number}: expected 'epoch owner start end', got {line[:80]!r}")
    epoch = _int(fields[0], where, number, "epoch")
    start = None if fields[2] == _NONE else _int(fields[2], where, number, "start")
    end = None if fields[3] == _NONE else _int(fields[3], where, number, "end")
    return Ownership(epoch, "" if fields[1] == _NONE else fields[1], start, end)


def _check_order(entries: tuple[Ownership, ...], where: str) -> None:
    previous_end = 0
    for index, entry in enumerate(entries):
        line = index + 3
        if index and entry.epoch <= entries[index - 1].epoch:
            raise LedgerError(f"{where}: line {line}: epoch {entry.epoch} is not newer than the one before")
        if entry.start is None:  # a takeover not sealed yet (the newest), or interrupted: owns nothing
            if entry.end is not None:
                raise LedgerError(f"{where}: line {line}: an epoch with no start cannot have an end")
            continue
        if entry.start < previous_end:
            raise LedgerError(f"{where}: line {line}: starts at {entry.start}, before the previous end {previous_end}")
        if entry.end is not None:
            if entry.end < entry.start:
                raise LedgerError(f"{where}: line {line}: ends at {entry.end}, before its start {entry.start}")
            previous_end = entry.end
        elif any(later.start is not None for later in entries[index + 1:]):
            raise LedgerError(f"{where}: line {line}: epoch {entry.epoch} is not sealed but a later epoch started")
        else:
            previous_end = entry.start
