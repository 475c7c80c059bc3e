"""The master's side of one slave connection: handshake reply, resume point, batches.

Rules:

* The slave speaks first (its handshake); the master answers with its epoch history (at most
  ``haMaxEpochEntries``, newest kept), max and min offsets and its last file's start.
* The slave's first ack is its resume offset; it must lie in ``[min, max]`` of the master's
  log (REQUEST_OUT_OF_RANGE otherwise).  Later acks only report progress (returned to the
  driver for :class:`ha.replication.sync_state.SyncStateTracker`).
* Batches come from :func:`ha.replication.transfer.plan_batch` (one epoch each).  While the
  last batch sent is not acknowledged, the bytes written since wait for its ack and then go
  as one batch (``coalesce_bytes``, haCoalesceBytes), unless that many (or a full batch) are
  ready or a heartbeat interval passed since the last send: under load one batch and one ack
  carry many puts, not one each (a put's record was a batch of its own, and replication
  doubled the master's loop per single send); an idle link sends at once.  An empty
  batch (heartbeat) goes out when nothing was sent for the heartbeat interval, or
  ``confirm_news_ms`` after the confirm offset moved past the last one sent (an idle
  slave's readers and its checkpoint learn the confirm offset then, not a heartbeat
  interval later; under load the next batch carries it first and nothing extra goes out).
* A connection whose slave was not heard (any bytes) for the housekeeping interval of this
  side's awake time is closed (SLAVE_SILENT); a pause of the master's own process is not the
  slave's silence (:class:`ha.replication.silence.PeerSilence`).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ha.epochs import EpochHistory
from ha.replication.messages import (MasterHandshake, QueueSlice, SlaveAck, SlaveHandshake, TransferBatch,
                                     batch_crc)
from ha.replication.silence import PeerSilence
from ha.replication.transfer import BatchPlan, plan_batch


class MasterSessionState(str, Enum):
    WAIT_HANDSHAKE = "WAIT_HANDSHAKE"
    WAIT_FIRST_ACK = "WAIT_FIRST_ACK"
    TRANSFER = "TRANSFER"
    CLOSED = "CLOSED"


class MasterCloseReason(str, Enum):
    UNEXPECTED_MESSAGE = "UNEXPECTED_MESSAGE"
    REQUEST_OUT_OF_RANGE = "REQUEST_OUT_OF_RANGE"
    NO_EPOCH_FOR_OFFSET = "NO_EPOCH_FOR_OFFSET"
    SLAVE_SILENT = "SLAVE_SILENT"


@dataclass(frozen=True)
class MasterLogView:
    epochs: EpochHistory
    min_offset: int
    max_offset: int
    last_file_start: int
    confirm_offset: int


@dataclass(frozen=True)
class MasterSettings:
    batch_size_bytes: int = 1024 * 1024
    heartbeat_interval_ms: int = 5000
    housekeeping_interval_ms: int = 20_000
    max_epoch_entries: int = 1000
    confirm_news_ms: int = 20
    coalesce_bytes: int = 0   # 0: every write goes out at once, whatever is unacknowledged


class MasterSession:
    def __init__(self, settings: MasterSettings, now_ms: int):
        self.settings = settings
        self.state = MasterSessionState.WAIT_HANDSHAKE
        self.slave: SlaveHandshake | None = None
        self.position = 0
        self.ack_offset = -1    # no ack yet: the first, even of 0 (an empty log), is reported
        self.closed: MasterCloseReason | None = None
        self.silence = PeerSilence.for_intervals(settings.heartbeat_interval_ms, settings.housekeeping_interval_ms,
                                                 now_ms)
        self._last_send_ms = now_ms
        self._sent_confirm = -1
        self._news_at: int | None = None   # when the confirm offset's news goes out (if no batch did)
        self._news_due = False

    def on_handshake(self, message: SlaveHandshake, view: MasterLogView, now_ms: int) -> MasterHandshake | MasterCloseReason:
        if self.state is not MasterSessionState.WAIT_HANDSHAKE:
            return self._close(MasterCloseReason.UNEXPECTED_MESSAGE)
        self.silence.heard(now_ms)
        self.slave = message
        self.state = MasterSessionState.WAIT_FIRST_ACK
        pairs = view.epochs.pairs()[-self.settings.max_epoch_entries:]
        return MasterHandshake(pairs, view.max_offset, view.min_offset, view.last_file_start)

    def on_ack(self, ack: SlaveAck, view: MasterLogView, now_ms: int) -> int | MasterCloseReason | None:
        """The acked offset to report to the tracker (None: nothing to report)."""
        self.silence.heard(now_ms)
        if self.state is MasterSessionState.WAIT_FIRST_ACK:
            if not view.min_offset <= ack.max_offset <= view.max_offset:
                return self._close(MasterCloseReason.REQUEST_OUT_OF_RANGE)
            if plan_batch(view.epochs, ack.max_offset, view.max_offset, 1) is None:
                return self._close(MasterCloseReason.NO_EPOCH_FOR_OFFSET)
            self.position = ack.max_offset
            self.state = MasterSessionState.TRANSFER
        elif self.state is not MasterSessionState.TRANSFER:
            return self._close(MasterCloseReason.UNEXPECTED_MESSAGE)
        if ack.max_offset > self.ack_offset:
            self.ack_offset = ack.max_offset
            return ack.max_offset
        return None

    def next_batch(self, view: MasterLogView, now_ms: int) -> BatchPlan | MasterCloseReason | None:
        """What to read and send now: a plan with bytes, a heartbeat (max_bytes 0), or None."""
        if self.state is MasterSessionState.CLOSED:
            return None
        if self.check_silence(now_ms) is not None:
            return self.closed
        if self.state is not MasterSessionState.TRANSFER:
            return None
        plan = plan_batch(view.epochs, self.position, view.max_offset, self.settings.batch_size_bytes)
        if plan is None:
            return self._close(MasterCloseReason.NO_EPOCH_FOR_OFFSET)
        if plan.max_bytes == 0 and not self._news_due \
                and now_ms - self._last_send_ms < self.settings.heartbeat_interval_ms:
            return None
        if plan.max_bytes and self._coalescing(view.max_offset, now_ms):
            return None
        return plan

    def waits_for_ack(self, max_offset: int, now_ms: int) -> bool:
        """A write that moved the log's end to ``max_offset`` gives this connection nothing to
        send now: its bytes wait for the last batch's ack (the ack, enough bytes or the heartbeat
        deadline make it send; the driver need not wake the stream for each write)."""
        return self.state is MasterSessionState.TRANSFER and self._coalescing(max_offset, now_ms)

    def _coalescing(self, max_offset: int, now_ms: int) -> bool:
        """The bytes written since the last batch wait for its ack (see the module's rules)."""
        hold = min(self.settings.coalesce_bytes, self.settings.batch_size_bytes)   # a full batch goes
        return (hold > 0 and self.ack_offset < self.position and max_offset - self.position < hold
                and now_ms - self._last_send_ms < self.settings.heartbeat_interval_ms)

    def sent(self, plan: BatchPlan, payload: bytes | memoryview, confirm_offset: int, now_ms: int,
             index: tuple[QueueSlice, ...] = (), metadata_version: int = 0) -> TransferBatch:
        """Record that ``payload`` (read for ``plan``, its records indexed by ``index``) goes out
        now; returns the batch to send, with its CRC."""
        assert plan.start_offset == self.position and len(payload) <= plan.max_bytes, (plan, self.position)
        self.position += len(payload)
        self._last_send_ms = now_ms
        self._sent_confirm = max(self._sent_confirm, confirm_offset)
        self._news_at, self._news_due = None, False
        return TransferBatch(plan.start_offset, plan.epoch, plan.epoch_start_offset, confirm_offset, payload,
                             batch_crc(payload, index), index, metadata_version)

    def heard(self, now_ms: int) -> None:
        """Bytes of the slave arrived (perhaps part of a frame not parsed yet)."""
        self.silence.heard(now_ms)

    def check_silence(self, now_ms: int) -> MasterCloseReason | None:
        """A look at the slave's silence: SLAVE_SILENT (the session closes) or None."""
        if self.state is MasterSessionState.CLOSED:
            return None
        if self.silence.look(now_ms):
            return self._close(MasterCloseReason.SLAVE_SILENT)
        return None

    def confirm_moved(self, confirm_offset: int, now_ms: int) -> None:
        """The confirm offset is now ``confirm_offset``: unless a batch carries it first, a
        heartbeat does ``confirm_news_ms`` from now."""
        if confirm_offset > self._sent_confirm and self._news_at is None and not self._news_due:
            self._news_at = now_ms + self.settings.confirm_news_ms

    def news_due(self, now_ms: int) -> bool:
        """At a tick: True once the confirm offset's news is due (the next :meth:`next_batch`
        sends it).  Due once, so a stream whose send is blocked is not woken again and again."""
        if self._news_at is None or now_ms < self._news_at:
            return False
        self._news_at, self._news_due = None, True
        return True

    def heartbeat_now(self) -> None:
        """Make the next :meth:`next_batch` send at least a heartbeat (news for the slave)."""
        self._last_send_ms = -self.settings.heartbeat_interval_ms

    def deadline_ms(self) -> int | None:
        """When :meth:`next_batch` next has something to do without news: a heartbeat is due
        (TRANSFER) or a look at the slave's silence (:meth:`check_silence`); None once closed."""
        if self.state is MasterSessionState.CLOSED:
            return None
        silent = self.silence.deadline_ms()
        if self.state is MasterSessionState.TRANSFER:
            heartbeat = self._last_send_ms + self.settings.heartbeat_interval_ms
            return min(silent, heartbeat, self._news_at if self._news_at is not None else heartbeat)
        return silent

    def connection_lost(self) -> None:
        self.state = MasterSessionState.CLOSED

    def _close(self, reason: MasterCloseReason) -> MasterCloseReason:
        self.state = MasterSessionState.CLOSED
        self.closed = reason
        return reason
