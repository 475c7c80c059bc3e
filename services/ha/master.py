"""The master's side of replication for one broker: slave streams, acks, SyncStateSet, quorum.

Rules:

* One :class:`ReplicationMaster` per master broker owns the SyncStateSet tracker, the
  SYNC_MASTER put waits, and one :class:`ha.replication.master.MasterSession` per slave
  stream.  A newer stream of the same slave id replaces the older one, which ends.
* Batches go out as soon as bytes are written to the commit log (before the master's own
  fdatasync), one epoch per batch, at most ``haTransferBatchSize`` bytes; the stream's flow
  control paces a slow slave.  An idle stream carries a heartbeat every
  ``haSendHeartbeatInterval``.
* Without a controller the master manages its SyncStateSet locally: a slave that caught up
  joins at once; a member that is disconnected or not caught up leaves only after
  ``haMaxTimeSlaveNotCatchup``.  Meanwhile the confirm offset freezes (upstream #6662), so
  consumers never read what the set does not hold.  The confirm offset never goes back and
  is kept in the checkpoint.
* SYNC_MASTER: :meth:`check_writable` refuses a put at once when too few replicas are in
  sync (HA_NOT_AVAILABLE); :meth:`wait_replicated` waits for the needed acks for at most
  ``slaveTimeout`` (SLAVE_PERSISTENCE_TIMEOUT: the message stays in the log, as upstream).
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from typing import Callable

from ha.replication.config import BrokerRole, HaConfig
from ha.replication.master import MasterCloseReason, MasterLogView, MasterSession, MasterSettings
from ha.replication.messages import SlaveAck, SlaveHandshake
from ha.replication.quorum import AckNow, AckWaits, PendingAck, QuorumRejection, WaitForAcks, decide_quorum_mode
from ha.replication.sync_state import SyncStateTracker
from metadata.status import Code, RequestRejected
from scheduler.clock import Clock
from services.ha.converters import batch_to_proto, decode_slave_frame, master_handshake_to_proto, queue_offset_total
from services.ha.wire import Link, WireError
from store.config import FlushDiskType
from store.replica_index import IndexCursor

log = logging.getLogger(__name__)
MASTER_ID = 0
IDLE_POLL_S = 0.2
ACK_NOW = AckNow()
NON_CONTROLLER_EPOCH = 1   # without a controller the master never changes: one epoch


@dataclass
class SlaveStream:
    slave_id: int
    address: str
    session: MasterSession
    link: Link
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    cursor: IndexCursor = field(default_factory=IndexCursor)  # the consume-queue entries shipped so far
    closed: bool = False
    close_reason: str = ""


class ReplicationMaster:
    def __init__(self, name: str, store, config: HaConfig, clock: Clock,
                 on_confirm: Callable[[], None] = lambda: None):
        self.name, self.store, self.config, self.clock = name, store, config, clock
        self.streams: dict[int, SlaveStream] = {}
        self.tracker = SyncStateTracker(MASTER_ID, frozenset({MASTER_ID}), store.confirm_offset,
                                        config.ha_max_time_slave_not_catchup_ms)
        self.waits = AckWaits(config.ha_max_pending_acks)
        self._futures: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._on_confirm = on_confirm
        self.settings = MasterSettings(config.ha_transfer_batch_size, config.ha_send_heartbeat_interval_ms,
                                       config.ha_housekeeping_interval_ms, config.ha_max_epoch_entries)
        store.epochs.start_epoch(NON_CONTROLLER_EPOCH, store.commit_log_min_offset)
        store.add_write_listener(self._on_written)
        store.read_limit = self.visible_offset

    # --- offsets ---------------------------------------------------------------------------------
    def local_offset(self) -> int:
        """What the master itself holds durably enough to count as one replica."""
        if self.store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            return self.store.flushed_offset
        return self.store.commit_log_max_offset

    def visible_offset(self) -> int:
        """Consumers read up to here: the confirm offset once the set has other members."""
        if self.tracker.sync_state_set == frozenset({MASTER_ID}):
            return self.store.commit_log_max_offset
        return self.tracker.confirm_offset

    def view(self) -> MasterLogView:
        store = self.store
        max_offset = store.commit_log_max_offset
        last_file_start = max_offset - max_offset % store.config.mapped_file_size_commit_log
        return MasterLogView(store.epochs.history, store.commit_log_min_offset, max_offset,
                             max(last_file_start, store.commit_log_min_offset), self.visible_offset())

    def _on_written(self, write_offset: int) -> None:
        for stream in self.streams.values():
            stream.wake.set()

    # --- SYNC_MASTER -----------------------------------------------------------------------------
    def _decide(self):
        if self.config.broker_role is not BrokerRole.SYNC_MASTER:
            return ACK_NOW  # an ASYNC_MASTER never waits: skip counting streams on every send
        connected = sum(1 for s in self.streams.values() if not s.closed)
        in_sync = self.tracker.in_sync_slaves(self.store.commit_log_max_offset, self.config.ha_max_gap_not_in_sync)
        return decide_quorum_mode(self.config, 1 + connected, in_sync)

    def check_writable(self) -> None:
        decision = self._decide()
        if decision is QuorumRejection.IN_SYNC_REPLICAS_NOT_ENOUGH:
            raise RequestRejected(Code.HA_NOT_AVAILABLE,
                                  f"broker {self.name}: in-sync replicas not enough "
                                  f"(inSyncReplicas {self.config.in_sync_replicas}, "
                                  f"connected slaves {len(self.streams)})")

    async def wait_replicated(self, end_offset: int) -> None:
        """SYNC_MASTER: return once the needed replicas hold every byte below ``end_offset``."""
        decision = self._decide()
        if isinstance(decision, QuorumRejection):
            self.check_writable()
            raise RequestRejected(Code.HA_NOT_AVAILABLE, f"broker {self.name}: {decision.value}")
        if not isinstance(decision, WaitForAcks):
            return
        request_id = next(self._ids)
        timeout_ms = self.config.slave_timeout_ms
        if self.waits.add(PendingAck(request_id, end_offset, decision.need, self.clock.monotonic_ms() + timeout_ms)):
            raise RequestRejected(Code.HA_NOT_AVAILABLE, f"broker {self.name}: too many puts wait for replicas "
                                                         f"(haMaxPendingAcks {self.config.ha_max_pending_acks})")
        future = asyncio.get_running_loop().create_future()
        self._futures[request_id] = future
        self._resolve_waits()
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                await future
        except TimeoutError:
            raise RequestRejected(Code.SLAVE_PERSISTENCE_TIMEOUT,
                                  f"broker {self.name}: replicas did not ack within slaveTimeout {timeout_ms} ms") from None
        finally:
            self.waits.pending.pop(request_id, None)
            self._futures.pop(request_id, None)

    def _resolve_waits(self) -> None:
        if not self.waits.pending:
            return
        local = self.local_offset()

        def acked(offset: int) -> int:
            count = self.tracker.acked_replicas(offset, sync_state_set_only=False)
            return count if local >= offset else count - 1

        for request_id in self.waits.satisfied(acked, self.tracker.all_members_acked):
            future = self._futures.get(request_id)
            if future is not None and not future.done():
                future.set_result(None)

    # --- the SyncStateSet, local (no controller) --------------------------------------------------
    def _on_ack(self, slave_id: int, offset: int) -> None:
        now = self.clock.now_ms()
        history = self.store.epochs.history
        last_start = history.last.start_offset if history.last else 0
        before = self.tracker.confirm_offset
        proposal = self.tracker.on_ack(slave_id, offset, self.local_offset(), last_start, now)
        if proposal is not None:
            log.info("%s: slave %d caught up: SyncStateSet %s", self.name, slave_id, sorted(proposal))
            self.tracker.apply_sync_state_set(proposal, self.local_offset())
        self._confirm_changed(before)
        self._resolve_waits()

    def _confirm_changed(self, before: int) -> None:
        if self.tracker.confirm_offset != before:
            self.store.set_confirm_offset(self.tracker.confirm_offset)
            self._on_confirm()

    def housekeeping(self) -> None:
        """Periodic: members disconnected or behind for haMaxTimeSlaveNotCatchup leave the set."""
        now = self.clock.now_ms()
        before = self.tracker.confirm_offset
        keep = {MASTER_ID}
        for member in self.tracker.sync_state_set - {MASTER_ID}:
            progress = self.tracker.slaves.get(member)
            seen = progress.last_caught_up_ms if progress else None
            if seen is not None and now - seen <= self.config.ha_max_time_slave_not_catchup_ms:
                keep.add(member)
        if frozenset(keep) != self.tracker.sync_state_set:
            log.warning("%s: SyncStateSet shrinks to %s (members behind or gone for more than %d ms)",
                        self.name, sorted(keep), self.config.ha_max_time_slave_not_catchup_ms)
            self.tracker.apply_sync_state_set(frozenset(keep), self.local_offset())
        elif len(self.tracker.sync_state_set) > 1:
            self.tracker.recompute_confirm(self.local_offset())
        self._confirm_changed(before)
        self._resolve_waits()

    # --- one slave stream ------------------------------------------------------------------------
    async def serve(self, link: Link, handshake: SlaveHandshake) -> None:
        """One slave's connection, from its handshake until either side ends it."""
        session = MasterSession(self.settings, self.clock.now_ms())
        reply = session.on_handshake(handshake, self.view(), self.clock.now_ms())
        assert not isinstance(reply, MasterCloseReason), reply
        await link.send(master_handshake_to_proto(reply).SerializeToString())
        stream = SlaveStream(handshake.slave_id, link.peer, session, link)
        old = self.streams.get(handshake.slave_id)
        if old is not None:
            self._close(old, "REPLACED")
        self.streams[handshake.slave_id] = stream
        self.tracker.slave_connected(handshake.slave_id, handshake.async_learner)
        log.info("%s: slave %d connected from %s", self.name, handshake.slave_id, stream.address)
        reader = asyncio.create_task(self._read_acks(link, stream))
        try:
            await self._send_loop(link, stream)
        except OSError as failure:
            self._close(stream, f"WRITE_FAILED: {failure}")
        finally:
            self._close(stream, "ENDED")
            self._stream_ended(stream)  # first: the reader's cancellation must not delay leaving the set
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    def _stream_ended(self, stream: SlaveStream) -> None:
        log.info("%s: slave %d stream ended (%s)", self.name, stream.slave_id, stream.close_reason or "closed")
        if self.streams.get(stream.slave_id) is stream:
            del self.streams[stream.slave_id]
            self.tracker.slave_disconnected(stream.slave_id)  # the set keeps it (frozen) until housekeeping

    async def _read_acks(self, link: Link, stream: SlaveStream) -> None:
        try:
            while not stream.closed:
                got = await link.receive()
                if got is None:
                    self._close(stream, "SLAVE_CLOSED")
                    return
                decoded = decode_slave_frame(*got)
                if decoded is None or not isinstance(decoded[1], SlaveAck):
                    self._close(stream, "BAD_FRAME")
                    return
                result = stream.session.on_ack(decoded[1], self.view(), self.clock.now_ms())
                if isinstance(result, MasterCloseReason):
                    self._close(stream, result.value)
                    return
                if result is not None:
                    self._on_ack(stream.slave_id, result)
                stream.wake.set()
        except (OSError, WireError) as failure:
            self._close(stream, f"READ_FAILED: {failure}")

    def _close(self, stream: SlaveStream, reason: str) -> None:
        stream.closed = True
        stream.close_reason = stream.close_reason or reason
        stream.wake.set()
        stream.link.shutdown()  # wakes a send or receive blocked on the socket

    async def _send_loop(self, link: Link, stream: SlaveStream) -> None:
        """Batches to the slave; the next one is read, indexed and encoded while the last one is
        sent (at most one send in flight)."""
        writing: asyncio.Future | None = None
        try:
            while not stream.closed:
                frame = await self._next_frame(stream)
                if frame is None:
                    continue
                if writing is not None:
                    await writing
                writing = asyncio.ensure_future(link.send(*frame))
            if writing is not None and not stream.closed:
                await writing
        finally:
            if writing is not None and not writing.done():
                writing.cancel()
                await asyncio.gather(writing, return_exceptions=True)

    async def _next_frame(self, stream: SlaveStream) -> tuple[bytes, bytes] | None:
        """The next batch's (header, payload), or None after waiting for news (a write, an ack, a poll)."""
        session = stream.session
        stream.wake.clear()
        view = self.view()
        plan = session.next_batch(view, self.clock.now_ms())
        if isinstance(plan, MasterCloseReason):
            self._close(stream, plan.value)
            return None
        if plan is None:
            # a timer that sets the event, not asyncio.timeout: on 3.11 a cancellation that
            # lands as the timeout fires becomes a TimeoutError, which this loop would swallow
            poll = asyncio.get_running_loop().call_later(IDLE_POLL_S, stream.wake.set)
            try:
                await stream.wake.wait()
            finally:
                poll.cancel()
            return None
        payload = self.store.read_raw(plan.start_offset, plan.max_bytes) if plan.max_bytes else b""
        index = self.store.replication_index(stream.cursor, plan.start_offset,
                                             plan.start_offset + len(payload)) if payload else ()
        batch = session.sent(plan, payload, view.confirm_offset, self.clock.now_ms(), index)
        self.tracker.on_transfer(stream.slave_id, view.max_offset, self.clock.now_ms())
        return batch_to_proto(batch).SerializeToString(), payload

    # --- status ----------------------------------------------------------------------------------
    def status(self) -> dict:
        max_offset = self.store.commit_log_max_offset
        slaves = []
        for slave_id, progress in sorted(self.tracker.slaves.items()):
            stream = self.streams.get(slave_id)
            slaves.append({"slaveId": slave_id, "address": stream.address if stream else "",
                           "connected": progress.connected, "learner": progress.learner,
                           "state": stream.session.state.value if stream else "DISCONNECTED",
                           "ackOffset": progress.ack_offset, "lagBytes": max(0, max_offset - progress.ack_offset),
                           "inSyncStateSet": slave_id in self.tracker.sync_state_set})
        return {"brokerName": self.name, "role": "MASTER", "brokerRole": self.config.broker_role.value,
                "maxOffset": max_offset, "minOffset": self.store.commit_log_min_offset,
                "queueOffsetTotal": queue_offset_total(self.store),
                "confirmOffset": self.visible_offset(), "syncStateSet": sorted(self.tracker.sync_state_set),
                "epochs": [list(pair) for pair in self.store.epochs.history.pairs()], "slaves": slaves}


def is_sync_master(config: HaConfig) -> bool:
    return config.broker_role is BrokerRole.SYNC_MASTER
