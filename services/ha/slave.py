"""The slave's side of replication for one broker: connect, handshake, copy, ack.

Rules:

* The master's address is asked for on every (re)connection: ``haMasterAddress`` when
  configured, else the one the nameserver returns to the slave's registration.  A failed or closed
  stream is retried after ``haConnectRetryInterval``; every close is logged with its reason.
* Each output of :class:`ha.replication.slave.SlaveSession` is carried out in its order:
  truncate (physical, fsynced, consume queues repaired), persist the epoch history
  (fsynced), append the payload, set the confirm offset, then send.  An empty slave whose
  resume point is not its own start first moves its empty log there
  (``MessageStore.start_empty_at``).
* Acks are sent by one task, coalesced: under SYNC_FLUSH an ack never reports an offset
  before it is fdatasynced, while the stream keeps receiving (the flush of one batch
  overlaps the copy of the next).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

import grpc

from ha.replication.config import HaConfig
from ha.replication.messages import MasterHandshake, SlaveAck, SlaveHandshake
from ha.replication.slave import CloseReason, SlaveOutput, SlaveSession, SlaveSettings, SlaveState
from proto import ha_pb2_grpc as pb_grpc
from scheduler.clock import Clock
from services.ha.converters import (BROKER_METADATA_KEY, MAX_FRAME_BYTES, master_frame_from_proto,
                                    queue_offset_total, slave_frame_to_proto)
from store.config import FlushDiskType
from store.errors import StoreError

log = logging.getLogger(__name__)
TICK_S = 1.0
# lookahead: the HTTP/2 window the slave grants the master's stream.  With grpc's default the
# master waited for the slave to read each 1 MiB batch before it could send the next, so
# master and slave took turns; 16 MiB lets the master read and send while the slave checks
# and writes (1 GiB catch-up here: 9.7 s -> 4.1 s).
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", MAX_FRAME_BYTES),
                   ("grpc.max_send_message_length", MAX_FRAME_BYTES),
                   ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000),
                   ("grpc.http2.lookahead_bytes", 16 * 1024 * 1024)]


class ReplicationSlave:
    def __init__(self, name: str, slave_id: int, store, config: HaConfig, clock: Clock,
                 master_address: Callable[[], Awaitable[str | None]], retry_interval_ms: int = 1000):
        self.name, self.slave_id, self.store, self.config, self.clock = name, slave_id, store, config, clock
        self.master_address = master_address
        self.retry_interval_ms = retry_interval_ms
        self.settings = SlaveSettings(slave_id, config.sync_from_last_file, config.async_learner,
                                      config.ha_send_heartbeat_interval_ms, config.ha_housekeeping_interval_ms)
        self.session: SlaveSession | None = None
        self.connected_to = ""
        self.last_close = ""
        self.acked_offset = 0
        self._ack_target = 0
        self._ack_wanted = asyncio.Event()
        self._task: asyncio.Task | None = None
        store.read_limit = lambda: store.confirm_offset

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"ha-slave-{self.name}-{self.slave_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            address = await self.master_address()
            if address:
                try:
                    await self._replicate(address)
                except grpc.aio.AioRpcError as failure:
                    self._closed(f"RPC_FAILED: {failure.code().name} {failure.details()}")
                except StoreError as failure:
                    self._closed(f"STORE_FAILED: {failure}")
            await asyncio.sleep(self.retry_interval_ms / 1000)

    def _closed(self, reason: str) -> None:
        if reason != self.last_close:
            log.warning("%s-%d: replication from %s stopped: %s", self.name, self.slave_id,
                        self.connected_to or "master", reason)
        self.last_close = reason
        self.connected_to = ""

    # --- one stream ------------------------------------------------------------------------------
    async def _replicate(self, address: str) -> None:
        store = self.store
        session = SlaveSession(self.settings, store.epochs.history, store.commit_log_min_offset,
                               store.commit_log_max_offset, store.confirm_offset)
        self.session = session
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
            call = pb_grpc.HaServiceStub(channel).Replicate(metadata=((BROKER_METADATA_KEY, self.name),))
            self.connected_to = address
            self._ack_target = 0
            acks = asyncio.create_task(self._send_acks(call))
            ticker = asyncio.create_task(self._tick(session, call))
            try:
                await self._write(call, session.connected(self.clock.now_ms()))
                await self._receive(call, session)
            finally:
                for task in (acks, ticker):
                    task.cancel()
                await asyncio.gather(acks, ticker, return_exceptions=True)
                call.cancel()
                if session.state is not SlaveState.READY:
                    session.connection_lost()
                self._closed((session.last_close or CloseReason.CONNECTION_LOST).value)

    async def _receive(self, call, session: SlaveSession) -> None:
        while True:
            frame = await call.read()
            if frame is grpc.aio.EOF:
                session.connection_lost()
                return
            message = master_frame_from_proto(frame)
            now = self.clock.now_ms()
            if message is None:
                out = session.connection_lost(CloseReason.BAD_BATCH)
            elif isinstance(message, MasterHandshake):
                was_empty = self.store.commit_log_max_offset == self.store.commit_log_min_offset
                out = session.on_master_handshake(message, now)
                if out.closed is None and was_empty and session.max_offset != self.store.commit_log_max_offset:
                    log.info("%s-%d: empty log starts at the master's offset %d", self.name, self.slave_id,
                             session.max_offset)
                    self.store.start_empty_at(session.max_offset)
            else:
                out = session.on_batch(message, now)
            await self._carry_out(out, call)
            if out.closed is not None:
                return

    async def _carry_out(self, out: SlaveOutput, call) -> None:
        store = self.store
        if out.truncate_to is not None:
            log.warning("%s-%d: truncating the commit log from %d to %d (consistent point with the master)",
                        self.name, self.slave_id, store.commit_log_max_offset, out.truncate_to)
            store.truncate(out.truncate_to)
        if out.epochs is not None:
            store.epochs.replace(out.epochs)
        if out.append is not None:
            store.append_raw(out.append.start_offset, out.append.payload, out.append.index)
        if out.confirm_offset is not None:
            store.set_confirm_offset(out.confirm_offset)
        await self._write(call, out)

    async def _write(self, call, out: SlaveOutput) -> None:
        for message in out.send:
            if isinstance(message, SlaveHandshake):
                await call.write(slave_frame_to_proto(message))
            else:
                self._ack_target = max(self._ack_target, message.max_offset)
                self._ack_wanted.set()

    async def _send_acks(self, call) -> None:
        """One writer of acks: the newest target, after its fdatasync under SYNC_FLUSH."""
        while True:
            await self._ack_wanted.wait()
            self._ack_wanted.clear()
            target = self._ack_target
            if self.store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
                await self.store.wait_flushed(target)
            await call.write(slave_frame_to_proto(SlaveAck(target)))
            self.acked_offset = target

    async def _tick(self, session: SlaveSession, call) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            out = session.tick(self.clock.now_ms())
            if out.closed is not None:
                call.cancel()
                return
            await self._write(call, out)

    # --- status ----------------------------------------------------------------------------------
    def status(self) -> dict:
        session = self.session
        return {"brokerName": self.name, "role": "SLAVE", "slaveId": self.slave_id,
                "state": session.state.value if session else SlaveState.READY.value,
                "masterAddress": self.connected_to, "lastClose": self.last_close,
                "maxOffset": self.store.commit_log_max_offset, "minOffset": self.store.commit_log_min_offset,
                "queueOffsetTotal": queue_offset_total(self.store),
                "ackedOffset": self.acked_offset, "confirmOffset": self.store.confirm_offset,
                "epochs": [list(pair) for pair in self.store.epochs.history.pairs()]}
