"""The ownership claims of a broker store on shared storage, on disk (rules: store.ownership).

Rules:
- ``{storePathRootDir}/ownership/<epoch, 20 digits>``: one claim per epoch.  Beginning
  writes a temporary file, fsyncs it and links it to its name (``link`` fails when the name
  exists: two owners of one epoch cannot both begin), then fsyncs the directory.  Sealing
  replaces the owner's own claim (temporary file, fsync, rename, directory fsync).
  Temporary names carry the pid and a random part: two containers never share one.
- :func:`read_ledger` assembles the ledger from every claim (none: a store owned by one
  process since it was made, ``Ledger.fresh()``); a bad claim is a ``LedgerError`` naming it.
- :func:`check_shared_store` is what a move's target checks before the move commits
  (docs/reassign.md, "What the storage must guarantee"): it sees the store the source owns
  (the newest claim names the source), and its directory takes a durable atomic rename.
- :func:`newer_claim` is the acknowledgement check's one system call: is there a claim newer
  than the owner's epoch (a directory listing, no file read).
"""
from __future__ import annotations

import os
import secrets
import zlib
from pathlib import Path

from store.ownership import DIRECTORY, Claim, Ledger, LedgerError, assemble, decode_claim, encode_claim
from store.segmented_file import NAME_DIGITS, fsync_directory, make_directories


def claim_path(root: Path, epoch: int) -> Path:
    return Path(root) / DIRECTORY / f"{epoch:0{NAME_DIGITS}d}"


def _epochs(directory: Path) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(name) for name in names if len(name) == NAME_DIGITS and name.isdigit())


def read_ledger(root: Path) -> Ledger:
    directory = Path(root) / DIRECTORY
    claims = []
    for epoch in _epochs(directory):
        path = claim_path(root, epoch)
        claim = decode_claim(path.read_bytes(), str(path))
        if claim.epoch != epoch:
            raise LedgerError(f"{path}: holds the claim of epoch {claim.epoch}")
        claims.append(claim)
    return assemble(claims) if claims else Ledger.fresh()


def newer_claim(root: Path, own_epoch: int) -> bool:
    epochs = _epochs(Path(root) / DIRECTORY)
    return bool(epochs) and epochs[-1] > own_epoch


def _temporary(directory: Path, data: bytes) -> Path:
    path = directory / f".claim.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def write_begin(root: Path, claim: Claim) -> None:
    """Begin ``claim.epoch``; ``LedgerError`` when another owner began it first."""
    assert claim.start is None, claim
    directory = Path(root) / DIRECTORY
    make_directories(directory)
    temporary = _temporary(directory, encode_claim(claim))
    try:
        os.link(temporary, claim_path(root, claim.epoch))
    except FileExistsError:
        raise LedgerError(f"{claim_path(root, claim.epoch)}: epoch {claim.epoch} was begun by another owner") from None
    finally:
        os.unlink(temporary)
    fsync_directory(directory)


def write_seal(root: Path, claim: Claim) -> None:
    """Replace the owner's own claim with its sealed one."""
    assert claim.start is not None, claim
    directory = Path(root) / DIRECTORY
    temporary = _temporary(directory, encode_claim(claim))
    os.replace(temporary, claim_path(root, claim.epoch))
    fsync_directory(directory)


# --- the consume queues' splits of a takeover ---------------------------------------------------------
# ``consumequeue/splits.e<epoch>``: each queue's max offset when ``epoch`` took the store over
# (store.consume_queue reads below it from older files, from it on from the epoch's own), written
# before the epoch's seal, so a sealed epoch always has its splits.

def splits_path(root: Path, epoch: int) -> Path:
    return Path(root) / "consumequeue" / f"splits.e{epoch}"


def write_splits(root: Path, epoch: int, splits: dict[tuple[str, int], int]) -> None:
    body = "".join(f"{topic} {queue_id} {split}\n" for (topic, queue_id), split in sorted(splits.items())).encode()
    directory = splits_path(root, epoch).parent
    make_directories(directory)
    temporary = _temporary(directory, f"{zlib.crc32(body)}\n".encode() + body)
    os.replace(temporary, splits_path(root, epoch))
    fsync_directory(directory)


def read_splits(root: Path, epoch: int) -> dict[tuple[str, int], int]:
    path = splits_path(root, epoch)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise LedgerError(f"{path}: missing (a sealed takeover always writes its splits first)") from None
    head, _, body = data.partition(b"\n")
    if not head.isdigit() or zlib.crc32(body) != int(head):
        raise LedgerError(f"{path}: line 1: CRC does not match (a torn or edited file)")
    splits = {}
    for number, line in enumerate(body.decode("utf-8", "replace").splitlines(), start=2):
        fields = line.split(" ")
        if len(fields) != 3 or not fields[1].isdigit() or not fields[2].isdigit():
            raise LedgerError(f"{path}: line {number}: expected 'topic queueId split', got {line[:80]!r}")
        splits[(fields[0], int(fields[1]))] = int(fields[2])
    return splits


def check_shared_store(root: Path, owner: str) -> str | None:
    """Why the store at ``root`` cannot be taken over from ``owner`` through this mount (None: it
    can): it is not there, its claims do not name ``owner`` as the newest owner (another store, or
    a stale view of it), or its claims' directory does not take a durable atomic rename."""
    root = Path(root)
    if not (root / DIRECTORY).is_dir():
        return f"{root} holds no ownership claims here: the target does not see the source's store at that path"
    try:
        ledger = read_ledger(root)
    except (LedgerError, OSError) as exc:
        return f"the claims at {root} cannot be read: {exc}"
    if ledger.newest.owner != owner:
        return (f"the claims at {root} name {ledger.newest.owner or 'nobody'} as the owner, not {owner}: "
                "the target sees another store, or a stale copy of it")
    directory = root / DIRECTORY
    probe = directory / f".probe.{os.getpid()}.{secrets.token_hex(4)}"
    nonce = secrets.token_bytes(16)
    staged = None
    try:
        staged = _temporary(directory, nonce)
        os.rename(staged, probe)
        fsync_directory(directory)
        if probe.read_bytes() != nonce:
            return f"{directory} read back other bytes after a rename: it cannot hold the claims"
    except OSError as exc:
        return f"{directory} does not take a durable atomic rename: {exc}"
    finally:
        for leftover in (staged, probe):
            try:
                if leftover is not None:
                    leftover.unlink()
            except OSError:
                pass
    return None
