"""RaftNode: one Raft participant as a pure state machine (etcd-io/raft's step/tick/ready/advance).

Rules:
- No I/O, clocks or global randomness: time is tick(), randomness is the injected rng.
- Every output goes through ready(): what to persist, then what to send, then what
  to apply. A message never leaves before the state it depends on is in a Ready.
- Peer input is never asserted on: stale, foreign or malformed messages are dropped
  or answered with a named reason. Assertions guard our own invariants only.
- Elections: pre-vote (optional) then vote, judged by election.judge_vote; a follower
  campaigns after max_heartbeat_leak heartbeat intervals plus rng jitter without a
  leader; a voter within a live leader's lease refuses higher terms (ALREADY_HAS_LEADER),
  so a rejoining partitioned node cannot depose a healthy leader.
- A new leader appends an empty entry before serving; it commits only entries of its
  own term by quorum; with check_quorum it steps down when a quorum stays silent.
- tick() and step() may be called between ready() and advance() (the driver keeps time
  and takes messages while it persists); only heartbeats_before_persist() may leave
  before the Ready in flight is advanced.
"""

from __future__ import annotations

import random

from ha.raft.election import VoterFacts, VoteRequest, judge_vote, tally
from ha.raft.errors import InvalidCompaction, NotLeader, ProposalDropped
from ha.raft.log import RaftLog
from ha.raft.progress import Progress, ProgressState
from ha.raft.types import (
    CampaignOutcome, DropReason, Entry, HardState, Message, MessageKind, NodeId,
    RaftConfig, Ready, RecoveredState, Role, Snapshot, SoftState, VoteRejection,
)

_FROM_LEADER = (MessageKind.APPEND, MessageKind.HEARTBEAT, MessageKind.SNAPSHOT)
_VOTE_REQUESTS = (MessageKind.VOTE, MessageKind.PRE_VOTE)


class RaftNode:
    def __init__(self, config: RaftConfig, rng: random.Random,
                 recovered: RecoveredState | None = None) -> None:
        self.config = config
        self.id = config.node_id
        self._rng = rng
        hard = recovered.hard_state if recovered else HardState(0, None, 0)
        snapshot = recovered.snapshot if recovered else None
        self._log = RaftLog(snapshot, recovered.entries if recovered else (), hard.commit)
        self._log.pending_snapshot = snapshot  # the driver restores its state machine from it first
        self._term = hard.term
        self._vote = hard.vote
        self._leader: NodeId | None = None
        self._role = Role.FOLLOWER
        self._messages: list[Message] = []
        self._answers: dict[NodeId, VoteRejection | None] = {}
        self._progress: dict[NodeId, Progress] = {}
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._timeout = 0
        self._pending_compaction: Snapshot | None = None
        self._prev_hard = HardState(hard.term, hard.vote, self._log.commit)
        self._prev_soft = SoftState(None, Role.FOLLOWER)
        self._ready_out = False
        self.last_campaign_outcome: CampaignOutcome | None = None
        self._reset_election_timer()

    # ------------------------------------------------------------------ properties
    @property
    def leader_id(self) -> NodeId | None:
        return self._leader

    @property
    def role(self) -> Role:
        return self._role

    @property
    def term(self) -> int:
        return self._term

    @property
    def vote(self) -> NodeId | None:
        return self._vote

    @property
    def commit_index(self) -> int:
        return self._log.commit

    @property
    def applied_index(self) -> int:
        return self._log.applied

    @property
    def last_index(self) -> int:
        return self._log.last_index

    @property
    def last_term(self) -> int:
        return self._log.last_term

    @property
    def snapshot_index(self) -> int:
        return self._log.snapshot_index

    @property
    def hard_state(self) -> HardState:
        return HardState(self._term, self._vote, self._log.commit)

    @property
    def soft_state(self) -> SoftState:
        return SoftState(self._leader, self._role)

    def entries(self, low: int, high: int) -> tuple[Entry, ...]:
        """Log entries low..high that are still in memory (for inspection and tests)."""
        low = max(low, self._log.first_index)
        return self._log.slice(low, high, max(high - low + 1, 1)) if high >= low else ()

    def term_at(self, index: int) -> int | None:
        """Term of the entry at index; None when compacted away or beyond the log."""
        return self._log.term(index)

    def match_index(self, peer: NodeId) -> int | None:
        """The leader's view of a follower's match index, None when not leader."""
        progress = self._progress.get(peer)
        return progress.match if progress else None

    # ------------------------------------------------------------------ time
    def tick(self) -> None:
        if self._role is Role.LEADER:
            self._tick_leader()
            return
        self._election_elapsed += 1
        if self._election_elapsed >= self._timeout:
            self.campaign()

    def _tick_leader(self) -> None:
        self._heartbeat_elapsed += 1
        self._election_elapsed += 1  # the leader's clock, for per-follower activity
        if self.config.check_quorum and not self._quorum_active():
            self._become_follower(self._term, None)
            return
        if self._heartbeat_elapsed >= self.config.heartbeat_ticks:
            self._heartbeat_elapsed = 0
            self._broadcast_heartbeat()

    def _check_quorum_ticks(self) -> int:
        return self.config.election_ticks + self.config.election_jitter_ticks

    def _quorum_active(self) -> bool:
        """A quorum answered within the last check-quorum window (the longest follower timeout)."""
        window = self._check_quorum_ticks()
        active = 1 + sum(1 for peer, progress in self._progress.items()
                         if peer != self.id
                         and self._election_elapsed - progress.last_active_tick <= window)
        return active >= self.config.quorum

    def _reset_election_timer(self, extra_ticks: int = 0) -> None:
        self._election_elapsed = 0
        jitter = self._rng.randint(0, self.config.election_jitter_ticks)
        self._timeout = self.config.election_ticks + jitter + extra_ticks

    def _in_lease(self) -> bool:
        if not self.config.check_quorum or self._leader is None:
            return False
        return self._role is Role.LEADER or self._election_elapsed < self.config.election_ticks

    # ------------------------------------------------------------------ roles
    def _become_follower(self, term: int, leader: NodeId | None, extra_ticks: int = 0,
                         reset_timer: bool = True) -> None:
        if term > self._term:
            self._term = term
            self._vote = None
        was_leader = self._role is Role.LEADER
        self._role = Role.FOLLOWER
        self._leader = leader
        self._answers = {}
        self._progress = {}
        if reset_timer or was_leader:
            self._reset_election_timer(extra_ticks)

    def campaign(self) -> None:
        """Start an election now (pre-vote first when enabled). A leader ignores it."""
        if self._role is Role.LEADER:
            return
        if self.config.pre_vote:
            self._become_pre_candidate()
        else:
            self._become_candidate()

    def _become_pre_candidate(self) -> None:
        self._role = Role.PRE_CANDIDATE
        self._leader = None
        self._reset_election_timer()
        self._start_poll(MessageKind.PRE_VOTE, self._term + 1)

    def _become_candidate(self) -> None:
        self._term += 1
        self._vote = self.id
        self._role = Role.CANDIDATE
        self._leader = None
        self._reset_election_timer()
        self._start_poll(MessageKind.VOTE, self._term)

    def _start_poll(self, kind: MessageKind, term: int) -> None:
        self._answers = {self.id: None}
        for peer in self.config.peers:
            if peer != self.id:
                self._send(Message(kind, self.id, peer, term, log_term=self._log.last_term,
                                   index=self._log.last_index))
        self._count_answers()

    def _count_answers(self) -> None:
        outcome = tally(self.config.peers, self._answers)
        if outcome is None:
            return
        self.last_campaign_outcome = outcome
        if outcome is CampaignOutcome.PASSED:
            if self._role is Role.PRE_CANDIDATE:
                self._become_candidate()
            else:
                self._become_leader()
        elif outcome is CampaignOutcome.REVOTE_IMMEDIATELY:
            self._become_candidate()
        elif outcome is CampaignOutcome.WAIT_TO_VOTE_NEXT:
            self._become_follower(self._term, None, extra_ticks=self.config.election_ticks)
        else:
            self._become_follower(self._term, None)

    def _become_leader(self) -> None:
        self._role = Role.LEADER
        self._leader = self.id
        self._answers = {}
        self._heartbeat_elapsed = 0
        self._election_elapsed = 0
        next_index = self._log.last_index + 1
        self._progress = {peer: Progress(next_index, self.config.max_inflight_messages)
                          for peer in self.config.peers}
        self._append_as_leader(b"")  # the no-op: commits everything before it, then serve

    # ------------------------------------------------------------------ proposals
    def propose(self, data: bytes) -> int:
        """Append data to the log; returns the index it will have once committed."""
        if self._role is not Role.LEADER:
            raise NotLeader(self._leader)
        if not data:
            raise ProposalDropped(DropReason.EMPTY_DATA)
        if self._log.last_index - self._log.commit >= self.config.max_uncommitted_entries:
            raise ProposalDropped(DropReason.UNCOMMITTED_LIMIT)
        return self._append_as_leader(data)

    def _append_as_leader(self, data: bytes) -> int:
        entry = Entry(self._term, self._log.last_index + 1, data)
        self._log.append((entry,))
        self._progress[self.id].maybe_update(entry.index)
        self._maybe_commit()
        self._broadcast_append()
        return entry.index

    def compact(self, index: int, data: bytes) -> None:
        """Record a snapshot of the applied state at index; the log up to it may be dropped."""
        if index > self._log.applied or index < 0:
            raise InvalidCompaction(index, self._log.applied)
        if index <= self._log.snapshot_index:
            return
        term = self._log.term(index)
        assert term is not None
        snapshot = Snapshot(index, term, data, self.config.peers)
        self._log.compact(snapshot)
        self._pending_compaction = snapshot

    # ------------------------------------------------------------------ Ready
    def has_ready(self) -> bool:
        log = self._log
        return bool(self._messages or log.unstable() or log.pending_snapshot
                    or self._pending_compaction or log.next_committed(1)
                    or self.soft_state != self._prev_soft or self.hard_state != self._prev_hard)

    def ready(self) -> Ready:
        """The next batch of work; call advance(ready) once it is done, before ready() again."""
        assert not self._ready_out, "ready() called twice without advance()"
        self._ready_out = True
        soft, hard = self.soft_state, self.hard_state
        ready = Ready(
            soft_state=soft if soft != self._prev_soft else None,
            hard_state=hard if hard != self._prev_hard else None,
            entries=self._log.unstable(),
            snapshot=self._log.pending_snapshot,
            messages=tuple(self._messages),
            committed_entries=self._log.next_committed(self.config.max_committed_entries_per_ready),
            compaction=self._pending_compaction,
        )
        self._messages = []
        return ready

    def advance(self, ready: Ready) -> None:
        """The driver persisted, sent and applied `ready`."""
        assert self._ready_out, "advance() without ready()"
        self._ready_out = False
        if ready.soft_state is not None:
            self._prev_soft = ready.soft_state
        if ready.hard_state is not None:
            self._prev_hard = ready.hard_state
        if ready.snapshot is not None:
            self._log.snapshot_applied(ready.snapshot)
        if ready.entries:
            last = ready.entries[-1]
            self._log.stable_to(last.index, last.term)
        if ready.committed_entries:
            self._log.applied_to(max(ready.committed_entries[-1].index, self._log.applied))
        if ready.compaction is not None and ready.compaction == self._pending_compaction:
            self._pending_compaction = None

    def heartbeats_before_persist(self) -> tuple[Message, ...]:
        """Leader heartbeats that may be sent while a Ready is still being persisted.

        Taken out of the next Ready so a slow fsync does not silence the leader past its
        followers' election timeout.  A heartbeat promises nothing the disk has not got:
        it leaves only when this node's current term is already durable (the last advanced
        hard state), and its commit is clamped to the commit of that hard state, whose
        entries were all persisted before it was advanced.  Everything else waits for
        its Ready as usual.
        """
        durable = self._prev_hard
        if self._role is not Role.LEADER or durable.term != self._term:
            return ()
        early, rest = [], []
        for m in self._messages:
            if m.kind is MessageKind.HEARTBEAT and m.term == self._term:
                early.append(Message(m.kind, m.src, m.dst, m.term, commit=min(m.commit, durable.commit)))
            else:
                rest.append(m)
        self._messages = rest
        return tuple(early)

    def _send(self, message: Message) -> None:
        self._messages.append(message)

    # ------------------------------------------------------------------ step
    def step(self, message: Message) -> None:
        """Handle one message from a peer. Never raises on bad peer input."""
        m = message
        if m.dst != self.id or m.src == self.id or m.term < 0:
            return
        if m.src not in self.config.peers:
            if m.kind in _VOTE_REQUESTS:
                self._answer_vote(m, VoteRejection.UNKNOWN_MEMBER)
            return
        if m.kind in _VOTE_REQUESTS:
            self._handle_vote_request(m)
            return
        if not self._accept_term(m):
            return
        self._dispatch(m)

    def _accept_term(self, m: Message) -> bool:
        """Apply the term rules; False when the message is stale and was dealt with."""
        if m.term > self._term:
            if m.kind is MessageKind.PRE_VOTE_RESPONSE and m.term == self._term + 1:
                return True  # an answer to our pre-vote, in the term we would campaign in
            self._become_follower(m.term, m.src if m.kind in _FROM_LEADER else None)
            return True
        if m.term < self._term:
            if m.kind in _FROM_LEADER:
                # tell the stale leader about our term, so that it steps down
                self._send(Message(MessageKind.HEARTBEAT_RESPONSE, self.id, m.src, self._term))
            return False
        return True

    def _dispatch(self, m: Message) -> None:
        kind = m.kind
        if kind in _FROM_LEADER:
            if self._role is Role.LEADER:
                return  # two leaders in one term cannot happen; ignore the impostor
            if self._role is not Role.FOLLOWER or self._leader != m.src:
                self._become_follower(self._term, m.src)
            self._election_elapsed = 0
            if kind is MessageKind.APPEND:
                self._handle_append(m)
            elif kind is MessageKind.HEARTBEAT:
                self._log.commit_to(m.commit)
                self._send(Message(MessageKind.HEARTBEAT_RESPONSE, self.id, m.src, self._term))
            else:
                self._handle_snapshot(m)
        elif kind is MessageKind.APPEND_RESPONSE and self._role is Role.LEADER:
            self._handle_append_response(m)
        elif kind is MessageKind.HEARTBEAT_RESPONSE and self._role is Role.LEADER:
            self._handle_heartbeat_response(m)
        elif kind is MessageKind.VOTE_RESPONSE and self._role is Role.CANDIDATE:
            self._record_answer(m)
        elif kind is MessageKind.PRE_VOTE_RESPONSE and self._role is Role.PRE_CANDIDATE \
                and m.term == self._term + 1:
            self._record_answer(m)

    def _record_answer(self, m: Message) -> None:
        if m.reject and m.reject_reason is None:
            return  # malformed: a refusal must say why
        self._answers.setdefault(m.src, m.reject_reason if m.reject else None)
        self._count_answers()

    # ------------------------------------------------------------------ votes
    def _handle_vote_request(self, m: Message) -> None:
        pre_vote = m.kind is MessageKind.PRE_VOTE
        if m.term > self._term and not pre_vote and not self._in_lease():
            # a newer term, but not a reason to wait longer: only a granted vote resets
            # the timer, so a candidate with a short log cannot keep the rest silent
            self._become_follower(m.term, None, reset_timer=False)
        facts = VoterFacts(self.config.peers, self._term, self._vote, self._leader,
                           self._in_lease(), self._log.last_index, self._log.last_term,
                           self.id, self._role is Role.PRE_CANDIDATE)
        request = VoteRequest(m.src, m.term, m.index, m.log_term, pre_vote)
        reason = judge_vote(facts, request)
        if reason is None and not pre_vote:
            self._vote = m.src
            self._election_elapsed = 0
        self._answer_vote(m, reason)

    def _answer_vote(self, m: Message, reason: VoteRejection | None) -> None:
        pre_vote = m.kind is MessageKind.PRE_VOTE
        kind = MessageKind.PRE_VOTE_RESPONSE if pre_vote else MessageKind.VOTE_RESPONSE
        if pre_vote:
            term = self._term if reason is VoteRejection.EXPIRED_VOTE_TERM else m.term
        else:
            term = self._term
        self._send(Message(kind, self.id, m.src, term, reject=reason is not None,
                           reject_reason=reason))

    # ------------------------------------------------------------------ follower side
    def _handle_append(self, m: Message) -> None:
        if not self._valid_append(m):
            return
        if m.index < self._log.commit:
            self._reply_append(m.src, self._log.commit)
            return
        last_new = self._log.maybe_append(m.index, m.log_term, m.commit, m.entries)
        if last_new is not None:
            self._reply_append(m.src, last_new)
            return
        hint, hint_term = self._log.find_conflict_by_term(m.index, m.log_term)
        self._send(Message(MessageKind.APPEND_RESPONSE, self.id, m.src, self._term, index=m.index,
                           reject=True, hint=hint, hint_term=hint_term))

    def _valid_append(self, m: Message) -> bool:
        if m.index < 0 or m.log_term < 0 or m.log_term > m.term:
            return False
        previous_term = m.log_term
        for offset, entry in enumerate(m.entries):
            if entry.index != m.index + 1 + offset or not previous_term <= entry.term <= m.term:
                return False
            previous_term = entry.term
        return True

    def _reply_append(self, to: NodeId, index: int) -> None:
        self._send(Message(MessageKind.APPEND_RESPONSE, self.id, to, self._term, index=index))

    def _handle_snapshot(self, m: Message) -> None:
        snapshot = m.snapshot
        if snapshot is None or snapshot.index < 0 or snapshot.term > m.term:
            return
        if snapshot.index <= self._log.commit:
            self._reply_append(m.src, self._log.commit)
        elif self._log.matches(snapshot.index, snapshot.term):
            self._log.commit_to(snapshot.index)
            self._reply_append(m.src, self._log.commit)
        else:
            self._log.restore(snapshot)
            self._reply_append(m.src, snapshot.index)

    # ------------------------------------------------------------------ leader side
    def _handle_append_response(self, m: Message) -> None:
        progress = self._progress[m.src]
        progress.last_active_tick = self._election_elapsed
        if m.reject:
            guess = m.hint + 1
            if m.hint_term > 0:
                guess = self._log.find_conflict_by_term(m.hint, m.hint_term)[0] + 1
            if progress.maybe_decrease_to(m.index, guess):
                self._send_append(m.src, allow_empty=True)
            return
        if m.index > self._log.last_index:
            return  # garbage: acknowledges entries we never had
        if not progress.maybe_update(m.index):
            return
        if progress.state is ProgressState.PROBE:
            progress.become_replicate()
        if self._maybe_commit():
            self._broadcast_append()
        else:
            while self._send_append(m.src, allow_empty=False):
                pass

    def _handle_heartbeat_response(self, m: Message) -> None:
        progress = self._progress[m.src]
        progress.last_active_tick = self._election_elapsed
        progress.paused = False
        if progress.state is ProgressState.REPLICATE and progress.is_paused():
            progress.inflight.pop(0)
        if progress.match < self._log.last_index:
            self._send_append(m.src, allow_empty=True)

    def _send_append(self, to: NodeId, allow_empty: bool) -> bool:
        progress = self._progress[to]
        if progress.is_paused():
            return False
        prev_index = progress.next_index - 1
        prev_term = self._log.term(prev_index)
        if prev_term is None:
            return self._send_snapshot(to, progress)
        entries = self._log.slice(progress.next_index, self._log.last_index,
                                  self.config.max_entries_per_message) \
            if progress.next_index <= self._log.last_index else ()
        if not entries and not allow_empty:
            return False
        self._send(Message(MessageKind.APPEND, self.id, to, self._term, log_term=prev_term,
                           index=prev_index, entries=entries, commit=self._log.commit))
        progress.sent(entries[-1].index if entries else prev_index, len(entries))
        return bool(entries)

    def _send_snapshot(self, to: NodeId, progress: Progress) -> bool:
        snapshot = self._log.snapshot
        assert snapshot is not None, "log compacted without a snapshot"
        progress.become_probe()
        progress.paused = True
        self._send(Message(MessageKind.SNAPSHOT, self.id, to, self._term, snapshot=snapshot))
        return False

    def _broadcast_append(self) -> None:
        for peer in self.config.peers:
            if peer != self.id:
                self._send_append(peer, allow_empty=True)

    def _broadcast_heartbeat(self) -> None:
        for peer in self.config.peers:
            if peer != self.id:
                commit = min(self._progress[peer].match, self._log.commit)
                self._send(Message(MessageKind.HEARTBEAT, self.id, peer, self._term, commit=commit))

    def _maybe_commit(self) -> bool:
        matches = sorted((p.match for p in self._progress.values()), reverse=True)
        candidate = matches[self.config.quorum - 1]
        if self._log.term(candidate) != self._term:
            return False  # only entries of our own term commit by counting replicas
        return self._log.commit_to(candidate)
