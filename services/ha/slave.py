"""The slave's side of replication for one broker: connect, handshake, copy, ack.

Rules:

* The master container's internal address is asked for on every (re)connection:
  ``haMasterAddress`` when configured, else the one the nameserver returns to the slave's
  registration.  ``HaService.Locate`` there names the container's replication port
  (``haListenPort``), and the slave connects to it (framing in services/ha/wire.py), each step
  within ``haConnectTimeoutMillis``.  A failed or closed connection is retried after
  ``haConnectRetryInterval`` (cut short by :meth:`ReplicationSlave.wake`: a returning master
  offered itself, pre-online); every close is logged with its reason (a master's refusal with
  the master's words).  A master whose epoch is older than the one the controller announced
  (``known_master_epoch``) is fenced.
* A pipeline on three threads: batch N+2 arrives (the link's thread) while N+1 is checked
  on the event loop (``MessageStore.stage_raw``) and N is written by the writer thread.
  Runs are committed in order as their writes finish; at most ``haMaxWritesInFlight``
  wait.  A truncation or an epoch change first waits for every write; a failed write
  abandons the runs staged after the log's end and closes the connection.  A store that
  cannot write its consume queues (a full disk) holds the entries of the runs committed and
  refuses the next run (DISK_FULL): the connection closes with one ``STORE_FAILED`` line and
  is made again every ``haConnectRetryInterval`` until the store writes again; nothing
  copied is lost (store.held_entries) and the master drops this slave from the
  SyncStateSet meanwhile.
* Each output of :class:`ha.replication.slave.SlaveSession` is carried out in its order:
  truncate (physical, fsynced, consume queues repaired), persist the epoch history
  (fsynced), append the payload, set the confirm offset, then send.  An empty slave whose
  resume point is not its own start first moves its empty log there
  (``MessageStore.start_empty_at``).
* The session's ``next_deadline_ms()`` wakes the driver for acks and the silence check;
  its deadlines are on the monotonic clock, as the master's are (on the wall clock, a
  clock set back an hour hid a hung master for that hour).
  Consumers of the slave read up to its confirm offset (the store's read limit).
* ``copy_caught_up``: whether the last connection that showed it (``SlaveSession.caught_up``)
  found the local copy holding everything its master made visible; False in a new process
  until a master shows it, and kept when the connection closes (a master that dies leaves
  the copy as caught up as it last was).  Acting master reads it (``ha.acting.special_services``).
* Acks are sent by one task, coalesced: an ack never reports an offset before it is
  committed, nor under SYNC_FLUSH before it is fdatasynced, while the stream keeps
  receiving (the flush of one batch overlaps the copy of the next).  While an fdatasync
  lasts longer than ``haSendHeartbeatInterval``, an ack of the durable offset goes out every
  interval, so a slow disk does not look like a silent slave.
* The master's silence is measured from its last byte received (the link reports every
  receive), not its last frame parsed behind the write pipeline.
"""
from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Awaitable, Callable

import grpc

from ha.replication.config import HaConfig
from ha.replication.messages import MasterHandshake, SlaveAck, SlaveHandshake, TransferBatch
from ha.replication.slave import CloseReason, SlaveOutput, SlaveSession, SlaveSettings, SlaveState
from proto import ha_pb2 as pb
from proto import ha_pb2_grpc as pb_grpc
from scheduler.clock import Clock
from services.ha.converters import Refused, decode_master_frame, queue_offset_total, slave_frame_to_proto
from services.ha.link_auth import prove_to_master
from services.ha.wire import Link, WireError
from services.cluster_auth import internal_channel
from store.config import FlushDiskType
from store.errors import StoreError
from store.replica_index import StagedRun

log = logging.getLogger(__name__)


class ReplicationSlave:
    def __init__(self, name: str, slave_id: int, store, config: HaConfig, clock: Clock,
                 master_address: Callable[[], Awaitable[str | None]], known_master_epoch: int = 0,
                 on_change: Callable[[], None] = lambda: None,
                 on_master_metadata: Callable[[], None] = lambda: None,
                 on_reads: Callable[[int], None] | None = None):
        """``on_change()`` after every connection to a master and every close;
        ``on_master_metadata()`` when the master's topics or groups changed (its frames say so);
        ``on_reads(confirm_offset)`` when the confirm offset moved: the replica moves the read
        limit (None: to the confirm offset)."""
        self.name, self.slave_id, self.store, self.config, self.clock = name, slave_id, store, config, clock
        self.master_address = master_address
        self.known_master_epoch = known_master_epoch
        self._on_change = on_change
        self._on_master_metadata = on_master_metadata
        self._master_metadata = 0
        self.settings = SlaveSettings(slave_id, config.sync_from_last_file, config.async_learner,
                                      config.ha_send_heartbeat_interval_ms, config.ha_housekeeping_interval_ms)
        self.session: SlaveSession | None = None
        self.connected_to = ""    # the master's replication port, while connected
        self.connected_via = ""   # the internal address that port was located at, while connected
        self.last_close = ""
        self.acked_offset = 0
        self._ack_target = 0
        self._ack_wanted = asyncio.Event()
        self._refused = ""
        self._writer: ThreadPoolExecutor | None = None
        self._writes: deque[tuple[StagedRun, asyncio.Future]] = deque()
        self._write_failure: BaseException | None = None
        self._committed = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._link: Link | None = None
        self.master_client_endpoint = ""   # the master container's client endpoint for this group (Locate)
        self._wake = asyncio.Event()
        self.offered_master = ""  # a master in pre-online told us where it is (OfferMaster)
        self.copy_caught_up = False  # the copy held all its master showed, as a connection last said
        self._on_reads = on_reads or store.set_read_limit
        self._on_reads(store.confirm_offset)

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="ha-write")
        self._task = asyncio.create_task(self._run(), name=f"ha-slave-{self.name}-{self.slave_id}")

    def change_master_epoch(self, epoch: int) -> None:
        """The controller announced ``epoch`` for the same master: fence older masters with it."""
        self.known_master_epoch = max(self.known_master_epoch, epoch)
        if self.session is not None:
            self.session.change_master_epoch(epoch)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self._drain()
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None

    async def _run(self) -> None:
        while True:
            address = await self.master_address()
            if address:
                try:
                    await self._replicate(address)
                except grpc.aio.AioRpcError as failure:
                    self._closed(f"LOCATE_FAILED: {failure.code().name} {failure.details()}")
                except (OSError, WireError) as failure:
                    self._closed(f"CONNECTION_FAILED: {failure}")
                except StoreError as failure:
                    self._closed(f"STORE_FAILED: {failure}")
            await self._pause()

    async def _pause(self) -> None:
        """The pause between connections, ended early by :meth:`wake`."""
        waiter = asyncio.ensure_future(self._wake.wait())
        try:  # asyncio.wait, not asyncio.timeout: a cancellation must never turn into a timeout
            await asyncio.wait([waiter], timeout=self.config.ha_connect_retry_interval_ms / 1000)
        finally:
            waiter.cancel()
        self._wake.clear()

    def offer_master(self, address: str) -> str:
        """A returning master in pre-online says where it is (its container's internal address):
        used when neither ``haMasterAddress`` nor the nameserver names one; connect now if
        waiting between connections.  Returns this slave's replication state."""
        if address != self.offered_master:
            log.info("%s-%d: master offered itself at %s", self.name, self.slave_id, address)
        self.offered_master = address
        self._wake.set()
        return self.state

    @property
    def state(self) -> str:
        session = self.session
        return session.state.value if session else SlaveState.READY.value

    def _closed(self, reason: str) -> None:
        if reason != self.last_close:
            log.warning("%s-%d: replication from %s stopped: %s", self.name, self.slave_id,
                        self.connected_to or "master", reason)
        self.last_close = reason
        self.connected_to = self.connected_via = ""
        self._on_change()

    # --- one connection -------------------------------------------------------------------------
    async def _replicate(self, address: str) -> None:
        host, port = await self._locate(address)
        loop = asyncio.get_running_loop()
        sock = await loop.run_in_executor(None, socket.create_connection, (host, port),
                                          self.config.ha_connect_timeout_ms / 1000)
        link = Link(sock)
        store = self.store
        session = SlaveSession(self.settings, store.epochs.history, store.commit_log_min_offset,
                               store.commit_log_max_offset, store.confirm_offset, self.known_master_epoch)
        link.on_received = lambda: session.heard(self.clock.monotonic_ms())  # silence: from the last byte
        self._link = link
        self.session = session
        self.connected_to = f"{host}:{port}"
        self.connected_via = address   # the master's internal (admin) address it was located at
        self._on_change()
        self._ack_target = 0
        self._ack_wanted.clear()  # a wish left by the last connection (its writer was cancelled) is void
        hello = session.connected(self.clock.monotonic_ms())
        ticker = asyncio.create_task(self._tick(session, link))
        acks = None
        try:
            await link.send_preamble()
            await prove_to_master(link)  # the cluster secret, when one is installed
            await self._write(link, hello)
            acks = asyncio.create_task(self._send_acks(link))  # after the handshake: it is the first frame
            await self._receive(link, session)
        except StoreError as failure:  # a full disk: copy nothing until the store writes again
            self._write_failure = failure
        finally:
            tasks = [task for task in (acks, ticker) if task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._link = None
            await link.aclose()
            await self._drain()
            if session.state is not SlaveState.READY:
                session.connection_lost()
            failure = f"STORE_FAILED: {self._write_failure}" if self._write_failure else ""
            self._write_failure = None
            self._closed(failure or self._refused or (session.last_close or CloseReason.CONNECTION_LOST).value)

    async def _locate(self, address: str) -> tuple[str, int]:
        """The master container's replication port for this group (HaService.Locate)."""
        # a subchannel of its own: gRPC shares subchannels between channels to one address, and a
        # shared one that failed for a while (the master was down) waits out its reconnect backoff
        # (seconds) before it tries again, though the master is back
        async with internal_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
            reply = await pb_grpc.HaServiceStub(channel).Locate(pb.LocateRequest(broker_name=self.name),
                                                                timeout=self.config.ha_connect_timeout_ms / 1000)
        if not 0 < reply.ha_port < 65536:
            raise WireError(f"Locate answered port {reply.ha_port}")
        self.master_client_endpoint = reply.client_endpoint
        return address.rsplit(":", 1)[0], reply.ha_port

    async def _receive(self, link: Link, session: SlaveSession) -> None:
        """Frames in order; the next one is received (by the link's thread) while this one is
        checked and written."""
        self._refused = ""
        pending = asyncio.ensure_future(link.receive())
        try:
            while True:
                got = await pending
                if got is None:
                    session.connection_lost()
                    return
                pending = asyncio.ensure_future(link.receive())
                out = self._on_frame(decode_master_frame(*got), session)
                await self._carry_out(out, link)
                if out.closed is not None:
                    return
        finally:
            pending.cancel()

    def _on_frame(self, message, session: SlaveSession) -> SlaveOutput:
        now = self.clock.monotonic_ms()
        if message is None:
            return session.connection_lost(CloseReason.BAD_BATCH)
        if isinstance(message, Refused):
            self._refused = f"REFUSED: {message.reason}"
            return session.connection_lost()
        if isinstance(message, MasterHandshake):
            was_empty = self.store.commit_log_max_offset == self.store.commit_log_min_offset
            out = session.on_master_handshake(message, now)
            if out.closed is None and was_empty and session.max_offset != self.store.commit_log_max_offset:
                log.info("%s-%d: empty log starts at the master's offset %d", self.name, self.slave_id,
                         session.max_offset)
                self.store.start_empty_at(session.max_offset)
            self._note_caught_up(session)
            return out
        if message.metadata_version and message.metadata_version != self._master_metadata:
            self._master_metadata = message.metadata_version
            self._on_master_metadata()
        out = session.on_batch(message, now)
        self._note_caught_up(session)
        return out

    def _note_caught_up(self, session: SlaveSession) -> None:
        if session.caught_up is None or session.caught_up == self.copy_caught_up:
            return
        self.copy_caught_up = session.caught_up
        log.debug("%s-%d: the copy %s its master (offset %d)", self.name, self.slave_id,
                 "caught up with" if session.caught_up else "is behind", session.max_offset)

    async def _carry_out(self, out: SlaveOutput, link: Link) -> None:
        store = self.store
        if out.truncate_to is not None or out.epochs is not None:
            await self._drain()  # the epoch file never names bytes a crash could take back
        if out.truncate_to is not None:
            log.warning("%s-%d: truncating the commit log from %d to %d (consistent point with the master)",
                        self.name, self.slave_id, store.commit_log_max_offset, out.truncate_to)
            store.truncate(out.truncate_to)
        if out.epochs is not None:
            store.epochs.replace(out.epochs)
        if out.append is not None:
            await self._stage(out.append, link)
        if out.confirm_offset is not None:
            store.set_confirm_offset(out.confirm_offset)
            self._on_reads(out.confirm_offset)
        await self._write(link, out)

    # --- the write pipeline ------------------------------------------------------------------------
    async def _stage(self, batch: TransferBatch, link: Link) -> None:
        run = self.store.stage_raw(batch.start_offset, batch.payload, batch.index)
        if not self._writes and run.end - run.start <= self.config.ha_inline_write_max_bytes:
            self._write_inline(run, link)  # a page-cache write of a few KiB: the thread hand-off cost more
            return
        future = asyncio.get_running_loop().run_in_executor(self._writer, run.write)
        self._writes.append((run, future))
        future.add_done_callback(lambda _: self._commit_written(link))
        if len(self._writes) > self.config.ha_max_writes_in_flight:
            await asyncio.wait([self._writes[0][1]])

    def _write_inline(self, run: StagedRun, link: Link) -> None:
        """Write and commit ``run`` on the loop (no write is in flight: the order holds)."""
        future = asyncio.get_running_loop().create_future()
        try:
            run.write()
        except Exception as failure:  # noqa: BLE001 - as the writer thread's: the run is abandoned, the link closed
            future.set_exception(failure)
        else:
            future.set_result(None)
        self._writes.append((run, future))
        self._commit_written(link)

    def _commit_written(self, link: Link | None) -> None:
        """Event loop: commit the runs whose writes finished, in staging order."""
        while self._writes and self._writes[0][1].done():
            run, future = self._writes.popleft()
            failure = future.exception() if not future.cancelled() else asyncio.CancelledError()
            if failure is not None:
                log.error("%s-%d: writing replicated bytes at %d failed: %s", self.name, self.slave_id, run.start, failure)
                self._write_failure = failure
                self._writes.clear()  # later runs were checked against this one: all go
                self.store.abandon_staged()
                if link is not None:
                    link.shutdown()
                return
            try:
                self.store.commit_staged(run)
            except StoreError as error:  # the store closed under us: nothing more to commit
                log.warning("%s-%d: replicated run at %d not committed: %s", self.name, self.slave_id, run.start, error)
                self._writes.clear()
                return
            self._committed.set()

    async def _drain(self) -> None:
        """Wait for every write in flight and commit it."""
        if self._writes:
            await asyncio.wait([future for _, future in self._writes])
            self._commit_written(None)

    async def _write(self, link: Link, out: SlaveOutput) -> None:
        for message in out.send:
            if isinstance(message, SlaveHandshake):
                await link.send(slave_frame_to_proto(message, self.name).SerializeToString())
            else:
                self._ack_target = max(self._ack_target, message.max_offset)
                self._ack_wanted.set()

    async def _send_acks(self, link: Link) -> None:
        """One writer of acks: the newest target, after its fdatasync under SYNC_FLUSH."""
        first = True
        while True:
            await self._ack_wanted.wait()
            self._ack_wanted.clear()
            target = self._ack_target
            while self.store.commit_log_max_offset < target:  # still being written
                self._committed.clear()
                await self._committed.wait()
            if self.store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH:
                await self._flushed(link, target, keepalive=not first)
            await link.send(slave_frame_to_proto(SlaveAck(target)).SerializeToString())
            self.acked_offset, first = target, False

    async def _flushed(self, link: Link, target: int, keepalive: bool) -> None:
        """Wait for the fdatasync of ``target``.  Meanwhile, every heartbeat interval, the master
        hears an ack of what is durable already: a slow disk is not a silent slave (issue 24,
        defect 6: on a busy machine an fdatasync took seconds, the heartbeat acks waited behind
        it and the master closed the slave as SLAVE_SILENT).  Not before the connection's first
        ack: that one is the resume point."""
        flushed = asyncio.ensure_future(self.store.wait_flushed(target))
        try:
            while True:
                done, _ = await asyncio.wait([flushed], timeout=self.config.ha_send_heartbeat_interval_ms / 1000)
                if done:
                    flushed.result()
                    return
                if keepalive:
                    durable = min(self.store.flushed_offset, target)
                    await link.send(slave_frame_to_proto(SlaveAck(durable)).SerializeToString())
        finally:
            if not flushed.done():
                flushed.cancel()

    async def _tick(self, session: SlaveSession, link: Link) -> None:
        while True:
            deadline = session.next_deadline_ms()
            if deadline is None:  # back to READY: this connection is over
                return
            await asyncio.sleep(max(0.0, (deadline - self.clock.monotonic_ms()) / 1000))
            out = session.tick(self.clock.monotonic_ms())
            if out.closed is not None:
                link.shutdown()
                return
            await self._write(link, out)

    # --- status ----------------------------------------------------------------------------------
    def status(self) -> dict:
        return {"brokerName": self.name, "role": "SLAVE", "slaveId": self.slave_id,
                "state": self.state,
                "masterAddress": self.connected_to, "lastClose": self.last_close, "offeredMaster": self.offered_master,
                "maxOffset": self.store.commit_log_max_offset, "minOffset": self.store.commit_log_min_offset,
                "queueOffsetTotal": queue_offset_total(self.store),
                "ackedOffset": self.acked_offset, "confirmOffset": self.store.confirm_offset,
                "epochs": [list(pair) for pair in self.store.epochs.history.pairs()]}
