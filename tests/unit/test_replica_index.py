"""store.replica_index: the master's consume-queue entries shipped with each batch, and the
slave's check of them against the copied bytes.

The master side runs on real stores on disk (read_raw + replication_index); the slave side
is checked by the consume-queue files it writes, byte for byte against the master's.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ha.replication.messages import QueueSlice
from metadata.message import MessageDraft, Prop, tag_hash
from store import record
from store.config import CQ_ENTRY_SIZE, FlushDiskType, StoreConfig
from store.cq_entry import ENTRY, encode_entry
from store.errors import BadReplicationData
from store.message_store import MessageStore
from store.replica_index import IndexCursor, check_indexed_run

SEGMENT = 8192


def make(path: Path, flush=FlushDiskType.ASYNC_FLUSH) -> MessageStore:
    store = MessageStore(StoreConfig(path, mapped_file_size_commit_log=SEGMENT, mapped_file_size_consume_queue=400,
                                     flush_disk_type=flush), lambda: 1_700_000_000_000)
    store.start()
    return store


def drafts(count: int = 120, first: int = 0):
    """Three topics (one non-ASCII), two queues each, tagged and untagged, bodies of many sizes."""
    for i in range(first, first + count):
        props = {Prop.MESSAGE_ID: f"id-{i}"}
        if i % 3:
            props[Prop.TAG] = "tag-é" if i % 2 else "a"
        topic = ("T", "U", "tópico")[i % 3]
        yield MessageDraft(topic, (i // 3) % 2, b"b" * (60 + 37 * (i % 50)), 7, f"10.0.0.{i % 2}:1", props, {})


def fill(store: MessageStore, items) -> None:
    async def go():
        for draft in items:
            await store.put([draft])
    asyncio.run(go())


def queue_files(store: MessageStore) -> dict:
    """Every consume queue's entries from its min offset (what a consumer can reach)."""
    found = {}
    for topic, ids in store.queues().items():
        for queue_id in ids:
            queue = store._queues.get(topic, queue_id)
            found[(topic, queue_id)] = (queue.min_offset, queue.max_offset,
                                        queue.files.read(queue.min_offset * CQ_ENTRY_SIZE,
                                                         (queue.max_offset - queue.min_offset) * CQ_ENTRY_SIZE))
    return found


def copy(master: MessageStore, slave: MessageStore, max_bytes: int, cursor: IndexCursor | None = None) -> int:
    """Replicate what the slave lacks in reads of ``max_bytes``; returns the number of batches."""
    cursor = cursor or IndexCursor()
    batches = 0
    while slave.commit_log_max_offset < master.commit_log_max_offset:
        start = slave.commit_log_max_offset
        data = master.read_raw(start, max_bytes)
        slave.append_raw(start, data, master.replication_index(cursor, start, start + len(data)))
        batches += 1
    return batches


def log_bytes(store: MessageStore) -> bytes:
    out, offset = [], store.commit_log_min_offset
    while offset < store.commit_log_max_offset:
        out.append(store.read_raw(offset, 1 << 20))
        offset += len(out[-1])
    return b"".join(out)


@pytest.mark.parametrize("max_bytes", [1, 700, 3000, SEGMENT, 1 << 20])
def test_the_slave_queues_equal_the_masters_whatever_the_batch_size(tmp_path, max_bytes):
    master, slave = make(tmp_path / "m"), make(tmp_path / "s")
    try:
        fill(master, drafts())
        copy(master, slave, max_bytes)
        assert log_bytes(slave) == log_bytes(master) and master.commit_log_max_offset > 2 * SEGMENT
        assert queue_files(slave) == queue_files(master)
        assert slave.get("U", 1, 0, 100, 1 << 20).messages[3].message_id == \
            master.get("U", 1, 0, 100, 1 << 20).messages[3].message_id
    finally:
        master.shutdown(), slave.shutdown()


def test_a_cursor_follows_new_queues_a_restart_and_a_jump_back(tmp_path):
    master, slave = make(tmp_path / "m"), make(tmp_path / "s")
    try:
        fill(master, drafts(30))
        cursor = IndexCursor()
        copy(master, slave, 2000, cursor)
        fill(master, [MessageDraft("NEW", q, b"n" * 90, 7, "h:1", {Prop.TAG: "n"}, {}) for q in range(3)])
        fill(master, drafts(30, first=30))
        copy(master, slave, 2000, cursor)  # the same cursor sees the new topic's queues
        assert queue_files(slave) == queue_files(master)
        # the slave is cut back (as in a handshake): a batch that does not start where the
        # cursor stopped positions every queue again
        cut = master.get("T", 0, 4, 1, 1 << 20).messages[0].commit_offset
        slave.truncate(cut)
        copy(master, slave, 1500, cursor)
        assert queue_files(slave) == queue_files(master) and log_bytes(slave) == log_bytes(master)
    finally:
        master.shutdown(), slave.shutdown()


def test_entries_still_awaiting_the_flush_come_from_the_pending_list(tmp_path):
    """Under SYNC_FLUSH a record's entry reaches its queue after the fdatasync: the index of a
    batch copied before that holds it all the same (taken from the store's pending list)."""
    master = make(tmp_path / "m")
    try:
        fill(master, drafts(60))
        end = master.commit_log_max_offset
        middle = master.get("U", 0, 5, 1, 1 << 20).messages[0].commit_offset
        pending = []
        for topic, ids in master.queues().items():
            for queue_id in ids:
                queue = master._queues.get(topic, queue_id)
                for queue_offset in range(queue.min_offset, queue.max_offset):
                    entry = queue.entry(queue_offset)
                    if entry.commit_offset >= middle:
                        pending.append((entry.end, topic, queue_id, queue_offset,
                                        encode_entry(entry.commit_offset, entry.size, entry.tag_code)))
        pending.sort()
        whole = IndexCursor().slices(master._queues, [], end, 0, end)
        split = IndexCursor().slices(master._queues, pending, middle, 0, end)
        assert normalise(split) == normalise(whole)
        assert len(pending) > 10
    finally:
        master.shutdown()


def normalise(slices) -> dict:
    found = {}
    for piece in slices:
        first, blob = found.get((piece.topic, piece.queue_id), (piece.first_queue_offset, b""))
        assert first + len(blob) // CQ_ENTRY_SIZE == piece.first_queue_offset
        found[(piece.topic, piece.queue_id)] = (first, blob + piece.entries)
    return found


def test_records_of_a_deleted_topic_are_copied_unindexed(tmp_path):
    master, slave = make(tmp_path / "m"), make(tmp_path / "s")
    try:
        fill(master, drafts(45))
        master.delete_topic("U")
        fill(master, drafts(9, first=45))
        copy(master, slave, 2500)
        assert log_bytes(slave) == log_bytes(master)
        assert queue_files(slave) == queue_files(master)
        assert ("U", 0) in queue_files(master)  # recreated by the later puts, from queue offset 0
    finally:
        master.shutdown(), slave.shutdown()


def test_sync_flush_master_ships_what_it_has_not_flushed_yet(tmp_path):
    """A real SYNC_FLUSH master: batches read while puts await their fdatasync."""
    master, slave = make(tmp_path / "m", FlushDiskType.SYNC_FLUSH), make(tmp_path / "s")

    async def go():
        cursor = IndexCursor()
        saw_pending = 0
        for round_ in range(20):
            puts = [asyncio.create_task(master.put([draft])) for draft in drafts(6, first=6 * round_)]
            await asyncio.sleep(0)  # the puts have written; their flush has not been reported yet
            saw_pending += bool(master._pending)
            start = slave.commit_log_max_offset
            data = master.read_raw(start, 1 << 20)
            slave.append_raw(start, data, master.replication_index(cursor, start, start + len(data)))
            await asyncio.gather(*puts)
        return saw_pending

    try:
        assert asyncio.run(go()) > 0
        assert log_bytes(slave) == log_bytes(master)
        assert queue_files(slave) == queue_files(master)
    finally:
        master.shutdown(), slave.shutdown()


# --- the slave's check ------------------------------------------------------------------------------
def build(count: int = 40) -> tuple[bytes, tuple[QueueSlice, ...]]:
    """Records laid out as the commit log does (BLANKs at segment ends) and their index."""
    out, offset, next_queue, index = bytearray(), 0, {}, {}
    for draft in drafts(count):
        key = (draft.topic, draft.queue_id)
        data = record.encode_record(draft, next_queue.get(key, 0), offset, 9)
        room = SEGMENT - offset % SEGMENT
        if len(data) + record.BLANK_SIZE > room:
            out += record.encode_blank(room)
            offset += room
            data = record.encode_record(draft, next_queue.get(key, 0), offset, 9)
        first, entries = index.setdefault(key, (next_queue.get(key, 0), []))
        entries.append(encode_entry(offset, len(data), tag_hash(draft.properties.get(Prop.TAG))))
        next_queue[key] = next_queue.get(key, 0) + 1
        out += data
        offset += len(data)
    return bytes(out), tuple(QueueSlice(t, q, first, b"".join(e)) for (t, q), (first, e) in index.items())


def test_a_faithful_run_is_accepted():
    data, index = build()
    assert len(data) > SEGMENT
    assert check_indexed_run(data, 0, SEGMENT, index, {}) is None
    assert check_indexed_run(b"", 4096, SEGMENT, (), {}) is None


def replace_slice(index, number, **changes):
    piece = index[number]
    fields = dict(topic=piece.topic, queue_id=piece.queue_id, first_queue_offset=piece.first_queue_offset,
                  entries=piece.entries)
    fields.update(changes)
    return index[:number] + (QueueSlice(**fields),) + index[number + 1:]


def entry_changed(piece: QueueSlice, which: int, **changes) -> bytes:
    entries = list(ENTRY.iter_unpack(piece.entries))
    commit_offset, size, tag = entries[which]
    values = dict(commit_offset=commit_offset, size=size, tag=tag)
    values.update(changes)
    entries[which] = (values["commit_offset"], values["size"], values["tag"])
    return b"".join(ENTRY.pack(*e) for e in entries)


@pytest.mark.parametrize("case, expected", [
    ("size", "does not describe"), ("commit", "does not describe"), ("queue_offset", "does not describe"),
    ("topic", "does not describe"), ("queue_id", "does not describe"), ("missing", "unindexed record"),
    ("continuity", "starts at queue offset"), ("past_end", "runs past"),
])
def test_an_index_that_does_not_describe_the_bytes_is_refused(case, expected):
    data, index = build()
    piece = index[1]
    if case == "size":
        index = replace_slice(index, 1, entries=entry_changed(piece, 2, size=ENTRY.unpack_from(piece.entries, 40)[1] + 1))
    elif case == "commit":
        index = replace_slice(index, 1, entries=entry_changed(piece, 2, commit_offset=ENTRY.unpack_from(piece.entries, 40)[0] + 4))
    elif case == "queue_offset":
        index = replace_slice(index, 1, first_queue_offset=piece.first_queue_offset + 1)
    elif case == "topic":
        index = replace_slice(index, 1, topic=piece.topic + "x")
    elif case == "queue_id":
        index = replace_slice(index, 1, queue_id=piece.queue_id + 7)
    elif case == "missing":
        index = replace_slice(index, 1, entries=piece.entries[:-CQ_ENTRY_SIZE])  # a record no entry names...
        data = bytearray(data)
        last = ENTRY.unpack_from(piece.entries, len(piece.entries) - CQ_ENTRY_SIZE)
        data[last[0] + 60] ^= 1  # ...and that is corrupt: checked in full
        data = bytes(data)
    elif case == "continuity":
        reason = check_indexed_run(data, 0, SEGMENT, index, {(piece.topic, piece.queue_id): 3})
        assert expected in reason
        return
    elif case == "past_end":
        data = data[:ENTRY.unpack_from(index[-1].entries, len(index[-1].entries) - CQ_ENTRY_SIZE)[0] + 100]
    reason = check_indexed_run(data, 0, SEGMENT, index, {})
    assert reason is not None and expected in reason, reason


def test_a_valid_record_no_entry_names_is_copied_unindexed():
    """As the records of a topic deleted on the master: whole and valid, so accepted."""
    data, index = build()
    piece = index[1]
    assert check_indexed_run(data, 0, SEGMENT, index[:1] + index[2:], {}) is None
    assert check_indexed_run(data, 0, SEGMENT, replace_slice(index, 1, entries=piece.entries[:-CQ_ENTRY_SIZE]), {}) is None


def test_entries_naming_another_queues_records_are_refused():
    data, index = build()
    other = index + (QueueSlice("other", 0, 0, index[0].entries),)  # another queue naming T/0's records
    assert "does not describe" in check_indexed_run(data, 0, SEGMENT, other, {})
    twice = index + (index[0],)
    assert "comes twice" in check_indexed_run(data, 0, SEGMENT, twice, {})


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_fuzz_a_changed_index_is_refused_or_names_the_same_records(draw):
    """A change to the index bytes is refused unless it is in a tag code (the master's to
    decide) or makes an entry a hole, whose record is then checked in full as unindexed.
    (In transit the batch CRC covers the entries too: see the session tests.)"""
    data, index = build(24)
    number = draw.draw(st.integers(0, len(index) - 1))
    piece = index[number]
    blob = bytearray(piece.entries)
    at = draw.draw(st.integers(0, len(blob) - 1))
    blob[at] ^= draw.draw(st.integers(1, 255))
    changed = replace_slice(index, number, entries=bytes(blob))
    if check_indexed_run(data, 0, SEGMENT, changed, {}) is None:
        size = ENTRY.unpack_from(blob, at - at % CQ_ENTRY_SIZE)[1]
        assert at % CQ_ENTRY_SIZE >= 12 or size <= 0, (at, size)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_fuzz_changed_bytes_with_a_true_index_are_refused_where_the_index_reads(draw):
    """A byte changed in an indexed record's size, commit offset, queue fields or topic, or
    anywhere in an unindexed stretch, is refused (the rest is the batch CRC's job)."""
    data, index = build(24)
    described = set()
    for piece in index:
        for commit_offset, size, _ in ENTRY.iter_unpack(piece.entries):
            described.update(range(commit_offset, commit_offset + 8))           # size, magic
            described.update(range(commit_offset + 12, commit_offset + 16))     # queue id
            described.update(range(commit_offset + 20, commit_offset + 36))     # queue and commit offsets
            described.update(range(commit_offset + 52, commit_offset + 54 + len(piece.topic.encode())))
    at = draw.draw(st.sampled_from(sorted(described)))
    broken = bytearray(data)
    broken[at] ^= draw.draw(st.integers(1, 255))
    assert check_indexed_run(bytes(broken), 0, SEGMENT, index, {}) is not None


def test_append_raw_refuses_a_bad_index_and_writes_nothing(tmp_path):
    master, slave = make(tmp_path / "m"), make(tmp_path / "s")
    try:
        fill(master, drafts(20))
        data = master.read_raw(0, 1 << 20)
        index = master.replication_index(IndexCursor(), 0, len(data))
        with pytest.raises(BadReplicationData):
            slave.append_raw(0, data, replace_slice(index, 0, first_queue_offset=2))
        assert slave.commit_log_max_offset == 0 and slave.queues() == {}
        slave.append_raw(0, data, index)
        copy(master, slave, 1 << 20)
        assert queue_files(slave) == queue_files(master)
    finally:
        master.shutdown(), slave.shutdown()


def test_an_entry_naming_a_record_hidden_inside_another_is_refused():
    """A body can hold bytes that look like a whole record; an entry naming them overlaps."""
    placeholder = b"\xab" * 400
    outer = record.encode_record(MessageDraft("T", 0, placeholder, 7, "h:1", {}, {}), 0, 0, 9)
    body_at = outer.index(placeholder)
    inner = record.encode_record(MessageDraft("T", 1, b"x", 7, "h:1", {}, {}), 0, body_at, 9)
    outer = record.encode_record(MessageDraft("T", 0, inner + placeholder[len(inner):], 7, "h:1", {}, {}), 0, 0, 9)
    assert outer.index(inner) == body_at
    index = (QueueSlice("T", 0, 0, encode_entry(0, len(outer), 0)),
             QueueSlice("T", 1, 0, encode_entry(body_at, len(inner), 0)))
    assert "overlaps" in check_indexed_run(outer, 0, SEGMENT, index, {})
    assert check_indexed_run(outer, 0, SEGMENT, index[:1], {}) is None


def staged_batches(master: MessageStore, max_bytes: int) -> list[tuple[int, bytes, tuple]]:
    cursor, batches, start = IndexCursor(), [], master.commit_log_min_offset
    while start < master.commit_log_max_offset:
        data = bytes(master.read_raw(start, max_bytes))
        batches.append((start, data, master.replication_index(cursor, start, start + len(data))))
        start += len(data)
    return batches


def test_staged_runs_are_invisible_until_committed_in_order(tmp_path):
    """The slave's pipeline: batch N+1 is checked and staged while N is still being written."""
    master, slave = make(tmp_path / "m"), make(tmp_path / "s")
    try:
        fill(master, drafts())
        first, second, *rest = staged_batches(master, 3000)
        runs = [slave.stage_raw(*first), slave.stage_raw(*second)]  # the second checks against the first
        assert slave.commit_log_max_offset == 0 and slave.queues() == {}  # nothing visible yet
        with pytest.raises(BadReplicationData, match="log ends at"):
            slave.stage_raw(*first)  # a run must follow the staged ones
        for run in runs:
            run.write()
        with pytest.raises(BadReplicationData, match="commit of a run"):
            slave.commit_staged(runs[1])  # out of order
        slave.commit_staged(runs[0])
        assert slave.commit_log_max_offset == runs[0].end
        slave.commit_staged(runs[1])
        for batch in rest:
            slave.append_raw(*batch)
        assert log_bytes(slave) == log_bytes(master) and queue_files(slave) == queue_files(master)
    finally:
        master.shutdown(), slave.shutdown()


def test_abandoned_runs_are_staged_again_from_the_log_end(tmp_path):
    """A run whose write failed is abandoned with every run after it; nothing of them shows."""
    master, slave = make(tmp_path / "m"), make(tmp_path / "s")
    try:
        fill(master, drafts())
        batches = staged_batches(master, 3000)
        slave.append_raw(*batches[0])
        slave.stage_raw(*batches[1]), slave.stage_raw(*batches[2])
        with pytest.raises(Exception, match="staged"):
            slave.truncate(0)  # never under runs in flight
        slave.abandon_staged()
        assert slave.commit_log_max_offset == batches[1][0]
        for batch in batches[1:]:
            slave.append_raw(*batch)
        assert log_bytes(slave) == log_bytes(master) and queue_files(slave) == queue_files(master)
    finally:
        master.shutdown(), slave.shutdown()


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_fuzz_the_loop_for_few_entries_says_what_numpy_says(draw):
    """check_indexed_run checks a batch of few entries in a plain loop (store.replica_index
    FEW_ENTRIES) and larger ones with numpy: on faithful and damaged runs alike, both give the
    same verdict in the same words."""
    from store.replica_index import FEW_ENTRIES, _check_few, _check_many, _check_slices

    data, index = build(draw.draw(st.integers(1, 12)))
    index = tuple(draw.draw(st.permutations(index)))
    damage = draw.draw(st.sampled_from(["none", "data", "entries", "first", "topic", "queue_id", "drop", "cut"]))
    number = draw.draw(st.integers(0, len(index) - 1))
    piece = index[number]
    if damage == "data":
        broken = bytearray(data)
        for _ in range(draw.draw(st.integers(1, 3))):
            broken[draw.draw(st.integers(0, len(broken) - 1))] ^= draw.draw(st.integers(1, 255))
        data = bytes(broken)
    elif damage == "entries":
        blob = bytearray(piece.entries)
        blob[draw.draw(st.integers(0, len(blob) - 1))] ^= draw.draw(st.integers(1, 255))
        index = replace_slice(index, number, entries=bytes(blob))
    elif damage == "first":
        index = replace_slice(index, number, first_queue_offset=piece.first_queue_offset + draw.draw(st.integers(-2, 2)))
    elif damage == "topic":
        index = replace_slice(index, number, topic=draw.draw(st.sampled_from(["T", "U", "tópico", "Tx", ""])))
    elif damage == "queue_id":
        index = replace_slice(index, number, queue_id=draw.draw(st.integers(-1, 3)))
    elif damage == "drop":
        index = replace_slice(index, number, entries=piece.entries[:-CQ_ENTRY_SIZE])
    elif damage == "cut":
        data = data[:draw.draw(st.integers(0, len(data)))]
    assert _check_few(data, 0, SEGMENT, index) == _check_many(data, 0, SEGMENT, index)
    if sum(len(p.entries) for p in index) <= FEW_ENTRIES * CQ_ENTRY_SIZE:  # what check_indexed_run itself runs
        assert check_indexed_run(data, 0, SEGMENT, index, {}) == (_check_slices(index, {}) or _check_few(data, 0, SEGMENT, index))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_one_cursor_across_interleaved_writes_and_batches_ships_every_entry(tmp_path_factory, draw):
    """A cursor visits only the queues written since its last batch and those whose next entry
    lay past it: with puts to old and new queues between batches of any size (under either
    flush type), the slave's queues still equal the master's after every copy."""
    flush = draw.draw(st.sampled_from([FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH]))
    root = tmp_path_factory.mktemp("interleaved")
    master, slave = make(root / "m", flush), make(root / "s", flush)
    cursor, serial = IndexCursor(), 0
    try:
        for _ in range(draw.draw(st.integers(2, 6))):
            keys = draw.draw(st.lists(st.tuples(st.sampled_from(["T", "U", "V", "W"]), st.integers(0, 3)),
                                      min_size=1, max_size=12))
            fill(master, [MessageDraft(topic, queue_id, b"m" * draw.draw(st.integers(10, 900)), 7, "h:1",
                                       {Prop.MESSAGE_ID: f"id-{(serial := serial + 1)}"}, {})
                          for topic, queue_id in keys])
            copy(master, slave, draw.draw(st.sampled_from([300, 1500, 5000, 1 << 20])), cursor)
            assert queue_files(slave) == queue_files(master)
        assert log_bytes(slave) == log_bytes(master)
    finally:
        master.shutdown(), slave.shutdown()
