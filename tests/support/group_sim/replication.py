"""The replication half of a simulated broker: what services/ha/master.py and slave.py do
around ha.replication's cores, without asyncio or sockets.

Rules (the drivers' order, restated here because it lives in the drivers, not in a core):

* Master: each :class:`MasterGroupOutput` is carried out in field order: keep the confirm
  offset, propose the SyncStateSet to the controller, answer the acknowledged and timed-out
  puts, close connections (and tell the core they ended), wake senders.  Batches are read
  from the written log (before the master's own fdatasync), one epoch each.
* Slave: each :class:`SlaveOutput` in field order: truncate (durable), persist the epoch
  history, append, keep the confirm offset, send; an ack leaves only once the bytes it
  reports are durable (SYNC_FLUSH), which is why acks wait for :meth:`flushed`.
"""
from __future__ import annotations

from ha.replication.master_group import MasterGroupOutput, MasterLog
from ha.replication.messages import MasterHandshake, SlaveAck, SlaveHandshake, TransferBatch
from ha.replication.slave import SlaveOutput, SlaveSession, SlaveState
from ha.replication.transfer import BatchPlan
from ha.controller.requests import AlterSyncStateSet
from tests.support.group_sim import records
from tests.support.group_sim.controller import GROUP, Call
from tests.support.group_sim.network import CONTROLLER, Closed

BATCHES_PER_STEP = 8


class MasterSide:
    """Mixed into SimBroker: ``group``, ``tokens`` (connection -> token), ``waits``."""

    def master_log(self) -> MasterLog:
        disk = self.disk
        return MasterLog(disk.epochs, 0, disk.end, disk.durable, 0)

    def carry_out(self, out: MasterGroupOutput) -> None:
        if self.group is None:
            return
        if out.confirm_offset is not None:
            self.disk.confirm = out.confirm_offset
        if out.propose is not None:
            self.proposal_serial += 1
            self.proposal_sent_ms = self.now_ms
            request = AlterSyncStateSet(GROUP, self.id, self.local.master_epoch, out.propose.members,
                                        out.propose.based_on_epoch)
            self.net.send(self.id, CONTROLLER, Call(request, f"alter:{self.proposal_serial}"))
        for request_id in out.acked:
            self.answer_put(self.waits.pop(request_id, None), True)
        for request_id in out.timed_out:
            self.answer_put(self.waits.pop(request_id, None), False)
        for token, _reason in out.close:
            self.end_stream(token, tell_peer=True)

    def end_stream(self, token: int, tell_peer: bool) -> None:
        connection = next((c for c, t in self.tokens.items() if t == token), None)
        if connection is None:
            return
        del self.tokens[connection]
        slave_id = self.group.slave_id_of(token)
        if tell_peer and slave_id is not None:
            self.net.close(self.id, slave_id, connection)
        self.carry_out(self.group.disconnected(token, self.master_log(), self.now_ms))

    def on_slave_frame(self, src: int, connection: int, payload) -> None:
        if self.group is None:
            if not isinstance(payload, Closed):
                self.net.close(self.id, src, connection)
            return
        if isinstance(payload, SlaveHandshake):
            token, reply, out = self.group.connect(payload, self.master_log(), self.now_ms)
            self.tokens[connection] = token
            self.net.send(self.id, src, reply, connection)
            self.carry_out(out)
            for old_connection, old_token in list(self.tokens.items()):
                if old_token not in self.group.connections:
                    del self.tokens[old_connection]
            return
        token = self.tokens.get(connection)
        if token is None:
            return
        if isinstance(payload, Closed):
            self.end_stream(token, tell_peer=False)
        elif isinstance(payload, SlaveAck):
            self.carry_out(self.group.on_ack(token, payload, self.master_log(), self.now_ms))

    def pump(self) -> None:
        """Send what each slave connection has due: batches, a heartbeat, or a close."""
        for connection, token in list(self.tokens.items()):
            for _ in range(BATCHES_PER_STEP):
                if self.group is None or self.tokens.get(connection) != token:
                    break
                log = self.master_log()
                plan = self.group.next_batch(token, log, self.now_ms)
                if plan is None:
                    break
                if isinstance(plan, MasterGroupOutput):
                    self.carry_out(plan)
                    break
                self.send_batch(connection, token, plan, log)
                if plan.max_bytes == 0:
                    break

    def send_batch(self, connection: int, token: int, plan: BatchPlan, log: MasterLog) -> None:
        payload = records.whole_records(self.disk.log, plan.start_offset, plan.max_bytes) if plan.max_bytes else b""
        batch = self.group.sent(token, plan, payload, (), log, self.now_ms)
        self.net.send(self.id, self.group.slave_id_of(token), batch, connection)


class SlaveSide:
    """Mixed into SimBroker: ``session``, ``slave_connection``, ``ack_target``."""

    def connect_to_master(self) -> None:
        disk = self.disk
        self.session = SlaveSession(self.slave_settings, disk.epochs, 0, disk.end, disk.confirm,
                                    self.local.master_epoch)
        self.slave_connection = self.net.connect()
        self.ack_target, self.ack_pending = 0, False
        self.carry_out_slave(self.session.connected(self.now_ms))

    def close_slave_connection(self, tell_peer: bool = True) -> None:
        if self.slave_connection and tell_peer and self.local.master_id is not None:
            self.net.close(self.id, self.local.master_id, self.slave_connection)
        self.slave_connection = 0
        if self.session is not None and self.session.state is not SlaveState.READY:
            self.session.connection_lost()
        self.reconnect_at_ms = self.now_ms + self.config.ha_connect_retry_interval_ms

    def on_master_frame(self, connection: int, payload) -> None:
        if self.session is None or connection != self.slave_connection:
            return
        if isinstance(payload, Closed):
            self.close_slave_connection(tell_peer=False)
        elif isinstance(payload, MasterHandshake):
            self.carry_out_slave(self.session.on_master_handshake(payload, self.now_ms))
        elif isinstance(payload, TransferBatch):
            self.carry_out_slave(self.session.on_batch(payload, self.now_ms))

    def carry_out_slave(self, out: SlaveOutput) -> None:
        disk = self.disk
        if out.truncate_to is not None:
            self.sim.on_truncate(self, out.truncate_to)
            disk.truncate(out.truncate_to)
        if out.epochs is not None:
            disk.epochs = out.epochs
        if out.append is not None:
            disk.append(bytes(out.append.payload))
        if out.confirm_offset is not None:
            disk.confirm = out.confirm_offset
        for message in out.send:
            if isinstance(message, SlaveHandshake):
                self.net.send(self.id, self.local.master_id, message, self.slave_connection)
            else:
                self.ack_target = max(self.ack_target, message.max_offset)
                self.ack_pending = True
        if out.closed is not None:
            self.close_slave_connection()

    def slave_step(self) -> None:
        session = self.session
        if session is None:
            return
        if session.state is SlaveState.READY:
            if self.now_ms >= self.reconnect_at_ms:
                self.connect_to_master()
            return
        deadline = session.next_deadline_ms()
        if deadline is not None and self.now_ms >= deadline:
            self.carry_out_slave(session.tick(self.now_ms))
        self.send_ack()

    def send_ack(self) -> None:
        """The coalesced ack: the newest target, once it is durable (SYNC_FLUSH)."""
        if self.ack_pending and self.slave_connection and self.disk.durable >= self.ack_target:
            self.net.send(self.id, self.local.master_id, SlaveAck(self.ack_target), self.slave_connection)
            self.ack_pending = False
