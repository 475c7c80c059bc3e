"""The slave's replication session: READY -> HANDSHAKE -> TRANSFER, and back to READY.

Rules:

* Inputs are method calls (``connected``, ``on_master_handshake``, ``on_batch``, ``tick``,
  ``connection_lost``); each returns a :class:`SlaveOutput` that the driver carries out in
  its field order: **truncate** (physical, fsynced), **persist epochs** (the epoch file),
  **append** the payload, **set confirm offset**, then **send**.  So an ack never reports an
  offset whose truncation or epoch entry is not yet durable.  If any step fails the driver
  calls ``connection_lost`` and the session returns to READY.
* Every return to READY carries a named :class:`CloseReason`.
* A batch must start exactly at the local end (GAP otherwise), match its CRC
  (BAD_CRC otherwise: the bytes changed on the way) and lie in one epoch; a new
  epoch in a header is appended to the local history (epochs only grow: BAD_BATCH
  otherwise).  The fence is on the master, not on the data: a master whose newest epoch
  (its handshake's last, raised by later batches) is older than the controller's is
  MASTER_EPOCH_FENCED, while batches of older epochs' records are what a slave that is
  behind must copy (fencing those kept such a slave from ever catching up: found by the
  failure simulation).
* The slave's confirm offset is ``min(header confirm, local end)`` and never goes back,
  except that a truncation clamps it to the cut.
* MASTER_SILENT: the master was not heard (any bytes, :meth:`SlaveSession.heard`) for
  ``haHousekeepingInterval`` of this side's awake time; a tick that comes late was the
  slave's own pause, not the master's silence (:class:`ha.replication.silence.PeerSilence`).
* ``caught_up`` says what this connection showed of the local copy: None until the master's
  handshake; then whether the local log holds everything the master made visible to clients --
  at the handshake its whole log (``max_offset``), after each batch its confirm offset.  A
  slave acts for a dead master only on a copy known to be caught up (issue 24 defect 2: a
  slave restarted while its master was away escaped delay messages its master had delivered).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ha.epochs import EpochHistory
from ha.replication.handshake import HandshakeRejection, LocalLog, plan_handshake
from ha.replication.messages import MasterHandshake, SlaveAck, SlaveHandshake, TransferBatch, batch_crc
from ha.replication.silence import PeerSilence


class SlaveState(str, Enum):
    READY = "READY"
    HANDSHAKE = "HANDSHAKE"
    TRANSFER = "TRANSFER"


class CloseReason(str, Enum):
    MASTER_EPOCH_FENCED = "MASTER_EPOCH_FENCED"
    NO_CONSISTENT_POINT = "NO_CONSISTENT_POINT"
    CONSISTENT_POINT_BELOW_MASTER_MIN = "CONSISTENT_POINT_BELOW_MASTER_MIN"
    LOG_WITHOUT_EPOCHS = "LOG_WITHOUT_EPOCHS"
    BAD_MASTER_HANDSHAKE = "BAD_MASTER_HANDSHAKE"
    GAP = "GAP"
    BAD_BATCH = "BAD_BATCH"
    BAD_CRC = "BAD_CRC"
    UNEXPECTED_MESSAGE = "UNEXPECTED_MESSAGE"
    MASTER_SILENT = "MASTER_SILENT"
    CONNECTION_LOST = "CONNECTION_LOST"


@dataclass(frozen=True)
class SlaveOutput:
    truncate_to: int | None = None
    epochs: EpochHistory | None = None          # persist this history (epoch file)
    append: TransferBatch | None = None         # append payload at start_offset
    confirm_offset: int | None = None
    send: tuple[SlaveHandshake | SlaveAck, ...] = ()
    closed: CloseReason | None = None


@dataclass(frozen=True)
class SlaveSettings:
    slave_id: int
    sync_from_last_file: bool = False
    async_learner: bool = False
    heartbeat_interval_ms: int = 5000
    housekeeping_interval_ms: int = 20_000


class SlaveSession:
    def __init__(self, settings: SlaveSettings, epochs: EpochHistory, min_offset: int, max_offset: int,
                 confirm_offset: int, known_master_epoch: int = 0):
        self.settings = settings
        self.state = SlaveState.READY
        self.epochs = epochs
        self.min_offset, self.max_offset = min_offset, max_offset
        self.confirm_offset = confirm_offset
        self.known_master_epoch = known_master_epoch
        self.last_close: CloseReason | None = None
        self.master_epoch = 0       # the newest epoch the connected master has shown
        self.caught_up: bool | None = None  # the copy holds all the master showed (None: not known yet)
        self._last_ack_ms = 0
        self.silence = self._silence(0)   # renewed on each connection

    # --- transitions ---------------------------------------------------------------------------
    def connected(self, now_ms: int) -> SlaveOutput:
        assert self.state is SlaveState.READY, self.state
        self.state = SlaveState.HANDSHAKE
        self.silence = self._silence(now_ms)
        s = self.settings
        return SlaveOutput(send=(SlaveHandshake(s.slave_id, s.sync_from_last_file, s.async_learner),))

    def connection_lost(self, reason: CloseReason = CloseReason.CONNECTION_LOST) -> SlaveOutput:
        return self._close(reason)

    def change_master_epoch(self, epoch: int) -> None:
        """The controller announced ``epoch``: masters with an older last epoch are fenced."""
        self.known_master_epoch = max(self.known_master_epoch, epoch)

    def on_master_handshake(self, message: MasterHandshake, now_ms: int) -> SlaveOutput:
        if self.state is not SlaveState.HANDSHAKE:
            return self._close(CloseReason.UNEXPECTED_MESSAGE)
        self.silence.heard(now_ms)
        plan = plan_handshake(message, LocalLog(self.epochs, self.min_offset, self.max_offset),
                              known_master_epoch=self.known_master_epoch,
                              sync_from_last_file=self.settings.sync_from_last_file)
        if isinstance(plan, HandshakeRejection):
            return self._close(CloseReason(plan.value))
        self.state = SlaveState.TRANSFER
        self.master_epoch = message.epochs[-1][0] if message.epochs else 0
        epochs = None
        if plan.truncate_to is not None:
            self.max_offset = plan.truncate_to
            self.confirm_offset = min(self.confirm_offset, plan.truncate_to)
            epochs = plan.epochs
        if self.max_offset == self.min_offset and plan.resume_offset != self.max_offset:
            self.min_offset = self.max_offset = plan.resume_offset  # empty log starts at the master's
        self.epochs = plan.epochs
        self.caught_up = self.max_offset >= message.max_offset
        self._last_ack_ms = now_ms
        return SlaveOutput(truncate_to=plan.truncate_to, epochs=epochs,
                           confirm_offset=self.confirm_offset if plan.truncate_to is not None else None,
                           send=(SlaveAck(plan.resume_offset),))

    def on_batch(self, batch: TransferBatch, now_ms: int) -> SlaveOutput:
        if self.state is not SlaveState.TRANSFER:
            return self._close(CloseReason.UNEXPECTED_MESSAGE)
        self.silence.heard(now_ms)
        if batch.start_offset != self.max_offset:
            return self._close(CloseReason.GAP)
        if batch_crc(batch.payload, batch.index) != batch.crc:
            return self._close(CloseReason.BAD_CRC)
        self.master_epoch = max(self.master_epoch, batch.epoch)
        if self.master_epoch < self.known_master_epoch:
            return self._close(CloseReason.MASTER_EPOCH_FENCED)
        epochs, reason = self._epochs_for(batch)
        if reason is not None:
            return self._close(reason)
        grew = bool(batch.payload)
        self.max_offset = batch.end_offset
        confirm = max(self.confirm_offset, min(batch.confirm_offset, self.max_offset))
        changed_confirm = confirm != self.confirm_offset
        self.confirm_offset = confirm
        self.caught_up = self.max_offset >= batch.confirm_offset
        send: tuple[SlaveAck, ...] = ()
        if grew:
            send = (SlaveAck(self.max_offset),)
            self._last_ack_ms = now_ms
        return SlaveOutput(epochs=epochs, append=batch if grew else None,
                           confirm_offset=confirm if changed_confirm else None, send=send)

    def _epochs_for(self, batch: TransferBatch) -> tuple[EpochHistory | None, CloseReason | None]:
        if batch.epoch_start_offset > batch.start_offset:
            return None, CloseReason.BAD_BATCH
        last = self.epochs.last
        if last is not None and last.epoch == batch.epoch:
            if last.start_offset != batch.epoch_start_offset:
                return None, CloseReason.BAD_BATCH
            return None, None
        if not batch.payload:
            return None, None  # an epoch is recorded with its first record, not by a heartbeat
        if last is not None and batch.epoch_start_offset != batch.start_offset:
            return None, CloseReason.BAD_BATCH  # records of a new epoch would sit under an old one
        if self.epochs.check_append(batch.epoch, batch.epoch_start_offset) is not None:
            return None, CloseReason.BAD_BATCH
        self.epochs = self.epochs.append(batch.epoch, batch.epoch_start_offset)
        return self.epochs, None

    def tick(self, now_ms: int) -> SlaveOutput:
        """Housekeeping: close a silent connection; in TRANSFER, ack at least every heartbeat."""
        if self.state is SlaveState.READY:
            return SlaveOutput()
        if self.silence.look(now_ms):
            return self._close(CloseReason.MASTER_SILENT)
        if self.state is SlaveState.TRANSFER and now_ms - self._last_ack_ms >= self.settings.heartbeat_interval_ms:
            self._last_ack_ms = now_ms
            return SlaveOutput(send=(SlaveAck(self.max_offset),))
        return SlaveOutput()

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` next has something to do: an ack is due (TRANSFER) or the master
        has been silent too long; None while READY."""
        if self.state is SlaveState.READY:
            return None
        silent = self.silence.deadline_ms()
        if self.state is SlaveState.TRANSFER:
            return min(silent, self._last_ack_ms + self.settings.heartbeat_interval_ms)
        return silent

    def heard(self, now_ms: int) -> None:
        """Bytes of the master arrived (perhaps part of a frame not parsed yet)."""
        if self.state is not SlaveState.READY:
            self.silence.heard(now_ms)

    def _silence(self, now_ms: int) -> PeerSilence:
        return PeerSilence.for_intervals(self.settings.heartbeat_interval_ms, self.settings.housekeeping_interval_ms,
                                         now_ms)

    def _close(self, reason: CloseReason) -> SlaveOutput:
        self.state = SlaveState.READY
        self.last_close = reason
        return SlaveOutput(closed=reason)
