"""Recovery at start: cut the commit log's invalid tail, then make consume queues match it.

Rules, in order:

1. Scan the commit log from a boundary known to be durable (the start of the segment holding
   the checkpoint's older offset, or the first segment when there is no valid checkpoint; at
   or past a sealed owner's end (store.ownership), the next segment: the takeover that sealed
   it scanned and synced everything below it, so a new owner reads nothing of the old owner's
   last segment -- up to 1 GiB, about 3 ms a MiB -- again; or where the caller says, a
   takeover after a clean release, from the end the old owner handed over),
   checking every record's CRC and position; stop at the first invalid record and cut there
   physically (later segments too).  Everything below the cut was fsynced or is whole.  At a
   clean end only the zeros kept past the data (store.commit_log) are cut: no bytes truncated.
2. Cut every consume-queue entry that ends past the log's end (never trust a CQ beyond the log).
3. Replay the records from the consume queues' checkpointed offset to the end, rewriting their
   entries (idempotent: same bytes at the same place), so entries lost with an unsynced CQ
   come back.
4. Move each queue's min offset up to the log's min.
"""
from __future__ import annotations

from metadata.message import Prop, tag_hash
from store import record
from store.checkpoint import Checkpoint
from store.commit_log import CommitLog
from store.cq_entry import encode_entry
from store.queue_table import QueueTable
from store.record import Invalid
from store.results import RecoveryReport


def scan_start(log: CommitLog, point: Checkpoint | None) -> int:
    """The boundary scanning starts at: a segment start at or below every checkpointed offset."""
    starts = log.files.starts()
    if not starts:
        return 0
    if point is None:
        return starts[0]
    trusted = min(point.commit_log_flushed_offset, point.consume_queue_flushed_offset)
    segment = log.files.segment_start(trusted)
    sealed = log.files.sealed_end(segment) if segment in starts else None
    if sealed is not None and trusted >= sealed:
        return segment + log.segment_size
    return max(starts[0], segment)


def recover(log: CommitLog, queues: QueueTable, point: Checkpoint | None, start: int | None = None) -> RecoveryReport:
    """``start``: a record boundary known durable, overriding the checkpoint's."""
    start = scan_start(log, point) if start is None else start
    log.write_offset = start
    replayed = 0
    batches: dict[tuple[str, int], list[tuple[int, bytes]]] = {}

    def visit(offset: int, buf, pos: int, info) -> None:
        nonlocal replayed
        message = record.decode(buf, pos, offset, log.room(offset))
        assert not isinstance(message, Invalid), "a checked record must decode"
        entry = encode_entry(offset, info.size, tag_hash(message.properties.get(Prop.TAG)))
        batches.setdefault((message.topic, message.queue_id), []).append((info.queue_offset, entry))
        replayed += 1
        if replayed % 4096 == 0:
            _flush_batches(queues, batches)

    end = log.scan(start, visit)
    truncated = log.cut(end.offset)
    if end.reason is None:  # a clean end: only zeros written ahead of the data were cut
        truncated = 0
    cut_entries = sum(queue.cut_beyond(end.offset) for queue in queues.all())
    _flush_batches(queues, batches)
    for queue in queues.all():
        queue.advance_min(log.min_offset)
    notes = () if end.reason is None else (f"commit log cut at {end.offset}: {end.reason.value}",)
    return RecoveryReport(
        commit_log_min_offset=log.min_offset, commit_log_max_offset=log.write_offset,
        truncated_bytes=truncated, records_replayed=replayed, consume_queue_entries_cut=cut_entries,
        queues=len(queues.all()), clean_shutdown=bool(point and point.clean_shutdown), notes=notes)


def _flush_batches(queues: QueueTable, batches: dict[tuple[str, int], list[tuple[int, bytes]]]) -> None:
    for (topic, queue_id), items in batches.items():
        queue = queues.get_or_create(topic, queue_id)
        run_start, run = items[0][0], []
        for queue_offset, entry in items:
            if queue_offset != run_start + len(run):
                queue.put(run_start, b"".join(run))
                run_start, run = queue_offset, []
            run.append(entry)
        queue.put(run_start, b"".join(run))
    batches.clear()
