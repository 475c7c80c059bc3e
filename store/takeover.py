"""Opening a store on shared storage as its owner, and taking it over (issue 26; rules:
store.ownership, docs/reassign.md).

Rules:
- :func:`open_owned`: a store with no claims opens as it always did (epoch 0, plain files);
  with claims, only for the container the newest sealed claim names (a ``shared`` opener),
  at that epoch: the commit log by the ledger's plan, each consume queue through its layers
  (the splits of every sealed takeover), and the checkpoint and epoch file from
  ``state.e<epoch>/``.
- The first opener of a shared store no one claimed claims it (:func:`claim_if_unowned`).
- A shared store's owner acknowledges only while :func:`fenced_reason` finds no newer claim
  (store.message_store checks it after each write, before answering).
- :func:`take_over` (the target of a move, or a source taking a broker back): begin the new
  epoch (from then on the old owner acknowledges nothing), recover the old owner's log and
  queues as they are (the scan from its checkpoint finds where its bytes end; nothing past it
  counts), write the queues' splits, carry the checkpoint, the epoch file and the broker's
  tables (``config/``: topics, groups, consumer offsets, pop, timer and transaction state)
  into the new state directory, where a woken old owner's stale rename cannot reach them,
  then seal.  The store is closed again afterwards; the caller opens it as its
  owner.  A takeover that fails before its seal leaves an epoch that owns nothing: the old
  owner stays fenced, and the next takeover seals the old epoch.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from store.checkpoint import Checkpoint
from store.checkpoint_file import CheckpointFile, write_checkpoint
from store.commit_log import ZERO_AHEAD_BYTES, CommitLog
from store.config import FlushDiskType
from store.epoch_file import FILE_NAME as EPOCH_FILE
from store.ownership import Ledger, LedgerError, begin_takeover, claim_of, plan, queue_layers, seal
from store.ownership_files import newer_claim, read_ledger, read_splits, write_begin, write_seal, write_splits
from store.queue_table import QueueTable
from store.recovery import recover
from store.segmented_file import fsync_directory, make_directories, parse_segment_name


def state_dir(root: Path, epoch: int) -> Path:
    return root if epoch == 0 else root / f"state.e{epoch}"


def _files(directory: Path) -> frozenset[tuple[int, int]]:
    if not directory.exists():
        return frozenset()
    return frozenset(parsed for name in os.listdir(directory) if (parsed := parse_segment_name(name)) is not None)


def _open(root: Path, config, ledger: Ledger, epoch: int) -> tuple[CommitLog, QueueTable]:
    """The log and queues as ``ledger`` says (``epoch``: the files written from now on)."""
    segment = config.mapped_file_size_commit_log
    moved = ledger != Ledger.fresh()
    zeros = ZERO_AHEAD_BYTES if config.flush_disk_type is FlushDiskType.SYNC_FLUSH else 0  # store.commit_log
    log = CommitLog(root / "commitlog", segment, epoch,
                    plan(ledger, _files(root / "commitlog"), segment) if moved else None, zeros)
    splits = {e.epoch: read_splits(root, e.epoch) for e in ledger.entries[1:] if e.start is not None}

    def layers_of(topic: str, queue_id: int) -> tuple[tuple[int, int], ...]:
        return queue_layers(ledger, {e: found[(topic, queue_id)] for e, found in splits.items()
                                     if (topic, queue_id) in found})

    queues = QueueTable(root / "consumequeue", config.mapped_file_size_consume_queue, layers_of if moved else None)
    queues.load()
    return log, queues


def open_owned(root: Path, config, shared: str | None) -> tuple[CommitLog, QueueTable, int, Path]:
    """(log, queues, ownership epoch, state directory) of the store at ``root``; ValueError
    (with the owner's name) when this opener does not own it."""
    try:
        ledger = read_ledger(root)
    except LedgerError as failure:
        raise ValueError(str(failure)) from None
    if ledger == Ledger.fresh():
        return (*_open(root, config, ledger, 0), 0, root)
    owning = ledger.newest
    if shared is None or owning.start is None or owning.owner != shared:
        raise ValueError(f"the store was moved: it is owned by {owning.owner or 'nobody'} at ownership epoch "
                         f"{owning.epoch}{'' if owning.start is not None else ' (a takeover in progress)'}; "
                         f"{'this container is ' + shared if shared else 'it opens on shared storage only'}")
    return (*_open(root, config, ledger, owning.epoch), owning.epoch, state_dir(root, owning.epoch))


def fenced_reason(root: Path, epoch: int) -> str | None:
    """Why the owner at ``epoch`` may not acknowledge (a newer claim exists), or None.  Read
    after the bytes are written: an acknowledged put is then inside the new owner's seal."""
    if newer_claim(root, epoch):
        return (f"the store at {root} was taken over by a newer owner (ownership epoch {epoch} is fenced); "
                "this put is not acknowledged")
    return None


def claim_if_unowned(config, owner: str) -> bool:
    """A store on shared storage that no one claimed yet is claimed by its first opener (epoch
    1), so that two containers configured with it never both serve it: of two racing, the
    second's claim fails (``write_begin`` links, never overwrites) and it finds the store
    owned.  True when this opener claimed it."""
    if read_ledger(config.store_path_root_dir) != Ledger.fresh():
        return False
    try:
        take_over(config, owner, 1)
    except LedgerError:
        return False  # another opener claimed it first
    return True


def _handed_start(log: CommitLog, point, handed_end: int | None) -> int | None:
    if (handed_end is None or point is None or not point.clean_shutdown
            or point.commit_log_flushed_offset != handed_end or point.consume_queue_flushed_offset != handed_end):
        return None
    starts = log.files.starts()
    if not starts or handed_end < starts[0] or log.files.end() < handed_end:
        return None
    return handed_end


@dataclass(frozen=True)
class Takeover:
    epoch: int
    sealed_end: int        # where the previous owner's bytes end
    starts_at: int         # where this epoch's bytes start (the next segment boundary)
    queues: int


def take_over(config, owner: str, epoch: int, handed_end: int | None = None) -> Takeover:
    """``handed_end``: where the old owner said its log ends after closing cleanly; the scan
    starts there when its checkpoint agrees (a clean close at that very offset, its files that
    long), else from the checkpoint's segment.  A starting point, never trusted as the end."""
    root = config.store_path_root_dir
    before = read_ledger(root)
    begun = begin_takeover(before, epoch, owner)
    write_begin(root, claim_of(begun, epoch))          # from here the old owner acknowledges nothing
    previous = before.owning()  # whose bytes end where this takeover seals
    old_state = state_dir(root, previous.epoch)
    log, queues = _open(root, config, before, previous.epoch)
    try:
        point = CheckpointFile(old_state / "checkpoint").read()
        recover(log, queues, point, _handed_start(log, point, handed_end))
        end = log.write_offset
        sealed = seal(begun, end, config.mapped_file_size_commit_log)
        write_splits(root, epoch, {(q.topic, q.queue_id): q.max_offset for q in queues.all()})
        log.files.sync_all()
        queues.sync_all()
    finally:
        queues.close()
        log.files.close()
    new_state = state_dir(root, epoch)
    make_directories(new_state)
    # the new epoch's checkpoint: clean at the sealed end (everything below it was recovered and
    # synced just now), so the new owner's start reads nothing of the old owner's last segment again
    write_checkpoint(new_state / "checkpoint", replace(point or Checkpoint(), commit_log_flushed_offset=end,
                                                        consume_queue_flushed_offset=end, clean_shutdown=True))
    for name in (EPOCH_FILE, *(f"config/{f.name}" for f in sorted((old_state / "config").glob("*.json*")))):
        if (old_state / name).exists():  # the broker's tables (store.message_store.state_dir): a few small files
            make_directories((new_state / name).parent)
            shutil.copyfile(old_state / name, new_state / name)
            with open(new_state / name, "rb+") as copied:
                os.fsync(copied.fileno())
    for directory in (new_state / "config", new_state):
        if directory.exists():
            fsync_directory(directory)
    write_seal(root, claim_of(sealed, epoch))
    return Takeover(epoch, end, sealed.newest.start, len(queues.all()))
