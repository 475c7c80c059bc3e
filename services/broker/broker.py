"""One broker: a thin composition of its managers and services, implementing BrokerApi and
BrokerAdminApi.

Rules:
- ``start`` loads topics, groups and every checkpoint, replays the pop / timer / transaction
  logs (recovery), then starts the periodic tasks (offset + state flush, revive, timer,
  transaction check, store retention).  ``stop`` stops the tasks, then persists everything;
  the container calls ``store.shutdown()`` afterwards.
- The role is the replication's (``services.ha.replica.BrokerReplica``; without one, the
  configured ``brokerRole`` with nothing replicated), and it may change at runtime.  Whether
  a call is served is asked of the replica's node alone (``ReplicaNode.refusal``, the table
  in ``ha.role.serving``): only a MASTER takes client calls; a SLAVE or FENCED broker answers
  reads only (every mutating client call and an admin offset write is refused).  This broker
  tells the node its serving facts (acting, pre-online, hand-over done) as they change.  A master in pre-online
  (``services.ha.pre_online``) holds pop calls and runs no special service until it took its
  group's tables back.  The special services (timer, pop
  revive, transaction check) run as ``ha.acting.special_services`` decides -- exactly while
  master, or with ``enableSlaveActingMaster`` on the group's smallest live member:
  :meth:`apply_role` starts or stops them after a role or membership change.
- An acting slave (RIP-32) also serves receives, acks, invisibility changes and DLQ forwards
  of its group (their records go to its pop journal) and stores nothing in its own log: what
  it must write escapes to a live master (``services.acting.escape``); sends, recalls and
  end-transactions from clients are still refused (the route shows it read-only).  A master
  with acting mode holds pop calls until it took the special state back from its acting
  members (``services.broker.acting_mode``), at most ``handoverTimeoutMillis``.
- Exceptions to the caller are :class:`RequestRejected` (user-facing status) or bugs.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Mapping, Sequence

from ha.acting.special_services import Reason, ReplicaFacts, SpecialServices, decide_special_services
from ha.role.decisions import Role
from ha.role.replica_node import ReplicaNode
from ha.role.serving import Call, Refusal
from metadata.consumer_offsets import ConsumerOffsetTable
from metadata.data_version import DataVersion
from metadata.names import retry_topic
from metadata.offset_write import OffsetWriteDecision, QueueOffset
from metadata.replica_metadata import ReplicaMetadata
from metadata.status import Code, RequestRejected
from metadata.subscription_group import SubscriptionGroupConfig, SubscriptionGroupTable
from metadata.topic_config import TopicConfig, TopicTable
from scheduler.clock import Clock
from scheduler.periodic import PeriodicTasks
from services.acting.escape import EscapedItem, EscapedPlace
from services.acting.fifo_lock import FifoLocks
from services.acting.state import ActingState
from services.broker.acting_mode import start_acting, stop_acting
from services.broker.admin_api import QueueProgress, QueueStatus
from services.broker.api import Delivery, GroupSettings, ReceiveRequest, SendItem, SendOutcome, TransactionCheckSink
from services.broker.config import BrokerConfig
from services.broker.consumer_lag import consumed_topics
from services.broker.config_files import snapshot_document
from services.broker.escape_put import escape_put
from services.broker.groups import GroupManager
from services.broker.long_poll import AppendNotifier
from services.broker.message_query import MessageMatch, QueryResult, query_messages
from services.broker.pop_service import PopService
from services.broker.replica_metadata import snapshot as snapshot_replica_metadata
from services.broker.send_service import SendService
from services.broker.timer_service import TimerService
from services.broker.topics import TopicManager
from services.broker.transaction_service import TransactionService

log = logging.getLogger(__name__)


class Unreplicated:
    """The replication of a broker that has none: its configured role, no waits, no status."""

    puts_wait = False  # a put never awaits wait_replicated

    def __init__(self, config: BrokerConfig):
        self.is_master, self.broker_id = config.is_master, config.broker_id
        self.node = ReplicaNode(config.broker_id, 0)
        for effect in self.node.configure(Role.MASTER if config.is_master else Role.SLAVE).effects:
            self.node.done(effect)  # nothing to start: no replication

    def set_serving(self, **facts: bool) -> None:
        self.node.set_serving(**facts)

    def check_replicas(self) -> None:
        pass

    def metadata_changed(self) -> None:
        pass

    async def wait_replicated(self, end_offset: int) -> None:
        pass

    def status(self) -> None:
        return None


class Broker:
    def __init__(self, config: BrokerConfig, store, clock: Clock, transaction_sink: TransactionCheckSink,
                 replication=None, acting: ActingState | None = None, fifo_locks: FifoLocks | None = None):
        """``replication``: a :class:`services.ha.replica.BrokerReplica` (role, writability,
        replica acks, status); None: the configured role, nothing replicated.  ``acting``: what
        the acting-master drivers learned (None: acting mode off); ``fifo_locks``: the FIFO
        lock quorum (None: local leases only)."""
        self.config, self.store, self.clock = config, store, clock
        self.acting = acting or ActingState()
        self.fifo_locks = fifo_locks or FifoLocks(config.broker_name, lambda: config.broker_id, config, 1, clock, dict)
        self.name, self.cluster = config.broker_name, config.broker_cluster_name
        config_dir = getattr(store, "state_dir", store.config.store_path_root_dir) / "config"  # a moved store's is its epoch's
        self.replication = replication if replication is not None else Unreplicated(config)
        self.topics = TopicManager(config, config_dir, on_change=self.replication.metadata_changed)
        self.groups = GroupManager(config_dir, on_change=self.replication.metadata_changed)
        self.notifier = AppendNotifier()
        self.pop = PopService(config, store, clock, self.topics, self.groups, self.notifier, config_dir)
        self.pop.fifo_gate = self.fifo_locks
        self.pop.serving = lambda: self.node.serves_clients
        self.timer = TimerService(config, store, clock, config_dir)
        self.transactions = TransactionService(config, store, clock, transaction_sink, config_dir)
        self.sender = SendService(config, store, clock, self.topics, self.timer, self.transactions)
        self.tasks = PeriodicTasks(f"broker {config.broker_name}")
        self.special = PeriodicTasks(f"broker {config.broker_name} special services")
        self._special_running = False
        self._role_lock = asyncio.Lock()
        self._handed_over = asyncio.Event()  # wakes pop calls held for the hand-over (the fact is the node's)
        self._pre_online = None
        self.started_ms = 0

    @property
    def broker_id(self) -> int:
        return self.replication.broker_id

    @property
    def node(self) -> ReplicaNode:
        """The replica's core: role, fence and serving facts (what every call is checked against)."""
        return self.replication.node

    @property
    def pre_online(self):
        """The :class:`services.ha.pre_online.PreOnlineDriver` of a master that needs one, or None."""
        return self._pre_online

    @pre_online.setter
    def pre_online(self, driver) -> None:
        self._pre_online = driver
        self.replication.set_serving(pre_online=driver is not None and not driver.done)

    def went_online(self) -> None:
        """The pre-online driver took the group's tables back: this master serves as one."""
        self.replication.set_serving(pre_online=False)

    @property
    def pre_online_pending(self) -> bool:
        """A master that has not taken its group's tables back yet (``ha.role.pre_online``)."""
        return self.node.serving.pre_online

    # ---- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        self.started_ms = self.clock.now_ms()
        self.topics.load()
        self.groups.load()
        self.notifier.bind_loop()
        self.store.add_append_listener(self.notifier.on_append)
        self.store.add_visibility_listener(self.notifier.wake_visible)
        replayed = self.pop.recover()
        self.timer.recover()
        self.transactions.recover()
        log.info("broker %s started: %d pop records replayed", self.name, replayed)
        self._declare_tasks()
        self.tasks.start()
        await self.apply_role()

    def _declare_tasks(self) -> None:
        c = self.config
        self.tasks.declare("flush-state", c.flush_consumer_offset_interval_ms, self.persist_in_background,
                           c.flush_consumer_offset_interval_ms)
        self.special.declare("revive", c.revive_interval_ms, self.pop.revive, c.revive_interval_ms)
        self.special.declare("timer", c.timer_tick_ms, self.timer.tick)
        self.special.declare("transaction-check", c.transaction_scan_interval_ms, self.transactions.check)
        self.tasks.declare("clean-expired", c.clean_expired_interval_ms, self.store.clean_expired, c.clean_expired_interval_ms)

    def special_decision(self) -> SpecialServices:
        facts = ReplicaFacts(role=self.role, own_id=self.config.broker_id, acting_enabled=self.acting.enabled,
                             handover_done=self.acting.handover_done, view=self.acting.view,
                             master_connected=bool(getattr(self.replication, "copying_from_master", False)),
                             copy_caught_up=bool(getattr(self.replication, "copy_caught_up", False)),
                             last_handover_ms=self.acting.last_handover_ms, pre_online=self.pre_online_pending)
        return decide_special_services(facts, self.clock.now_ms(), self.config.member_group_stale_ms)

    async def apply_role(self) -> None:
        """Start or stop the special services as :meth:`special_decision` says.  Before they
        start, the pop, timer and transaction logs copied as a slave are replayed
        (synchronously: no call is served with state older than its log, and its own records
        never interleave with the copied ones)."""
        async with self._role_lock:
            decision = self.special_decision()
            if decision.reason is not self.acting.reason:
                log.info("broker %s-%d: special services: %s", self.name, self.config.broker_id, decision.reason.value)
            self.acting.reason = decision.reason
            if self._special_running and (not decision.run or decision.acting != self.is_acting):
                await self._stop_special()
            if decision.run and not self._special_running:
                self._start_special(decision.acting)
            if decision.reason not in (Reason.AWAITING_HANDOVER, Reason.PRE_ONLINE):
                self.replication.set_serving(handed_over=True)
                self._handed_over.set()

    def _start_special(self, acting: bool) -> None:
        self.pop.catch_up()
        self.timer.catch_up()
        self.transactions.catch_up()
        if acting:
            start_acting(self)
            self.replication.set_serving(acting=True)  # reads go to the end of the log; held calls wake
        self._special_running = True
        self.special.start()
        log.info("broker %s: special services (timer, revive, transaction check) started%s", self.name,
                 " as the acting master: writes escape to live masters" if acting else "")

    async def _stop_special(self) -> None:
        self._special_running = False
        await self.special.stop(finish_runs=True)  # an escape and its resolution are never cut apart
        if self.is_acting:
            stop_acting(self)
            self.replication.set_serving(acting=False)  # reads stop at the confirm offset again
            self.notifier.wake_all()  # long polls waiting here end (they may not deliver from a plain slave)
        await self.catch_up_in_steps()  # a step-down rebuilds from the log: not in one stall
        self.persist()
        log.info("broker %s: special services stopped", self.name)

    @property
    def special_services_running(self) -> bool:
        return self._special_running

    @property
    def is_acting(self) -> bool:
        """A slave running its group's special services (serving receives, escaping writes)."""
        return self.node.serving.acting

    def open_state_version(self, state_version: int) -> None:
        """Controller mode, a new master: every versioned table it may advance (consumer offsets,
        pop state, timer checkpoint, transaction checkpoint) moves to ``state_version``, the
        controller's master epoch, and is written -- so it is newer than any table an older
        master wrote, whatever that master's counters say (scenario 33)."""
        self.pop.catch_up()
        self.pop.open_state_version(state_version)
        self.pop.persist()
        self.timer.open_state_version(state_version)
        self.transactions.open_state_version(state_version)

    def persist(self) -> None:
        self.pop.persist()
        self.timer.persist()
        self.transactions.persist()

    async def catch_up_in_steps(self) -> None:
        """Bring the pop table, the timer index and the transaction table up to their logs one
        read (1024 records) at a time, yielding to the loop in between, while this broker does
        not serve pop calls; a serving one catches up at once.  After a step-down or a cut they
        rebuild from the start of their logs: in one go, a slave that had stepped down stalled
        every broker of its container for seconds (bench/chaos.py: 2.4 s for ~220,000 pop
        records; bench/bench_rebuild.py measures it)."""
        for service in (self.pop, self.timer, self.transactions):
            while not service.catch_up_some(None if self.pop.serving() else 1):
                await asyncio.sleep(0)

    async def persist_in_background(self) -> None:
        """The periodic snapshot: the documents are taken here, with no await between the
        tables and them (the logs are caught up in steps first); their fsyncs run in a worker
        thread.  On the loop, a slow disk's fsyncs (two per file, four files) stalled the whole
        container past the pause detector and cost its masters (bench/chaos.py, slow-disk-master)."""
        await self.catch_up_in_steps()
        await self.timer.prepare_shared()  # the timer checkpoint's text, off the loop
        writes: list = []
        collect = lambda path, document: writes.append(snapshot_document(path, document))  # noqa: E731
        self.pop.persist(collect, periodic=True)
        self.timer.persist(collect, periodic=True)
        self.transactions.persist(collect, periodic=True)
        try:
            await asyncio.to_thread(lambda: [write() for write in writes])
        except OSError as failure:  # a full or failing disk: the files on disk stay whole and older
            for service in (self.pop, self.timer, self.transactions):
                service.forget_written()  # the next snapshot writes them, changed or not
            log.warning("broker %s: state snapshot not written (%s); the next one is tried in %d ms",
                        self.name, failure, self.config.flush_consumer_offset_interval_ms)

    async def stop(self) -> None:
        async with self._role_lock:
            if self._special_running:
                await self._stop_special()
        await self.tasks.stop()
        self.persist()

    def _serves(self, call: Call) -> None:
        """Raise the refusal the node gives for ``call`` now (ha.role.serving), if any."""
        refusal = self.node.refusal(call, self.clock.monotonic_ms())
        if refusal is not None:
            raise self._rejected(refusal, call)

    def _rejected(self, refusal: Refusal, call: Call) -> RequestRejected:
        who = f"broker {self.name}-{self.broker_id}"
        if refusal is Refusal.ACTING_READS_ONLY:
            return RequestRejected(Code.FORBIDDEN, f"broker {self.name}-{self.config.broker_id} is a slave acting for "
                                   "its absent master: it serves reads and receives only, not writes; send to "
                                   "another broker of the topic")
        if refusal is Refusal.PAUSED:
            return RequestRejected(Code.HA_NOT_AVAILABLE, f"broker {self.name}: confirming with the controller that "
                                   "it is still master after a pause")
        if refusal is Refusal.AWAITING_HANDOVER:
            return RequestRejected(Code.HA_NOT_AVAILABLE, f"broker {self.name}: taking the special state back from "
                                   "the slave that acted while it was away")
        if refusal is Refusal.PRE_ONLINE:
            if call is Call.ESCAPE_PUT:  # the bridge tries another master, or waits (issue 24 defect 2)
                return RequestRejected(Code.HA_NOT_AVAILABLE, f"broker {self.name} is in pre-online: it takes no "
                                       "escaped messages until it is online")
            if call is Call.TABLES:
                return RequestRejected(Code.PRECONDITION_FAILED, f"broker {self.name} is in pre-online: its tables "
                                       "are not the group's yet; sync again once it is online")
            return RequestRejected(Code.PRECONDITION_FAILED, f"broker {self.name} is in pre-online: it takes its "
                                   "group's offsets back from its slaves first; write again once it is online")
        return RequestRejected(Code.FORBIDDEN, f"{who} is a {self.role.lower()}")  # NOT_MASTER, IN_TRANSITION

    async def _pop_servable(self) -> None:
        """Pop calls: a master (once its hand-over is done, waited for at most
        ``handoverTimeoutMillis``) or an acting slave."""
        if self.pop.rebuilding:  # promoted during a rebuild in steps: no call sees a partial table
            self.pop.catch_up()
        if self.node.refusal(Call.POP, self.clock.monotonic_ms()) is Refusal.AWAITING_HANDOVER:
            try:
                await asyncio.wait_for(asyncio.shield(self._handed_over.wait()), self.config.handover_timeout_ms / 1000)
            except asyncio.TimeoutError:
                pass
        self._serves(Call.POP)

    # ---- BrokerApi ----------------------------------------------------------------------------
    async def send(self, items: Sequence[SendItem]) -> list[SendOutcome]:
        self._serves(Call.WRITE)
        self.replication.check_replicas()
        outcomes = await self.sender.send(items)
        if self.replication.puts_wait:  # three coroutines a send less on an ASYNC_MASTER
            await self._replicated()
        return outcomes

    async def _replicated(self) -> None:
        """SYNC_MASTER: the replicas hold everything written so far (our records included)."""
        await self.replication.wait_replicated(self.store.commit_log_max_offset)

    async def end_transaction(self, topic: str, message_id: str, transaction_id: str, commit: bool, from_check: bool) -> None:
        """A resolution; an acting slave resolves its own halves too (a commit escapes the message)."""
        self._serves(Call.RESOLVE)
        if self.is_acting:
            await self.transactions.end(topic, message_id, transaction_id, commit)
            return
        await self.transactions.end(topic, message_id, transaction_id, commit)
        if commit:
            await self._replicated()

    def holds_transaction(self, topic: str, message_id: str, transaction_id: str) -> bool:
        """This broker can resolve the half ``transaction_id`` names: it is master or acting and has it."""
        return self.node.serves_clients and self.transactions.holds(topic, message_id, transaction_id)

    async def recall(self, topic: str, recall_handle: str) -> str:
        self._serves(Call.WRITE)
        return await self.timer.recall(topic, recall_handle)

    async def receive(self, request: ReceiveRequest) -> list[Delivery]:
        await self._pop_servable()
        deliveries = await self.pop.receive(request)
        if deliveries:
            await self._pop_replicated()
        return deliveries

    async def ack(self, group: str, topic: str, message_id: str, receipt_handle: str) -> None:
        await self._pop_servable()
        await self.pop.ack(group, receipt_handle)
        await self._pop_replicated()

    async def ack_many(self, group: str, topic: str, receipt_handles: Sequence[str]) -> list[RequestRejected | None]:
        await self._pop_servable()
        outcomes = await self.pop.ack_many(group, receipt_handles)
        if any(outcome is None for outcome in outcomes):
            await self._pop_replicated()
        return outcomes

    async def change_invisible_duration(self, group: str, topic: str, message_id: str, receipt_handle: str, invisible_ms: int) -> str:
        await self._pop_servable()
        handle = await self.pop.change_invisible(group, receipt_handle, invisible_ms)
        await self._pop_replicated()
        return handle

    async def forward_to_dead_letter_queue(self, group: str, topic: str, message_id: str, receipt_handle: str) -> None:
        await self._pop_servable()
        await self.pop.forward_to_dead_letter(group, receipt_handle)
        await self._pop_replicated()

    async def _pop_replicated(self) -> None:
        """A master answers a pop call once the replicas hold its pop records, as it answers a
        send (SYNC_MASTER): a deposed master that has not heard yet cannot hand out messages or
        take acks its successor never sees (found by bench/chaos.py: a consumer offset rolled
        back, messages delivered twice at attempt 1).  An acting slave's records are in its
        fsynced pop journal, outside the commit log: nothing to wait for."""
        if not self.is_acting:
            await self._replicated()

    async def escape_put(self, items: Sequence[EscapedItem]) -> list[EscapedPlace]:
        """Store what another group's acting slave escaped here (services.broker.escape_put); not
        while in pre-online (issue 24 defect 2: the bridge then tries another master, or waits)."""
        self._serves(Call.ESCAPE_PUT)
        self.replication.check_replicas()
        return await escape_put(self, items)

    async def query_offset(self, topic: str, queue_id: int, policy: str, timestamp_ms: int | None) -> int:
        """BEGINNING: the queue's min offset; END: its max; TIMESTAMP: the first message stored at
        or after ``timestamp_ms``.  A master's read, answered by an acting slave too."""
        self._serves(Call.READ)
        config = self.topics.get(topic)
        if config is None and topic not in self.store.queues():
            raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist on broker {self.name}")
        if config is not None and queue_id >= config.queue_nums and queue_id not in self.store.queues().get(topic, []):
            raise RequestRejected(Code.BAD_REQUEST, f"topic {topic} has no queue {queue_id} on broker {self.name}")
        if policy == "BEGINNING":
            return self.store.min_offset(topic, queue_id)
        if policy == "END":
            return self.store.max_offset(topic, queue_id)
        return self.store.offset_for_timestamp(topic, queue_id, timestamp_ms)

    def group_settings(self, group: str) -> GroupSettings:
        config = self.groups.get(group)
        if config is None:
            return GroupSettings()
        return GroupSettings(fifo=config.consume_message_orderly, max_delivery_attempts=config.max_delivery_attempts,
                             known=True)

    # ---- periodic work, callable directly by tests ----------------------------------------------
    async def run_revive(self) -> int:
        return await self.pop.revive()

    async def run_timer(self) -> int:
        return await self.timer.tick()

    async def run_transaction_check(self) -> int:
        return await self.transactions.check()

    # ---- BrokerAdminApi -----------------------------------------------------------------------
    @property
    def role(self) -> str:
        role = getattr(self.replication, "role", None)
        if role is not None:
            return role.value
        return "MASTER" if self.replication.is_master else "SLAVE"

    def topic_table(self) -> TopicTable:
        return self.topics.table

    async def upsert_topic(self, config: TopicConfig) -> None:
        self.topics.upsert(config, self.clock.now_ms())

    async def delete_topic(self, topic: str) -> None:
        if self.topics.delete(topic, self.clock.now_ms()):
            self.store.delete_topic(topic)

    def group_table(self) -> SubscriptionGroupTable:
        return self.groups.table

    async def upsert_group(self, config: SubscriptionGroupConfig) -> None:
        self.groups.upsert(config, self.clock.now_ms())

    async def delete_group(self, group: str) -> None:
        self.groups.delete(group, self.clock.now_ms())
        self.pop.drop_group(group)
        self.pop.persist()

    def topic_status(self, topic: str) -> list[QueueStatus]:
        config = self.topics.get(topic)
        stored = self.store.queues().get(topic, [])
        if config is None and not stored:
            raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist on broker {self.name}")
        # a slave may hold a topic's messages before its metadata sync brought the topic's config
        queue_ids = sorted(set(range(config.queue_nums if config else 0)) | set(stored))
        rows = []
        for queue_id in queue_ids:
            max_offset = self.store.max_offset(topic, queue_id)
            newest = self.store.get(topic, queue_id, max_offset - 1, 1).messages if max_offset > 0 else []
            rows.append(QueueStatus(queue_id, self.store.min_offset(topic, queue_id), max_offset,
                                    newest[0].store_timestamp_ms if newest else 0))
        return rows

    def consumer_progress(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        # the offset table's topic@group keys, not its rows: a million queues cost the metrics refresh seconds
        topics = [topic] if topic else sorted(consumed_topics(self, {group}).get(group, ()))
        rows = []
        for name in topics:
            for queue_id in self.progress_queues(group, name):
                committed = self.pop.committed_offset(group, name, queue_id) or 0
                rows.append(QueueProgress(name, queue_id, self.store.max_offset(name, queue_id), committed,
                                          self.pop.inflight_count(group, name, queue_id)))
        return rows

    def progress_queues(self, group: str, topic: str) -> range:
        """The queues of ``topic`` a group's progress counts (a group's retry topic has one)."""
        config = self.topics.get(topic)
        return range(config.queue_nums) if config else range(1 if topic == retry_topic(group) else 0)

    def consumer_offset_table(self) -> ConsumerOffsetTable:
        self.pop.catch_up()
        return self.pop.keeper.versioned_table(self.clock.now_ms())

    def _offsets_writable(self) -> None:
        """An operator's offset write or reset: a master, and not in pre-online (the tables it
        takes back from its slaves would override the write)."""
        self._serves(Call.OFFSET_WRITE)

    async def write_consumer_offsets(self, expected: DataVersion, offsets: Sequence[QueueOffset]) -> OffsetWriteDecision:
        self._offsets_writable()
        return await self.pop.write_offsets(expected, offsets)

    def replica_metadata(self) -> ReplicaMetadata:
        """The tables a slave syncs from its master; refused while this master is in pre-online:
        its tables may be older than the slave's, which it is about to take back (a slave that
        copied them first would hand the stale copy back: upstream #1094's rollback)."""
        self._serves(Call.TABLES)
        return snapshot_replica_metadata(self)

    async def reset_consumer_offsets(self, group: str, topic: str, timestamp_ms: int | None) -> list[tuple[int, int, int]]:
        """Each queue of ``topic`` to the first message stored at or after ``timestamp_ms``
        (``None``: its max offset, skipping everything accumulated); masters only.  Returns
        (queue id, old offset, new offset) per queue."""
        self._offsets_writable()
        config = self.topics.get(topic)
        if config is None:
            raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist on broker {self.name}")
        if self.groups.get(group) is None:
            raise RequestRejected(Code.CONSUMER_GROUP_NOT_FOUND, f"consumer group {group} does not exist on broker {self.name}")
        targets = {queue_id: (self.store.max_offset(topic, queue_id) if timestamp_ms is None
                              else self.store.offset_for_timestamp(topic, queue_id, timestamp_ms))
                   for queue_id in range(config.queue_nums)}
        return await self.pop.reset_offsets(group, topic, targets)

    async def query_messages(self, topic: str, match: MessageMatch, max_scan: int, max_results: int) -> QueryResult:
        queue_ids = sorted(set(range(self.topics.get(topic).queue_nums if self.topics.get(topic) else 0))
                           | set(self.store.queues().get(topic, [])))
        if not queue_ids:
            raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist on broker {self.name}")
        return await query_messages(self.store, topic, queue_ids, match, max_scan, max_results)

    def apply_config(self, config: BrokerConfig) -> None:
        """A live configuration change (``services.broker.live_config``): every part of this
        broker that holds the old config gets the new one; identity and role never change."""
        old = self.config
        assert (config.broker_name, config.broker_id, config.broker_role) == (old.broker_name, old.broker_id, old.broker_role)
        for part in (self, self.topics, self.pop, self.timer, self.transactions, self.sender):
            if getattr(part, "config", None) is old:
                part.config = config

    def status(self) -> Mapping[str, object]:
        queues = self.store.queues()
        messages = sum(self.store.max_offset(t, q) - self.store.min_offset(t, q) for t, ids in queues.items() for q in ids)
        return {"brokerName": self.name, "brokerId": self.broker_id, "cluster": self.cluster, "role": self.role,
                "brokerRole": self.config.broker_role.value, "uptimeMs": self.clock.now_ms() - self.started_ms,
                "specialServicesRunning": self._special_running, "acting": self.is_acting,
                "actingMaster": self.acting.status(),
                **({"preOnline": self.pre_online.status()} if self.pre_online is not None else {}),
                "storeSizeBytes": self.store.disk_usage_bytes(), "messageCount": messages,
                "topicCount": len(self.topics.table.topics), "groupCount": len(self.groups.table.groups),
                **({"ha": ha} if (ha := self.replication.status()) is not None else {})}
