"""One broker: a thin composition of its managers and services, implementing BrokerApi and
BrokerAdminApi.

Rules:
- ``start`` loads topics, groups and every checkpoint, replays the pop / timer / transaction
  logs (recovery), then starts the periodic tasks (offset + state flush, revive, timer,
  transaction check, store retention).  ``stop`` stops the tasks, then persists everything;
  the container calls ``store.shutdown()`` afterwards.
- The role is the replication's (``services.ha.replica.BrokerReplica``; without one, the
  configured ``brokerRole`` with nothing replicated), and it may change at runtime: only a
  MASTER takes client calls; a SLAVE or FENCED broker answers reads only (every mutating
  client call and an admin offset write is refused).  The special services (timer, pop
  revive, transaction check) run exactly while the broker is master: :meth:`apply_role`
  starts or stops them after a role change.
- Exceptions to the caller are :class:`RequestRejected` (user-facing status) or bugs.
"""
from __future__ import annotations

import logging
from typing import Mapping, Sequence

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
from services.broker.admin_api import QueueProgress, QueueStatus
from services.broker.api import Delivery, GroupSettings, ReceiveRequest, SendItem, SendOutcome, TransactionCheckSink
from services.broker.config import BrokerConfig
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


class _Unreplicated:
    """The replication of a broker that has none: its configured role, no waits, no status."""

    def __init__(self, config: BrokerConfig):
        self.is_master, self.broker_id = config.is_master, config.broker_id

    def check_writable(self) -> None:
        pass

    def metadata_changed(self) -> None:
        pass

    async def wait_replicated(self, end_offset: int) -> None:
        pass

    def status(self) -> None:
        return None


class Broker:
    def __init__(self, config: BrokerConfig, store, clock: Clock, transaction_sink: TransactionCheckSink,
                 replication=None):
        """``replication``: a :class:`services.ha.replica.BrokerReplica` (role, writability,
        replica acks, status); None: the configured role, nothing replicated."""
        self.config, self.store, self.clock = config, store, clock
        self.name, self.cluster = config.broker_name, config.broker_cluster_name
        config_dir = store.config.store_path_root_dir / "config"
        self.replication = replication if replication is not None else _Unreplicated(config)
        self.topics = TopicManager(config, config_dir, on_change=self.replication.metadata_changed)
        self.groups = GroupManager(config_dir, on_change=self.replication.metadata_changed)
        self.notifier = AppendNotifier()
        self.pop = PopService(config, store, clock, self.topics, self.groups, self.notifier, config_dir)
        self.timer = TimerService(config, store, clock, config_dir)
        self.transactions = TransactionService(config, store, clock, transaction_sink, config_dir)
        self.sender = SendService(config, store, clock, self.topics, self.timer, self.transactions)
        self.tasks = PeriodicTasks(f"broker {config.broker_name}")
        self.special = PeriodicTasks(f"broker {config.broker_name} special services")
        self._special_running = False
        self.started_ms = 0

    @property
    def broker_id(self) -> int:
        return self.replication.broker_id

    # ---- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        self.started_ms = self.clock.now_ms()
        self.topics.load()
        self.groups.load()
        self.notifier.bind_loop()
        self.store.add_append_listener(self.notifier.on_append)
        self.store.add_visibility_listener(self.notifier.wake_all)
        replayed = self.pop.recover()
        self.timer.recover()
        self.transactions.recover()
        log.info("broker %s started: %d pop records replayed", self.name, replayed)
        self._declare_tasks()
        self.tasks.start()
        await self.apply_role()

    def _declare_tasks(self) -> None:
        c = self.config
        self.tasks.declare("flush-state", c.flush_consumer_offset_interval_ms, self.persist, c.flush_consumer_offset_interval_ms)
        self.special.declare("revive", c.revive_interval_ms, self.pop.revive, c.revive_interval_ms)
        self.special.declare("timer", c.timer_tick_ms, self.timer.tick)
        self.special.declare("transaction-check", c.transaction_scan_interval_ms, self.transactions.check)
        self.tasks.declare("clean-expired", c.clean_expired_interval_ms, self.store.clean_expired, c.clean_expired_interval_ms)

    async def apply_role(self) -> None:
        """Run the special services exactly while master.  A new master first replays the pop,
        timer and transaction logs it copied as a slave (synchronously: no call is served with
        state older than its log, and its own records never interleave with the copied ones)."""
        if self.replication.is_master and not self._special_running:
            self.pop.catch_up()
            self.timer.catch_up()
            self.transactions.catch_up()
            self._special_running = True
            self.special.start()
            log.info("broker %s: special services (timer, revive, transaction check) started", self.name)
        elif not self.replication.is_master and self._special_running:
            self._special_running = False
            await self.special.stop()
            self.persist()
            log.info("broker %s: special services stopped", self.name)

    @property
    def special_services_running(self) -> bool:
        return self._special_running

    def persist(self) -> None:
        self.pop.persist()
        self.timer.persist()
        self.transactions.persist()

    async def stop(self) -> None:
        await self.special.stop()
        self._special_running = False
        await self.tasks.stop()
        self.persist()

    def _writable(self) -> None:
        if not self.replication.is_master:
            raise RequestRejected(Code.FORBIDDEN, f"broker {self.name}-{self.broker_id} is a {self.role.lower()}")

    # ---- BrokerApi ----------------------------------------------------------------------------
    async def send(self, items: Sequence[SendItem]) -> list[SendOutcome]:
        self._writable()
        self.replication.check_writable()
        outcomes = await self.sender.send(items)
        await self._replicated()
        return outcomes

    async def _replicated(self) -> None:
        """SYNC_MASTER: the replicas hold everything written so far (our records included)."""
        await self.replication.wait_replicated(self.store.commit_log_max_offset)

    async def end_transaction(self, topic: str, message_id: str, transaction_id: str, commit: bool, from_check: bool) -> None:
        self._writable()
        await self.transactions.end(topic, message_id, transaction_id, commit)
        if commit:
            await self._replicated()

    async def recall(self, topic: str, recall_handle: str) -> str:
        self._writable()
        return await self.timer.recall(topic, recall_handle)

    async def receive(self, request: ReceiveRequest) -> list[Delivery]:
        self._writable()
        return await self.pop.receive(request)

    async def ack(self, group: str, topic: str, message_id: str, receipt_handle: str) -> None:
        self._writable()
        await self.pop.ack(group, receipt_handle)

    async def ack_many(self, group: str, topic: str, receipt_handles: Sequence[str]) -> list[RequestRejected | None]:
        self._writable()
        return await self.pop.ack_many(group, receipt_handles)

    async def change_invisible_duration(self, group: str, topic: str, message_id: str, receipt_handle: str, invisible_ms: int) -> str:
        self._writable()
        return await self.pop.change_invisible(group, receipt_handle, invisible_ms)

    async def forward_to_dead_letter_queue(self, group: str, topic: str, message_id: str, receipt_handle: str) -> None:
        self._writable()
        await self.pop.forward_to_dead_letter(group, receipt_handle)

    def group_settings(self, group: str) -> GroupSettings:
        config = self.groups.get(group)
        if config is None:
            return GroupSettings()
        return GroupSettings(fifo=config.consume_message_orderly, max_delivery_attempts=config.max_delivery_attempts)

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
        topics = [topic] if topic else sorted({t for t, g, _, _ in self.pop.keeper.table.rows() if g == group}
                                               | {k.topic for k, _ in self.pop.table.items() if k.group == group})
        rows = []
        for name in topics:
            config = self.topics.get(name)
            queues = range(config.queue_nums) if config else range(1 if name == retry_topic(group) else 0)
            for queue_id in queues:
                committed = self.pop.committed_offset(group, name, queue_id) or 0
                rows.append(QueueProgress(name, queue_id, self.store.max_offset(name, queue_id), committed,
                                          self.pop.inflight_count(group, name, queue_id)))
        return rows

    def consumer_offset_table(self) -> ConsumerOffsetTable:
        self.pop.catch_up()
        return self.pop.keeper.versioned_table(self.clock.now_ms())

    async def write_consumer_offsets(self, expected: DataVersion, offsets: Sequence[QueueOffset]) -> OffsetWriteDecision:
        self._writable()
        return await self.pop.write_offsets(expected, offsets)

    def replica_metadata(self) -> ReplicaMetadata:
        return snapshot_replica_metadata(self)

    async def reset_consumer_offsets(self, group: str, topic: str, timestamp_ms: int | None) -> list[tuple[int, int, int]]:
        """Each queue of ``topic`` to the first message stored at or after ``timestamp_ms``
        (``None``: its max offset, skipping everything accumulated); masters only.  Returns
        (queue id, old offset, new offset) per queue."""
        self._writable()
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
                "specialServicesRunning": self._special_running,
                "storeSizeBytes": self.store.disk_usage_bytes(), "messageCount": messages,
                "topicCount": len(self.topics.table.topics), "groupCount": len(self.groups.table.groups),
                **({"ha": ha} if (ha := self.replication.status()) is not None else {})}
