"""The master's view of its slaves: acks, SyncStateSet (SSS) shrink/expand, confirm offset.

Rules (reference 4.7, issues #5663, #6662, #6728):

* Each connected slave has an ack offset, -1 until its connection's first ack (upstream's
  fresh connection); a negative ack is ignored.  An ack of 0 is a real one: the offset of an
  empty log, which joins the set like any other (issue 24: a fresh cluster stayed at a set of
  the master alone until its first write, so its first messages were acknowledged on one disk
  and a master lost before them left the group with nobody electable).
* Caught-up tracking: a transfer records a mark, the master's max and the time; an ack reaching
  a mark's max marks the slave caught up at that mark's time (now, if it reaches the current
  max).  Marks are kept until an ack passes them (at most one per ``max_time / MARKS`` ms,
  the oldest dropped beyond ``MARKS``: the lag is then over-estimated, never under), so
  under steady load, where every ack trails the newest transfer, the slave is caught up
  as of the newest mark its ack passed.  With the last transfer only (as before), an ack
  that trailed the newest transfer by one batch never counted: a slave a few ms behind was
  dropped from the set after ``haMaxTimeSlaveNotCatchup`` (found by bench/repeat_tests.py,
  SYNC_FLUSH slaves under 150 messages/s with one core busy; the controller then had no one
  to elect when the master was killed).  Learners are never tracked and never join the set.
* Expand: a connected non-learner outside the set whose ack >= confirm offset and >= the last
  epoch's start is proposed for the set.  Shrink: a member is proposed out at once when its
  connection drops, and at the next check when it has not been caught up for
  ``haMaxTimeSlaveNotCatchup`` (a member never caught up counts from the tracker's creation,
  so a restarted master gives its slaves that long to connect).
* A proposal is not the set: until the controller applies it (:meth:`apply_sync_state_set`),
  the set used for acks and confirm is the **union** of the applied and proposed sets.  A
  proposal replaced by another before any set was applied may still have been applied (its
  reply was lost or timed out): its members stay in the union (``uncertain``) until the
  controller's set is known again (found by the failure simulation: an expansion whose
  reply was lost, then a shrink, let the master acknowledge alone while the controller's set
  still held the slave, which it would elect without those messages).
* Confirm offset = min over set members (self = master max) of their acks; it **freezes**
  while any member other than self is disconnected or has not acked on its connection yet
  (stricter than upstream, which skips such members: #6728's -1 ack is ignored either way),
  and never goes backwards.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class SlaveProgress:
    slave_id: int
    learner: bool
    connected: bool
    ack_offset: int = -1          # -1: no ack on this connection yet
    last_caught_up_ms: int | None = None
    marks: tuple[tuple[int, int], ...] = ()   # (master max, time) of transfers not acked yet, oldest first


MARKS = 64  # transfer marks kept per slave (see "Caught-up tracking")


class SyncStateTracker:
    def __init__(self, self_id: int, sync_state_set: frozenset[int], confirm_offset: int,
                 max_time_not_caught_up_ms: int, created_ms: int = 0):
        assert self_id in sync_state_set, (self_id, sync_state_set)
        self.self_id = self_id
        self.created_ms = created_ms
        self.applied: frozenset[int] = sync_state_set
        self.proposed: frozenset[int] | None = None
        self.uncertain: frozenset[int] = frozenset()   # members of replaced proposals, maybe applied
        self.confirm_offset = confirm_offset
        self.max_time_not_caught_up_ms = max_time_not_caught_up_ms
        self.slaves: dict[int, SlaveProgress] = {}

    # --- the set -------------------------------------------------------------------------------
    @property
    def sync_state_set(self) -> frozenset[int]:
        union = self.applied | self.uncertain
        return union | self.proposed if self.proposed is not None else union

    @property
    def synchronizing(self) -> bool:
        return self.proposed is not None

    def apply_sync_state_set(self, members: frozenset[int], master_max: int,
                             still_proposed: frozenset[int] | None = None) -> None:
        """The controller applied ``members``: adopt it and recompute confirm.  A proposal
        that is not what was applied (``still_proposed``, a newer change waiting for its own
        round) stays in the union *before* the confirm offset is recomputed: recomputed over
        the applied set alone, it could pass the ack of a member the pending proposal adds
        (found by the failure simulation, seed 8827: a slave joined the set below the
        confirm offset consumers had read, and was elected)."""
        pending = still_proposed if still_proposed is not None and still_proposed != members else None
        self.applied, self.proposed, self.uncertain = members, pending, frozenset()
        self.recompute_confirm(master_max)

    def propose(self, members: frozenset[int]) -> frozenset[int] | None:
        """Make ``members`` the proposal (None when it is what is already proposed or applied)."""
        current = self.proposed if self.proposed is not None else self.applied
        if members == current:
            return None
        if self.proposed is not None:
            self.uncertain |= self.proposed
        self.proposed = members
        return members

    # --- slave events --------------------------------------------------------------------------
    def slave_connected(self, slave_id: int, learner: bool) -> None:
        old = self.slaves.get(slave_id)
        self.slaves[slave_id] = SlaveProgress(slave_id, learner, True, -1,
                                              old.last_caught_up_ms if old and not learner else None)

    def slave_disconnected(self, slave_id: int) -> frozenset[int] | None:
        """Drop the connection; a member is proposed out of the set (the proposal, if any)."""
        old = self.slaves.get(slave_id)
        if old is None:
            return None
        self.slaves[slave_id] = SlaveProgress(slave_id, old.learner, False, old.ack_offset, old.last_caught_up_ms)
        current = self.proposed if self.proposed is not None else self.applied
        return self.propose(current - {slave_id}) if slave_id in current else None

    def on_transfer(self, slave_id: int, master_max: int, now_ms: int) -> None:
        old = self.slaves[slave_id]
        if old.learner:
            return
        if old.ack_offset >= master_max:
            if old.last_caught_up_ms != now_ms or old.marks:   # per batch: no dataclasses.replace
                self.slaves[slave_id] = SlaveProgress(slave_id, False, old.connected, old.ack_offset, now_ms)
            return
        marks = old.marks
        spacing = max(1, self.max_time_not_caught_up_ms // MARKS)
        if marks and (master_max <= marks[-1][0] or now_ms - marks[-1][1] < spacing):
            return  # the newest mark is recent enough: an ack passing it says as much
        marks = (marks + ((master_max, now_ms),))[-MARKS:]
        self.slaves[slave_id] = SlaveProgress(slave_id, False, old.connected, old.ack_offset, old.last_caught_up_ms,
                                              marks)

    def on_ack(self, slave_id: int, offset: int, master_max: int, last_epoch_start: int,
               now_ms: int) -> frozenset[int] | None:
        """Record an ack; returns an expanded set to propose to the controller, if any."""
        old = self.slaves.get(slave_id)
        if old is None or offset < 0 or not old.connected:
            return None
        caught, marks = old.last_caught_up_ms, old.marks
        if not old.learner:
            if offset >= master_max:
                caught, marks = now_ms, ()
            else:
                passed = 0
                while passed < len(marks) and marks[passed][0] <= offset:
                    passed += 1
                if passed:
                    caught = max(caught or 0, marks[passed - 1][1])
                    marks = marks[passed:]
        self.slaves[slave_id] = SlaveProgress(slave_id, old.learner, True, max(old.ack_offset, offset), caught, marks)
        self.recompute_confirm(master_max)
        current = self.proposed if self.proposed is not None else self.applied
        if old.learner or slave_id in current:
            return None
        if offset >= self.confirm_offset and offset >= last_epoch_start:
            return self.propose(current | {slave_id})
        return None

    def check_shrink(self, now_ms: int) -> frozenset[int] | None:
        """Periodic: propose a set without members that are gone or fell behind."""
        current = self.proposed if self.proposed is not None else self.applied
        keep = {self.self_id}
        for member in current - {self.self_id}:
            progress = self.slaves.get(member)
            if progress is not None and not progress.connected:
                continue
            if now_ms - self._caught_up_at(progress) <= self.max_time_not_caught_up_ms:
                keep.add(member)
        return self.propose(frozenset(keep))

    def _caught_up_at(self, progress: SlaveProgress | None) -> int:
        if progress is None or progress.last_caught_up_ms is None:
            return self.created_ms
        return progress.last_caught_up_ms

    def excuse_pause(self, pause_ms: int, now_ms: int) -> None:
        """The master itself was paused for ``pause_ms``: that time is not a slave's lag, so
        every caught-up time (and the creation a never-seen member counts from) moves on by
        it, never past ``now_ms`` (issue 24, defect 6)."""
        self.created_ms = min(now_ms, self.created_ms + pause_ms)
        for slave_id, progress in self.slaves.items():
            if progress.last_caught_up_ms is not None:
                caught = min(now_ms, progress.last_caught_up_ms + pause_ms)
                self.slaves[slave_id] = dataclasses.replace(progress, last_caught_up_ms=caught)

    def shrink_deadline_ms(self) -> int | None:
        """The earliest time :meth:`check_shrink` would drop a member that is still connected."""
        current = self.proposed if self.proposed is not None else self.applied
        deadlines = [self._caught_up_at(self.slaves.get(m)) + self.max_time_not_caught_up_ms + 1
                     for m in current - {self.self_id}]
        return min(deadlines) if deadlines else None

    # --- confirm offset ------------------------------------------------------------------------
    def recompute_confirm(self, master_max: int) -> int:
        members = self.sync_state_set - {self.self_id}
        if any(not self._connected(m) or self.slaves[m].ack_offset < 0 for m in members):
            return self.confirm_offset  # frozen (#6662; a connection without an ack yet, #6728)
        candidate = min([master_max] + [self.slaves[m].ack_offset for m in members])
        self.confirm_offset = max(self.confirm_offset, candidate)
        return self.confirm_offset

    def _connected(self, slave_id: int) -> bool:
        progress = self.slaves.get(slave_id)
        return progress is not None and progress.connected

    def acked_replicas(self, offset: int, *, sync_state_set_only: bool) -> int:
        """Replicas (self included) holding ``offset``: all connections, or set members only."""
        members = self.sync_state_set
        count = 1
        for progress in self.slaves.values():
            if progress.connected and progress.ack_offset >= offset:
                if not sync_state_set_only or progress.slave_id in members:
                    count += 1
        return count

    def all_members_acked(self, offset: int) -> bool:
        """allAckInSyncStateSet: every set member other than self holds ``offset``."""
        return all(self._connected(m) and self.slaves[m].ack_offset >= offset
                   for m in self.sync_state_set - {self.self_id})

    def in_sync_slaves(self, master_max: int, max_gap_bytes: int) -> int:
        """RIP-34: connected slaves whose ack lags the master by less than the gap."""
        return sum(1 for p in self.slaves.values() if p.connected and master_max - p.ack_offset < max_gap_bytes)
