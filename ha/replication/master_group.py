"""The master's replica group as one pure core: sessions, SyncStateSet, put waits, confirm offset.

Rules (reference 2.8 and 4.7; upstream #5663, #6662, #6728):

* One :class:`MasterGroup` per master broker.  Inputs are method calls that carry ``now_ms``
  (monotonic) and :class:`MasterLog`, the master's log as it stands; every change comes back
  as a :class:`MasterGroupOutput` that the driver carries out in field order: persist the
  confirm offset (and wake readers), propose the SyncStateSet, complete the acknowledged
  puts, fail the timed-out ones, close connections, wake senders.  ``next_deadline_ms()``
  is when :meth:`tick` can next change anything; the driver sleeps until then.
* Each slave connection has a token and a :class:`ha.replication.master.MasterSession`; a
  newer connection of the same slave id replaces (closes) the older one.
* The SyncStateSet has one rule, :class:`ha.replication.sync_state.SyncStateTracker`'s: a
  disconnected member is proposed out at once; a connected member not caught up for
  ``haMaxTimeSlaveNotCatchup`` is proposed out at the next tick; a connected non-learner
  whose ack reaches the confirm offset and the last epoch's start is proposed in.  Until a
  proposal is applied, acks and the confirm offset use the union of the applied and the
  proposed sets (#5663).
* Without a controller a proposal is applied at once.  In controller mode it goes out as
  :class:`Proposal` (AlterSyncStateSet, fenced by the set's epoch); one is in flight at a
  time; a refusal keeps the union and proposes again after ``retry_ms``; an applied set
  whose epoch is not newer than ours is ignored (an old reply).
* Puts (SYNC_MASTER): controller mode decides by the set's size (``minInSyncReplicas``,
  ``allAckInSyncStateSet``, else ``inSyncReplicas``), otherwise by RIP-34's in-sync count;
  without a controller a slave's disconnection re-decides the puts already waiting the same
  way (their need only goes down), so a put made just before its slave died is acknowledged
  with the degraded count instead of failing at ``slaveTimeout``.
  The master counts itself only for offsets it holds durably (``MasterLog.durable_offset``:
  fdatasynced under SYNC_FLUSH).  A wait ends acknowledged, or timed out after
  ``slaveTimeout``; at most ``haMaxPendingAcks`` wait.
* Time against a slave is the master's awake time (:mod:`ha.replication.silence`): the group
  looks every ``haSendHeartbeatInterval`` (at least four times per ``haHousekeepingInterval``);
  a look late by more than half that was the master's own pause (its loop stalled), counted
  neither as a slave's silence (SLAVE_SILENT) nor as its lag (``haMaxTimeSlaveNotCatchup``),
  and it closes and shrinks nothing (issue 24, defect 6).  A slave is heard on any byte.
* What consumers may read: the master's durable offset while the set is only the master
  (not its max offset: slaves get this as their confirm offset, and bytes the master has not
  fdatasynced are neither acknowledged nor safe; found by the failure simulation),
  otherwise the confirm offset, which never goes back.
"""
from __future__ import annotations

from dataclasses import dataclass

from ha.epochs import EpochHistory
from ha.replication.master import MasterCloseReason, MasterLogView, MasterSession, MasterSettings
from ha.replication.messages import MasterHandshake, QueueSlice, SlaveAck, SlaveHandshake, TransferBatch
from ha.replication.quorum import (AckNow, AckWaits, PendingAck, QuorumRejection, WaitForAcks,
                                   decide_controller_mode, decide_quorum_mode)
from ha.replication.config import HaConfig
from ha.replication.silence import OwnPauses, look_interval_ms
from ha.replication.sync_state import SyncStateTracker
from ha.replication.transfer import BatchPlan


@dataclass(frozen=True)
class MasterLog:
    """The master's commit log as it stands when an input arrives."""
    epochs: EpochHistory
    min_offset: int
    max_offset: int
    durable_offset: int      # the master counts as a replica up to here (flushed under SYNC_FLUSH)
    last_file_start: int

    @property
    def last_epoch_start(self) -> int:
        return self.epochs.last.start_offset if self.epochs.last else 0


@dataclass(frozen=True)
class Proposal:
    """AlterSyncStateSet: replace the set of epoch ``based_on_epoch`` by ``members``."""
    members: frozenset[int]
    based_on_epoch: int


@dataclass(frozen=True)
class MasterGroupOutput:
    confirm_offset: int | None = None                          # persist, then wake readers
    propose: Proposal | None = None                            # to the controller
    acked: tuple[int, ...] = ()                                # put waits now satisfied
    timed_out: tuple[int, ...] = ()                            # put waits past slaveTimeout
    close: tuple[tuple[int, str], ...] = ()                    # (connection token, reason)
    wake: tuple[int, ...] = ()                                 # connections with something due

    def __or__(self, other: "MasterGroupOutput") -> "MasterGroupOutput":
        return MasterGroupOutput(
            other.confirm_offset if other.confirm_offset is not None else self.confirm_offset,
            other.propose or self.propose, self.acked + other.acked, self.timed_out + other.timed_out,
            self.close + other.close, self.wake + other.wake)


NOTHING = MasterGroupOutput()


@dataclass(frozen=True)
class GroupSettings:
    self_id: int
    controller_mode: bool
    ha: HaConfig
    retry_ms: int = 1000     # a refused or unanswered proposal is made again after this

    @property
    def session(self) -> MasterSettings:
        ha = self.ha
        return MasterSettings(ha.ha_transfer_batch_size, ha.ha_send_heartbeat_interval_ms,
                              ha.ha_housekeeping_interval_ms, ha.ha_max_epoch_entries,
                              coalesce_bytes=ha.ha_coalesce_bytes)


@dataclass
class _Connection:
    slave_id: int
    session: MasterSession


class MasterGroup:
    def __init__(self, settings: GroupSettings, sync_state_set: frozenset[int], sync_state_set_epoch: int,
                 confirm_offset: int, now_ms: int):
        self.settings = settings
        self.tracker = SyncStateTracker(settings.self_id, sync_state_set | {settings.self_id}, confirm_offset,
                                        settings.ha.ha_max_time_slave_not_catchup_ms, now_ms)
        self.sync_state_set_epoch = sync_state_set_epoch
        self.waits = AckWaits(settings.ha.ha_max_pending_acks)
        self.connections: dict[int, _Connection] = {}
        self._by_slave: dict[int, int] = {}
        self._next_token = 1
        self._next_request = 1
        self._in_flight: Proposal | None = None
        self._retry_at: int | None = None
        ha = settings.ha
        self.pauses = OwnPauses(look_interval_ms(ha.ha_send_heartbeat_interval_ms, ha.ha_housekeeping_interval_ms),
                                now_ms)

    # --- views -----------------------------------------------------------------------------------
    @property
    def sync_state_set(self) -> frozenset[int]:
        """The set acks and the confirm offset use (the union while a proposal is pending)."""
        return self.tracker.sync_state_set

    @property
    def applied_sync_state_set(self) -> frozenset[int]:
        return self.tracker.applied

    def visible_offset(self, log: MasterLog) -> int:
        if self.tracker.sync_state_set == frozenset({self.settings.self_id}):
            return log.durable_offset
        return self.tracker.confirm_offset

    def view(self, log: MasterLog) -> MasterLogView:
        return MasterLogView(log.epochs, log.min_offset, log.max_offset, log.last_file_start, self.visible_offset(log))

    # --- connections -----------------------------------------------------------------------------
    def connect(self, handshake: SlaveHandshake, log: MasterLog,
                now_ms: int) -> tuple[int, MasterHandshake, MasterGroupOutput]:
        """A slave's handshake: its token, the reply to send, and the connection it replaces."""
        session = MasterSession(self.settings.session, now_ms)
        reply = session.on_handshake(handshake, self.view(log), now_ms)
        assert not isinstance(reply, MasterCloseReason), reply
        token, self._next_token = self._next_token, self._next_token + 1
        out = NOTHING
        old = self._by_slave.get(handshake.slave_id)
        if old is not None:
            out = MasterGroupOutput(close=((old, "REPLACED"),))
            self.connections.pop(old, None)
        self.connections[token] = _Connection(handshake.slave_id, session)
        self._by_slave[handshake.slave_id] = token
        self.tracker.slave_connected(handshake.slave_id, handshake.async_learner)
        return token, reply, out

    def heard(self, token: int, now_ms: int) -> None:
        """Bytes of the slave on ``token`` arrived (a frame perhaps not parsed yet)."""
        connection = self.connections.get(token)
        if connection is not None:
            connection.session.heard(now_ms)

    def slave_id_of(self, token: int) -> int | None:
        connection = self.connections.get(token)
        return connection.slave_id if connection else None

    def session_of(self, token: int) -> MasterSession | None:
        connection = self.connections.get(token)
        return connection.session if connection else None

    def disconnected(self, token: int, log: MasterLog, now_ms: int) -> MasterGroupOutput:
        connection = self.connections.pop(token, None)
        if connection is None:
            return NOTHING
        connection.session.connection_lost()
        if self._by_slave.get(connection.slave_id) != token:
            return NOTHING
        del self._by_slave[connection.slave_id]
        before = self.tracker.confirm_offset
        proposal = self.tracker.slave_disconnected(connection.slave_id)
        if not self.settings.controller_mode:  # there the set shrinks when the controller says so
            decision = self.decide_put(log)
            if not isinstance(decision, QuorumRejection):
                self.waits.lower_to(decision.need if isinstance(decision, WaitForAcks) else 1)
        return self._news(self._after_change(proposal, before, log, now_ms), now_ms)

    def on_ack(self, token: int, ack: SlaveAck, log: MasterLog, now_ms: int) -> MasterGroupOutput:
        connection = self.connections.get(token)
        if connection is None:
            return NOTHING
        result = connection.session.on_ack(ack, self.view(log), now_ms)
        if isinstance(result, MasterCloseReason):
            return self._close(token, result.value)
        out = MasterGroupOutput(wake=(token,))
        if result is None:
            return out
        before = self.tracker.confirm_offset
        proposal = self.tracker.on_ack(connection.slave_id, result, log.durable_offset, log.last_epoch_start, now_ms)
        return self._news(out | self._after_change(proposal, before, log, now_ms), now_ms)

    def next_batch(self, token: int, log: MasterLog, now_ms: int) -> BatchPlan | MasterGroupOutput | None:
        """What to send on ``token`` now: a plan (bytes, or a heartbeat), a close, or nothing."""
        connection = self.connections.get(token)
        if connection is None:
            return None
        plan = connection.session.next_batch(self.view(log), now_ms)
        if isinstance(plan, MasterCloseReason):
            return self._close(token, plan.value)
        return plan

    def sent(self, token: int, plan: BatchPlan, payload, index: tuple[QueueSlice, ...], log: MasterLog,
             now_ms: int, metadata_version: int = 0) -> TransferBatch:
        connection = self.connections[token]
        batch = connection.session.sent(plan, payload, self.visible_offset(log), now_ms, index, metadata_version)
        self.tracker.on_transfer(connection.slave_id, log.max_offset, now_ms)
        return batch

    def metadata_changed(self) -> MasterGroupOutput:
        """The master's topics or groups changed: every connection sends news now."""
        for connection in self.connections.values():
            connection.session.heartbeat_now()
        return MasterGroupOutput(wake=tuple(self.connections))

    def _close(self, token: int, reason: str) -> MasterGroupOutput:
        return MasterGroupOutput(close=((token, reason),))

    # --- puts ------------------------------------------------------------------------------------
    def decide_put(self, log: MasterLog) -> AckNow | WaitForAcks | QuorumRejection:
        ha = self.settings.ha
        if self.settings.controller_mode:
            return decide_controller_mode(ha, len(self.tracker.sync_state_set))
        connected = sum(1 for p in self.tracker.slaves.values() if p.connected)
        in_sync = self.tracker.in_sync_slaves(log.max_offset, ha.ha_max_gap_not_in_sync)
        return decide_quorum_mode(ha, 1 + connected, in_sync)

    def wait(self, end_offset: int, need: int, log: MasterLog, now_ms: int) -> tuple[int, MasterGroupOutput] | QuorumRejection:
        """A put of bytes below ``end_offset`` waits for ``need`` replicas: its request id and
        the output (already acknowledged when the replicas hold it)."""
        request_id, self._next_request = self._next_request, self._next_request + 1
        rejection = self.waits.add(PendingAck(request_id, end_offset, need, now_ms + self.settings.ha.slave_timeout_ms))
        if rejection is not None:
            return rejection
        return request_id, self._resolve(log)

    def forget(self, request_id: int) -> None:
        self.waits.pending.pop(request_id, None)

    def log_grew(self, log: MasterLog, now_ms: int) -> MasterGroupOutput:
        """The master's durable offset moved: waits that counted on the master itself may end."""
        return self._news(self._resolve(log), now_ms)

    def _resolve(self, log: MasterLog) -> MasterGroupOutput:
        """Waits the replicas now satisfy.  The confirm offset is brought up to the master's
        durable offset first, so it is never below an acknowledged put: a slave joins the set
        only once it holds the confirm offset, and one that lagged an acknowledged put joined it
        when the confirm offset still stood where the last slave ack had left it (found by the
        failure simulation)."""
        before = self.tracker.confirm_offset
        self.tracker.recompute_confirm(log.durable_offset)
        confirm = MasterGroupOutput(confirm_offset=self.tracker.confirm_offset) \
            if self.tracker.confirm_offset != before else NOTHING
        if not self.waits.pending:
            return confirm
        durable = log.durable_offset

        def acked(offset: int) -> int:
            count = self.tracker.acked_replicas(offset, sync_state_set_only=False)
            return count if durable >= offset else count - 1

        def all_acked(offset: int) -> bool:
            return durable >= offset and self.tracker.all_members_acked(offset)

        done = self.waits.satisfied(acked, all_acked)
        return confirm | MasterGroupOutput(acked=tuple(done)) if done else confirm

    # --- the SyncStateSet and the controller ---------------------------------------------------
    def _after_change(self, proposal: frozenset[int] | None, confirm_before: int, log: MasterLog,
                      now_ms: int) -> MasterGroupOutput:
        out = NOTHING
        if proposal is not None:
            out = self._proposed(log, now_ms)
        if self.tracker.confirm_offset != confirm_before:
            out = out | MasterGroupOutput(confirm_offset=self.tracker.confirm_offset)
        return out | self._resolve(log)

    def _proposed(self, log: MasterLog, now_ms: int) -> MasterGroupOutput:
        if not self.settings.controller_mode:
            before = self.tracker.confirm_offset
            self.tracker.apply_sync_state_set(self.tracker.proposed, log.durable_offset)
            self.sync_state_set_epoch += 1
            changed = self.tracker.confirm_offset != before
            return MasterGroupOutput(confirm_offset=self.tracker.confirm_offset if changed else None)
        return self._maybe_send_proposal(now_ms)

    def _maybe_send_proposal(self, now_ms: int) -> MasterGroupOutput:
        proposed = self.tracker.proposed
        if proposed is None or self._in_flight is not None:
            return NOTHING
        if self._retry_at is not None and now_ms < self._retry_at:
            return NOTHING
        self._retry_at = None
        self._in_flight = Proposal(proposed, self.sync_state_set_epoch)
        return MasterGroupOutput(propose=self._in_flight)

    def applied(self, members: frozenset[int], epoch: int, log: MasterLog, now_ms: int) -> MasterGroupOutput:
        """The controller's set (a reply to our proposal, or a newer view): adopt it if newer."""
        if epoch <= self.sync_state_set_epoch or self.settings.self_id not in members:
            return NOTHING
        before = self.tracker.confirm_offset
        pending = self._still_holds(self.tracker.proposed, members)
        self.sync_state_set_epoch = epoch
        self._in_flight = None
        self.tracker.apply_sync_state_set(members, log.durable_offset, still_proposed=pending)
        out = NOTHING
        if self.tracker.proposed is not None:  # a newer change waits for its own round
            out = self._maybe_send_proposal(now_ms)
        if self.tracker.confirm_offset != before:
            out = out | MasterGroupOutput(confirm_offset=self.tracker.confirm_offset)
        return self._news(out | self._resolve(log), now_ms)

    def _still_holds(self, pending: frozenset[int] | None, members: frozenset[int]) -> frozenset[int] | None:
        """A proposal decided against an older set, re-decided against ``members``: a member of
        ``members`` it drops stays when it is connected again (the drop was its old connection's),
        so an expansion is not undone by a shrink decided before it (issue 24: [1, 2], [2], [1, 2]
        within 40 ms on a rejoin).  One not caught up is still dropped, at its deadline."""
        if pending is None:
            return None
        back = {m for m in members - pending
                if m != self.settings.self_id and (p := self.tracker.slaves.get(m)) is not None and p.connected}
        return pending | back

    def refused(self, now_ms: int) -> MasterGroupOutput:
        """The proposal in flight was refused or not answered: keep the union, retry later."""
        self._in_flight = None
        self._retry_at = now_ms + self.settings.retry_ms
        return NOTHING

    # --- time ------------------------------------------------------------------------------------
    def tick(self, log: MasterLog, now_ms: int) -> MasterGroupOutput:
        """Time passed.  A tick later than due was this master's own pause (its loop stalled,
        its process was not scheduled): neither a slave's silence nor its lag, so that time
        is not counted against them, and a tick late by more than half a look judges nobody
        (issue 24, defect 6)."""
        out = NOTHING
        expired = tuple(self.waits.expire(now_ms))
        if expired:
            out = out | MasterGroupOutput(timed_out=expired)
        pause = self.pauses.look(now_ms)
        if pause:
            self.tracker.excuse_pause(pause, now_ms)
        for token, connection in list(self.connections.items()):
            silent = connection.session.check_silence(now_ms)
            if silent is not None:
                out = out | self._close(token, silent.value)
                continue
            news = connection.session.news_due(now_ms)
            deadline = connection.session.deadline_ms()
            if news or (deadline is not None and now_ms >= deadline):
                out = out | MasterGroupOutput(wake=(token,))
        before = self.tracker.confirm_offset
        proposal = None if self.pauses.paused(pause) else self.tracker.check_shrink(now_ms)
        out = out | self._after_change(proposal, before, log, now_ms)
        if self.settings.controller_mode:
            out = out | self._maybe_send_proposal(now_ms)
        return self._news(out, now_ms)

    def _news(self, out: MasterGroupOutput, now_ms: int) -> MasterGroupOutput:
        """A moved confirm offset is news for every slave (its readers and checkpoint)."""
        if out.confirm_offset is not None:
            for connection in self.connections.values():
                connection.session.confirm_moved(out.confirm_offset, now_ms)
        return out

    def next_deadline_ms(self) -> int | None:
        deadlines = [self.pauses.deadline_ms()]   # a look every interval: a late one reveals our own pause
        if self.waits.pending:
            deadlines.append(self.waits.earliest_deadline_ms())
        for connection in self.connections.values():
            deadline = connection.session.deadline_ms()
            if deadline is not None:
                deadlines.append(deadline)
        shrink = self.tracker.shrink_deadline_ms()
        if shrink is not None:
            deadlines.append(shrink)
        if self._retry_at is not None and self.tracker.proposed is not None:
            deadlines.append(self._retry_at)
        return min(deadlines) if deadlines else None
