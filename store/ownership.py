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
* The files: one per epoch, written only by its owner (:class:`Claim`: it began; once sealed,
  where it starts and which epoch it sealed at what end), text with a CRC line
  (:func:`encode_claim`, :func:`decode_claim`; a bad file is a :class:`LedgerError` naming
  the file and line).  :func:`assemble` makes the ledger from the claims; of two epochs that
  sealed the same predecessor (two takeovers racing) the newer wins.
* Pure: bytes and values in, values out.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

DIRECTORY = "ownership"
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


def queue_layers(ledger: Ledger, splits: dict[int, int]) -> tuple[tuple[int, int], ...]:
    """The file layers of one consume queue, oldest first: (epoch, first queue offset read
    from that epoch's files).  ``splits``: each takeover epoch -> the queue's max offset when
    that epoch took over (absent: the queue did not exist then, so whatever older files it
    has were made by a fenced owner afterwards, and the queue starts again in that epoch)."""
    layers: list[tuple[int, int]] = [(0, 0)]
    for entry in ledger.entries[1:]:
        if entry.start is None:
            continue  # a takeover that never sealed, or lost a race: it made nothing that counts
        split = splits.get(entry.epoch)
        layers = layers + [(entry.epoch, split)] if split is not None else [(entry.epoch, 0)]
    return tuple(layers)


# --- the files ------------------------------------------------------------------------------------
# One file per epoch, ``ownership/<epoch, 20 digits>``, written only by that epoch's owner:
# created when it begins (O_EXCL: two takeovers of one epoch cannot both succeed), replaced
# (temp file, rename) when it seals.  Two takeovers racing never overwrite each other's
# claims, as two writers of one ledger file would (a seal rename could drop a newer begin).

@dataclass(frozen=True)
class Claim:
    """What one epoch's owner wrote: it began, and (once it sealed) where it starts and which
    epoch it sealed at what end."""
    epoch: int
    owner: str
    start: int | None = None
    sealed: int | None = None       # the epoch it sealed
    sealed_end: int | None = None


def claim_of(ledger: Ledger, epoch: int) -> Claim:
    """The claim the owner of ``epoch`` writes for the ledger it just decided."""
    entry = next(e for e in ledger.entries if e.epoch == epoch)
    if entry.start is None:
        return Claim(epoch, entry.owner)
    before = [e for e in ledger.entries if e.epoch < epoch and e.start is not None]
    sealed = before[-1] if before else None
    return Claim(epoch, entry.owner, entry.start, sealed.epoch if sealed else None,
                 sealed.end if sealed else None)


def assemble(claims: list[Claim]) -> Ledger:
    """The ledger the claims make, oldest first.  Two epochs that sealed the same predecessor
    raced: the newer wins and the older owns nothing (it could never acknowledge: the newer
    one had begun before its seal was read back, store.ownership's first rule)."""
    entries = {0: Ownership(0, "", 0, None)}
    for claim in sorted(claims, key=lambda c: c.epoch):
        if claim.epoch in entries:
            raise LedgerError(f"epoch {claim.epoch} claimed twice")
        entries[claim.epoch] = Ownership(claim.epoch, claim.owner, None, None)
    winners: dict[int, Claim] = {}
    for claim in sorted(claims, key=lambda c: c.epoch):
        if claim.start is not None:
            if claim.sealed is None or claim.sealed not in entries or claim.sealed_end is None:
                raise LedgerError(f"epoch {claim.epoch} started without sealing a known epoch")
            winners[claim.sealed] = claim  # a newer claim on the same predecessor replaces an older
    for sealed, claim in winners.items():
        entries[sealed] = replace(entries[sealed], end=claim.sealed_end)
        entries[claim.epoch] = replace(entries[claim.epoch], start=claim.start)
    ledger = Ledger(tuple(entries[e] for e in sorted(entries)))
    _check_order(ledger.entries, "ownership")
    return ledger


def encode_claim(claim: Claim) -> bytes:
    line = " ".join((str(claim.epoch), claim.owner, _text(claim.start), _text(claim.sealed), _text(claim.sealed_end)))
    body = (line + "\n").encode("utf-8")
    return f"{zlib.crc32(body)}\n".encode("ascii") + body


def decode_claim(data: bytes, where: str) -> Claim:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LedgerError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    lines = text.split("\n")
    if len(lines) != 3 or lines[2] != "":
        raise LedgerError(f"{where}: expected a CRC line and one claim line")
    crc = _int(lines[0], where, 1, "CRC")
    if zlib.crc32((lines[1] + "\n").encode("utf-8")) != crc:
        raise LedgerError(f"{where}: line 1: CRC does not match the claim (a torn or edited file)")
    fields = lines[1].split(" ")
    if len(fields) != 5:
        raise LedgerError(f"{where}: line 2: expected 'epoch owner start sealed sealedEnd', got {lines[1][:80]!r}")
    epoch = _int(fields[0], where, 2, "epoch")
    if epoch == 0 or not fields[1] or fields[1] == _NONE:
        raise LedgerError(f"{where}: line 2: epoch 0 is never claimed, and an owner is an address")
    start, sealed, end = (None if f == _NONE else _int(f, where, 2, name)
                          for f, name in zip(fields[2:], ("start", "sealed", "sealedEnd")))
    if (start is None) != (sealed is None) or (sealed is None) != (end is None):
        raise LedgerError(f"{where}: line 2: start, sealed and sealedEnd are given together or not at all")
    return Claim(epoch, fields[1], start, sealed, end)


def _text(value: int | None) -> str:
    return _NONE if value is None else str(value)


def _int(text: str, where: str, line: int, what: str) -> int:
    if not text.isdigit():
        raise LedgerError(f"{where}: line {line}: {what} {text[:40]!r} is not a non-negative integer")
    return int(text)


def _check_order(entries: tuple[Ownership, ...], where: str) -> None:
    previous_end = 0
    for index, entry in enumerate(entries):
        if entry.start is None:  # a takeover not sealed yet (the newest), or one that lost a race: owns nothing
            continue
        if entry.start < previous_end:
            raise LedgerError(f"{where}: epoch {entry.epoch} starts at {entry.start}, before the previous end {previous_end}")
        if entry.end is not None:
            if entry.end < entry.start:
                raise LedgerError(f"{where}: epoch {entry.epoch} ends at {entry.end}, before its start {entry.start}")
            previous_end = entry.end
        elif any(later.start is not None for later in entries[index + 1:]):
            raise LedgerError(f"{where}: epoch {entry.epoch} is not sealed but a later epoch started")
        else:
            previous_end = entry.start
