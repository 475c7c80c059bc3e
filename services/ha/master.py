"""The master's side of replication for one broker: the driver around ha.replication.master_group.

Rules:

* The core (:class:`ha.replication.master_group.MasterGroup`) decides everything: sessions,
  the SyncStateSet, put waits and the confirm offset.  This driver keeps only the transport
  (one stream per slave connection), the reads that fill batches, and one timer that sleeps
  until the core's ``next_deadline_ms()``.  It carries out each output in its order:
  persist the confirm offset and report it (the read limit), propose the SyncStateSet
  (``propose``: the controller's AlterSyncStateSet; without a controller the core applies
  it itself), complete and fail put waits, close and wake streams.
* Batches go out as soon as bytes are written to the commit log (before the master's own
  fdatasync), one epoch per batch, at most ``haTransferBatchSize`` bytes; the stream's flow
  control paces a slow slave.  An idle stream carries a heartbeat every
  ``haSendHeartbeatInterval`` (the core's deadline wakes it).
* Consumers read up to the store's read limit, which this driver reports but does not decide:
  after every output it calls ``on_reads(confirm offset, alone in the set)`` and the replica
  moves the limit as its node says (``ha.role.serving.read_limit``: no limit while the set
  is only the master, the confirm offset otherwise; kept in the checkpoint, never going back).
* SYNC_MASTER: :meth:`check_writable` refuses a put at once when too few replicas are in
  sync (HA_NOT_AVAILABLE); :meth:`wait_replicated` waits for the needed acks until the core
  times the wait out after ``slaveTimeout`` (SLAVE_PERSISTENCE_TIMEOUT: the message stays in
  the log, as upstream).
* :meth:`transferring_slaves` names the slaves whose connection reached TRANSFER (their first
  ack); listeners (:meth:`add_transfer_listener`, pre-online) are told when that set changes.
* :meth:`stop` (the broker stops, or stops being master) closes every stream and fails every
  waiting put with HA_NOT_AVAILABLE: a put not yet replicated is not acknowledged by a
  broker that is no longer master.
"""
from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from ha.replication.config import BrokerRole, HaConfig
from ha.replication.master import MasterSessionState
from ha.replication.master_group import GroupSettings, MasterGroup, MasterGroupOutput, MasterLog, Proposal
from ha.replication.messages import SlaveAck, SlaveHandshake
from ha.replication.quorum import QuorumRejection, WaitForAcks
from ha.replication.transfer import BatchPlan
from ha.role.serving import read_limit
from metadata.status import Code, RequestRejected
from scheduler.clock import Clock
from services.ha.converters import batch_to_proto, decode_slave_frame, master_handshake_to_proto, queue_offset_total
from services.ha.wire import Link, WireError
from store.config import FlushDiskType
from store.replica_index import IndexCursor

log = logging.getLogger(__name__)
ReadsChanged = Callable[[int, bool], None]
MASTER_ID = 0
NON_CONTROLLER_EPOCH = 1   # without a controller the master never changes: one epoch

# AlterSyncStateSet: the proposal -> (applied members, set epoch), or None when refused or unanswered
Propose = Callable[[Proposal], Awaitable["tuple[frozenset[int], int] | None"]]


@dataclass
class SlaveStream:
    token: int
    slave_id: int
    address: str
    link: Link
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    cursor: IndexCursor = field(default_factory=IndexCursor)  # the consume-queue entries shipped so far
    closed: bool = False
    close_reason: str = ""


class ReplicationMaster:
    def __init__(self, name: str, store, config: HaConfig, clock: Clock, *, self_id: int = MASTER_ID,
                 propose: Propose | None = None, sync_state_set: frozenset[int] = frozenset(),
                 sync_state_set_epoch: int = 0, on_reads: ReadsChanged | None = None):
        """``propose`` given: controller mode (the set changes only through the controller);
        ``on_reads(confirm_offset, alone)`` after every output: the replica moves the store's
        read limit (None: this master's own, ``ha.role.serving.read_limit``)."""
        self.name, self.store, self.config, self.clock = name, store, config, clock
        self.self_id = self_id
        self._propose = propose
        self.group = MasterGroup(GroupSettings(self_id, propose is not None, config), sync_state_set,
                                 sync_state_set_epoch, store.confirm_offset, clock.monotonic_ms())
        self.streams: dict[int, SlaveStream] = {}
        self._futures: dict[int, asyncio.Future] = {}
        self._on_reads = on_reads or self._limit_own_reads
        self._timer_wake = asyncio.Event()
        self._timer_at: int | None = None  # the deadline the timer sleeps until (None: no deadline)
        self._timer: asyncio.Task | None = None
        self._proposing: set[asyncio.Task] = set()
        self._stopped = False
        self._metadata_version = int.from_bytes(os.urandom(4), "big") << 16  # a restart is a change too
        self._transfer_listeners: list[Callable[[], None]] = []
        if propose is None:
            store.epochs.start_epoch(NON_CONTROLLER_EPOCH, store.commit_log_min_offset)
        store.add_write_listener(self._on_written)
        self._limit_reads()

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._timer = asyncio.get_running_loop().create_task(self._run_timer(), name=f"ha-master-{self.name}")

    async def stop(self) -> None:
        self._stopped = True
        self.store.remove_write_listener(self._on_written)
        for stream in list(self.streams.values()):
            self._close(stream, "NOT_MASTER")
        tasks = [t for t in (self._timer, *self._proposing) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for future in self._futures.values():
            if not future.done():
                future.set_exception(RequestRejected(Code.HA_NOT_AVAILABLE,
                                                     f"broker {self.name} is no longer master"))

    # --- the master's log as the core sees it -----------------------------------------------------
    def log(self) -> MasterLog:
        store = self.store
        max_offset = store.commit_log_max_offset
        durable = store.flushed_offset if store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH else max_offset
        last_file_start = max_offset - max_offset % store.config.mapped_file_size_commit_log
        return MasterLog(store.epochs.history, store.commit_log_min_offset, max_offset, durable,
                         max(last_file_start, store.commit_log_min_offset))

    def visible_offset(self) -> int:
        return self.group.visible_offset(self.log())

    def _limit_reads(self) -> None:
        self._on_reads(self.group.tracker.confirm_offset, self.group.sync_state_set == frozenset({self.self_id}))

    def _limit_own_reads(self, confirm_offset: int, alone: bool) -> None:
        self.store.set_read_limit(read_limit(confirm_offset, acting=False, master_alone=alone))

    def read_facts(self) -> tuple[int, bool]:
        """(confirm offset, alone in the SyncStateSet): what the read limit is decided from."""
        return self.group.tracker.confirm_offset, self.group.sync_state_set == frozenset({self.self_id})

    def transferring_slaves(self) -> frozenset[int]:
        """The slave ids whose open connection is in TRANSFER (it acked once after its handshake)."""
        return frozenset(stream.slave_id for stream in self.streams.values()
                         if not stream.closed and (session := self.group.session_of(stream.token)) is not None
                         and session.state is MasterSessionState.TRANSFER)

    def add_transfer_listener(self, fn: Callable[[], None]) -> None:
        self._transfer_listeners.append(fn)

    def remove_transfer_listener(self, fn: Callable[[], None]) -> None:
        if fn in self._transfer_listeners:
            self._transfer_listeners.remove(fn)

    def _transfer_changed(self) -> None:
        for listener in list(self._transfer_listeners):
            listener()

    def _on_written(self, write_offset: int) -> None:
        if not self.streams:
            return
        now = self.clock.monotonic_ms()
        for stream in self.streams.values():
            session = self.group.session_of(stream.token)
            if session is None or not session.waits_for_ack(write_offset, now):
                stream.wake.set()

    # --- carrying out the core's outputs ----------------------------------------------------------
    def _carry_out(self, out: MasterGroupOutput) -> None:
        if out.confirm_offset is not None:
            self.store.set_confirm_offset(out.confirm_offset)
        self._limit_reads()
        if out.propose is not None:
            self._start_proposal(out.propose)
        for request_id in out.acked:
            future = self._futures.get(request_id)
            if future is not None and not future.done():
                future.set_result(None)
        for request_id in out.timed_out:
            future = self._futures.get(request_id)
            if future is not None and not future.done():
                future.set_exception(RequestRejected(
                    Code.SLAVE_PERSISTENCE_TIMEOUT,
                    f"broker {self.name}: replicas did not ack within slaveTimeout {self.config.slave_timeout_ms} ms"))
        for token, reason in out.close:
            stream = self.streams.get(token)
            if stream is not None:
                self._close(stream, reason)
        for token in out.wake:
            stream = self.streams.get(token)
            if stream is not None:
                stream.wake.set()
        # the timer sleeps until the core's next deadline: wake it only when that moved earlier
        # (after every slave ack it did not: waking it anyway ran a tick per ack, 5% of the CPU)
        deadline = self.group.next_deadline_ms()
        if deadline is not None and (self._timer_at is None or deadline < self._timer_at):
            self._timer_wake.set()

    def _start_proposal(self, proposal: Proposal) -> None:
        log.info("%s: proposing SyncStateSet %s (epoch %d)", self.name, sorted(proposal.members),
                 proposal.based_on_epoch)
        task = asyncio.get_running_loop().create_task(self._send_proposal(proposal))
        self._proposing.add(task)
        task.add_done_callback(self._proposing.discard)

    async def _send_proposal(self, proposal: Proposal) -> None:
        try:
            result = await self._propose(proposal)
        except Exception as failure:  # noqa: BLE001 - an unanswered proposal is retried by the core
            log.warning("%s: AlterSyncStateSet failed: %s", self.name, failure)
            result = None
        if self._stopped:
            return
        now = self.clock.monotonic_ms()
        if result is None:
            self._carry_out(self.group.refused(now))
            return
        members, epoch = result
        log.info("%s: SyncStateSet %s applied (epoch %d)", self.name, sorted(members), epoch)
        self._carry_out(self.group.applied(members, epoch, self.log(), now))

    def metadata_changed(self) -> None:
        """Topics or groups changed: slaves hear of it with the next frame, sent now."""
        self._metadata_version += 1
        self._carry_out(self.group.metadata_changed())

    def adopt_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        """A newer set from the controller's view of this group (ignored unless newer)."""
        self._carry_out(self.group.applied(members, epoch, self.log(), self.clock.monotonic_ms()))

    async def _run_timer(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._timer_wake.clear()
            deadline = self._timer_at = self.group.next_deadline_ms()
            wake = None
            if deadline is not None:
                delay = max(0.0, (deadline - self.clock.monotonic_ms()) / 1000)
                # a timer that sets the event, not asyncio.timeout: on 3.11 a cancellation that
                # lands as the timeout fires becomes a TimeoutError, which this loop would swallow
                wake = loop.call_later(delay, self._timer_wake.set)
            try:
                await self._timer_wake.wait()
            finally:
                if wake is not None:
                    wake.cancel()
            self._carry_out(self.group.tick(self.log(), self.clock.monotonic_ms()))
            self._timer_wake.clear()

    # --- SYNC_MASTER -----------------------------------------------------------------------------
    def check_writable(self) -> None:
        if self.config.broker_role is not BrokerRole.SYNC_MASTER:
            return  # an ASYNC_MASTER never waits: skip counting streams on every send
        if self.group.decide_put(self.log()) is QuorumRejection.IN_SYNC_REPLICAS_NOT_ENOUGH:
            raise self._not_enough()

    def _not_enough(self) -> RequestRejected:
        connected = sum(1 for s in self.streams.values() if not s.closed)
        return RequestRejected(Code.HA_NOT_AVAILABLE,
                               f"broker {self.name}: in-sync replicas not enough (inSyncReplicas "
                               f"{self.config.in_sync_replicas}, minInSyncReplicas {self.config.min_in_sync_replicas}, "
                               f"SyncStateSet {sorted(self.group.sync_state_set)}, connected slaves {connected})")

    @property
    def puts_wait(self) -> bool:
        """Whether a put awaits :meth:`wait_replicated` (a SYNC_MASTER's; an ASYNC_MASTER's never does)."""
        return self.config.broker_role is BrokerRole.SYNC_MASTER

    async def wait_replicated(self, end_offset: int) -> None:
        """SYNC_MASTER: return once the needed replicas hold every byte below ``end_offset``."""
        if self.config.broker_role is not BrokerRole.SYNC_MASTER:
            return
        if self._stopped:
            raise RequestRejected(Code.HA_NOT_AVAILABLE, f"broker {self.name} is no longer master")
        log_ = self.log()
        decision = self.group.decide_put(log_)
        if isinstance(decision, QuorumRejection):
            raise self._not_enough()
        if not isinstance(decision, WaitForAcks):
            return
        result = self.group.wait(end_offset, decision.need, log_, self.clock.monotonic_ms())
        if isinstance(result, QuorumRejection):
            raise RequestRejected(Code.HA_NOT_AVAILABLE, f"broker {self.name}: too many puts wait for replicas "
                                                         f"(haMaxPendingAcks {self.config.ha_max_pending_acks})")
        request_id, out = result
        future = asyncio.get_running_loop().create_future()
        self._futures[request_id] = future
        try:
            self._carry_out(out)
            await future
        finally:
            self.group.forget(request_id)
            self._futures.pop(request_id, None)

    # --- one slave stream ------------------------------------------------------------------------
    async def serve(self, link: Link, handshake: SlaveHandshake) -> None:
        """One slave's connection, from its handshake until either side ends it."""
        if self._stopped:
            return
        token, reply, out = self.group.connect(handshake, self.log(), self.clock.monotonic_ms())
        stream = SlaveStream(token, handshake.slave_id, link.peer, link)
        self.streams[token] = stream
        link.on_received = lambda: self.group.heard(token, self.clock.monotonic_ms())
        self._carry_out(out)
        log.info("%s: slave %d connected from %s", self.name, handshake.slave_id, stream.address)
        reader = None
        try:
            await link.send(master_handshake_to_proto(reply).SerializeToString())
            reader = asyncio.create_task(self._read_acks(link, stream))
            await self._send_loop(link, stream)
        except OSError as failure:
            self._close(stream, f"WRITE_FAILED: {failure}")
        finally:
            self._close(stream, "ENDED")
            self._stream_ended(stream)  # first: the reader's cancellation must not delay leaving the set
            if reader is not None:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)

    def _stream_ended(self, stream: SlaveStream) -> None:
        log.info("%s: slave %d stream ended (%s)", self.name, stream.slave_id, stream.close_reason or "closed")
        self.streams.pop(stream.token, None)
        self._transfer_changed()
        if not self._stopped:
            self._carry_out(self.group.disconnected(stream.token, self.log(), self.clock.monotonic_ms()))

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
                session = self.group.session_of(stream.token)
                was_transferring = session is not None and session.state is MasterSessionState.TRANSFER
                self._carry_out(self.group.on_ack(stream.token, decoded[1], self.log(), self.clock.monotonic_ms()))
                if not was_transferring and session is not None and session.state is MasterSessionState.TRANSFER:
                    self._transfer_changed()
        except (OSError, WireError) as failure:
            self._close(stream, f"READ_FAILED: {failure}")

    def _close(self, stream: SlaveStream, reason: str) -> None:
        was_open, stream.closed = not stream.closed, True
        stream.close_reason = stream.close_reason or reason
        stream.wake.set()
        stream.link.shutdown()  # wakes a send or receive blocked on the socket
        if was_open:
            self._transfer_changed()

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
        finally:  # a send that failed as the stream closed is seen here, not "never retrieved"
            if writing is not None:
                if not writing.done():
                    writing.cancel()
                await asyncio.gather(writing, return_exceptions=True)

    async def _next_frame(self, stream: SlaveStream) -> tuple[bytes, bytes] | None:
        """The next batch's (header, payload), or None after waiting for news (a write, an ack, a
        deadline of the core)."""
        stream.wake.clear()
        log_ = self.log()
        now = self.clock.monotonic_ms()
        plan = self.group.next_batch(stream.token, log_, now)
        if isinstance(plan, MasterGroupOutput):
            self._carry_out(plan)
            return None
        if plan is None:
            await stream.wake.wait()
            return None
        return self._read_batch(stream, plan, log_, now)

    def _read_batch(self, stream: SlaveStream, plan: BatchPlan, log_: MasterLog, now: int) -> tuple[bytes, bytes]:
        payload = self.store.read_raw(plan.start_offset, plan.max_bytes) if plan.max_bytes else b""
        index = self.store.replication_index(stream.cursor, plan.start_offset,
                                             plan.start_offset + len(payload)) if payload else ()
        batch = self.group.sent(stream.token, plan, payload, index, log_, now, self._metadata_version)
        return batch_to_proto(batch).SerializeToString(), payload

    # --- status ----------------------------------------------------------------------------------
    def status(self) -> dict:
        max_offset = self.store.commit_log_max_offset
        tracker = self.group.tracker
        by_slave = {s.slave_id: s for s in self.streams.values() if not s.closed}
        slaves = []
        for slave_id, progress in sorted(tracker.slaves.items()):
            stream = by_slave.get(slave_id)
            session = self.group.session_of(stream.token) if stream else None
            slaves.append({"slaveId": slave_id, "address": stream.address if stream else "",
                           "connected": progress.connected, "learner": progress.learner,
                           "state": session.state.value if session else "DISCONNECTED",
                           "ackOffset": max(0, progress.ack_offset),  # -1 (no ack yet) shows as 0
                           "lagBytes": max(0, max_offset - max(0, progress.ack_offset)),
                           "inSyncStateSet": slave_id in tracker.sync_state_set})
        return {"brokerName": self.name, "role": "MASTER", "brokerRole": self.config.broker_role.value,
                "brokerId": self.self_id, "maxOffset": max_offset, "minOffset": self.store.commit_log_min_offset,
                "queueOffsetTotal": queue_offset_total(self.store),
                "confirmOffset": self.visible_offset(), "syncStateSet": sorted(tracker.sync_state_set),
                "syncStateSetEpoch": self.group.sync_state_set_epoch,
                "masterEpoch": self.store.epochs.history.last_epoch,
                "epochs": [list(pair) for pair in self.store.epochs.history.pairs()], "slaves": slaves}


def is_sync_master(config: HaConfig) -> bool:
    return config.broker_role is BrokerRole.SYNC_MASTER
