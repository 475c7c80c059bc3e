"""A store on shared storage taken over by another container (issue 26): the new owner serves
every message the old one acknowledged, the old one (as if stopped with SIGSTOP and woken:
its store object still open) acknowledges nothing more, and nothing is copied."""
from __future__ import annotations

import asyncio

import pytest

from metadata.message import MessageDraft
from store.config import FlushDiskType, StoreConfig
from store.errors import NotWritable, StoreIOError
from store.message_store import MessageStore
from store.ownership_files import read_ledger
from store.takeover import take_over

SEG = 64 * 1024


def _config(root, flush=FlushDiskType.SYNC_FLUSH) -> StoreConfig:
    return StoreConfig(store_path_root_dir=root, flush_disk_type=flush, mapped_file_size_commit_log=SEG,
                       mapped_file_size_consume_queue=20 * 64)


def _bodies(store: MessageStore, queue_id: int = 0) -> list[bytes]:
    found, offset = [], 0
    while True:
        got = store.get("T", queue_id, offset, 32)
        if not got.messages:
            return found
        found += [m.body for m in got.messages]
        offset = got.next_offset


async def _put(store: MessageStore, prefix: str, count: int, queue_id: int = 0) -> list[bytes]:
    bodies = [f"{prefix}{i}".encode() * 20 for i in range(count)]
    for body in bodies:
        await store.put([MessageDraft("T", queue_id, body, 1)])
    return bodies


@pytest.mark.parametrize("flush", [FlushDiskType.SYNC_FLUSH, FlushDiskType.ASYNC_FLUSH])
def test_the_new_owner_serves_everything_acknowledged_and_the_old_one_acknowledges_nothing_more(tmp_path, flush):
    async def scenario():
        config = _config(tmp_path, flush)
        old = MessageStore(config, lambda: 1, shared="container-1")
        old.start()
        acked = await _put(old, "a", 300)  # > one 64 KiB segment: the seal falls in a later one
        acked_q1 = await _put(old, "q", 5, queue_id=1)
        moved = take_over(config, "container-2", 1)
        assert moved.sealed_end == old._log.write_offset and moved.starts_at % SEG == 0
        with pytest.raises(NotWritable, match="taken over"):  # written, but not acknowledged
            await _put(old, "late", 1)
        with pytest.raises(NotWritable):
            await _put(old, "later", 3)
        new = MessageStore(config, lambda: 2, shared="container-2")
        new.start()
        assert _bodies(new)[:300] == acked and _bodies(new, 1) == acked_q1
        assert not any(b.startswith(b"later") for b in _bodies(new))
        mine = await _put(new, "b", 50)
        served = _bodies(new)
        assert served[:300] == acked and served[-50:] == mine and len(served) in (350, 351)  # + "late", stored unacked
        old._log.files.write(old._log.write_offset, b"\xff" * 64)  # a woken owner's raw write: read by no one
        new.shutdown()
        with pytest.raises(StoreIOError, match="owned by container-2 at ownership epoch 1"):
            MessageStore(config, lambda: 3, shared="container-1").start()
        with pytest.raises(StoreIOError, match="owned by container-2"):
            MessageStore(config, lambda: 3).start()
        again = MessageStore(config, lambda: 3, shared="container-2")
        again.start()
        assert _bodies(again) == served and _bodies(again, 1) == acked_q1
        again.shutdown()
        old.shutdown()
    asyncio.run(scenario())


def test_moving_back_and_forth(tmp_path):
    async def scenario():
        config = _config(tmp_path)
        everything = []
        owner = MessageStore(config, lambda: 1, shared="c1")
        owner.start()
        for epoch, (name, to) in enumerate([("c1", "c2"), ("c2", "c1"), ("c1", "c2")], start=1):
            everything += await _put(owner, name, 40)
            owner.shutdown()  # a clean release
            take_over(config, to, epoch)
            owner = MessageStore(config, lambda: 1, shared=to)
            owner.start()
            assert _bodies(owner) == everything
        assert [e.owner for e in read_ledger(tmp_path).entries] == ["", "c2", "c1", "c2"]
        owner.shutdown()
    asyncio.run(scenario())


def test_the_brokers_tables_move_to_the_new_epochs_state_and_a_stale_rename_cannot_reach_them(tmp_path):
    async def scenario():
        config = _config(tmp_path)
        old = MessageStore(config, lambda: 1, shared="c1")
        old.start()
        (old.state_dir / "config").mkdir()
        (old.state_dir / "config" / "consumerOffset.json").write_text('{"offsetTable": {"T@g": {"0": 40}}}')
        await _put(old, "a", 3)
        take_over(config, "c2", 1)
        # the woken old owner persists its (older) offsets as it always does: to its own state
        (old.state_dir / "config" / "consumerOffset.json").write_text('{"offsetTable": {"T@g": {"0": 12}}}')
        new = MessageStore(config, lambda: 2, shared="c2")
        new.start()
        assert new.state_dir == tmp_path / "state.e1" != old.state_dir
        assert "40" in (new.state_dir / "config" / "consumerOffset.json").read_text()
        new.shutdown(), old.shutdown()
    asyncio.run(scenario())


def test_the_storage_check_before_a_move_names_what_the_target_cannot_do(tmp_path, monkeypatch):
    """store.ownership_files.check_shared_store: a path with no claims (the target's mount shows
    another directory), claims naming another owner (another store, or a stale copy), a directory
    whose rename fails; and a store the target can take over, which the check leaves as it was."""
    import os

    from store.ownership_files import check_shared_store
    from store.takeover import claim_if_unowned

    root = tmp_path / "broker-a"
    assert "holds no ownership claims here" in check_shared_store(root, "127.0.0.1:8081")
    assert claim_if_unowned(_config(root), "127.0.0.1:8081")
    before = sorted(p.name for p in (root / "ownership").iterdir())
    assert check_shared_store(root, "127.0.0.1:8081") is None
    assert sorted(p.name for p in (root / "ownership").iterdir()) == before  # the probe left nothing
    assert "name 127.0.0.1:8081 as the owner, not 127.0.0.1:8082" in check_shared_store(root, "127.0.0.1:8082")

    def no_rename(src, dst):
        raise OSError(18, "Invalid cross-device link")
    monkeypatch.setattr(os, "rename", no_rename)
    assert "does not take a durable atomic rename" in check_shared_store(root, "127.0.0.1:8081")
    assert sorted(p.name for p in (root / "ownership").iterdir()) == before


@pytest.mark.parametrize("handed", [True, False])
def test_after_a_clean_release_neither_the_takeover_nor_the_new_owner_reads_the_old_segment_again(tmp_path, handed):
    """A takeover after a clean release scans from the handed end (the old owner's clean
    checkpoint agrees), so it replays nothing; without the handed end (fenced) it scans from the
    checkpoint's segment.  Either way the new owner's start begins past the sealed end (the
    takeover scanned and synced everything below it) and replays nothing, and serves everything."""
    from store import recovery

    replayed = []
    real = recovery.recover

    def counting(log, queues, point, start=None):
        report = real(log, queues, point, start)
        replayed.append(report.records_replayed)
        return report

    async def scenario():
        config = _config(tmp_path)
        owner = MessageStore(config, lambda: 1, shared="c1")
        owner.start()
        everything = await _put(owner, "a", 200)  # several 64 KiB segments, the last one partly full
        end = owner.commit_log_max_offset
        owner.shutdown()
        import store.takeover as takeover_module
        takeover_module.recover = counting
        try:
            taken = take_over(config, "c2", 1, end if handed else None)
        finally:
            takeover_module.recover = real
        assert taken.sealed_end == end
        assert replayed == [0] if handed else replayed[0] > 0
        new = MessageStore(config, lambda: 1, shared="c2")
        report = new.start()
        assert report.records_replayed == 0 and report.commit_log_max_offset == taken.starts_at
        assert _bodies(new) == everything
        more = await _put(new, "b", 5)
        assert _bodies(new) == everything + more
        new.shutdown()
    asyncio.run(scenario())
