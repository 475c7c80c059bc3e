"""Configuration of one broker (not its store: that is ``store.config.StoreConfig``).

Rules: one frozen dataclass; keys are RocketMQ's where one exists (``brokerName``,
``transactionTimeOut``, ...), RelayMQ-only keys are camelCase in the same spirit; every limit
the broker enforces is a field here with its unit and default documented in its declaration.
The container binds it once with :func:`metadata.config.bind`; the broker trusts it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ha.replication.config import BrokerRole
from metadata.config import config_field

DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class BrokerConfig:
    broker_cluster_name: str = config_field("brokerClusterName", "DefaultCluster", doc="cluster this broker registers in")
    broker_name: str = config_field("brokerName", "broker-a", doc="name of the broker group (master and slaves share it)")
    broker_id: int = config_field("brokerId", 0, minimum=0, doc="0 for the master, >0 for slaves")
    broker_role: BrokerRole = config_field("brokerRole", BrokerRole.ASYNC_MASTER, unit="enum", doc="ASYNC_MASTER, SYNC_MASTER or SLAVE")
    auto_create_topic_enable: bool = config_field("autoCreateTopicEnable", False, doc="create unknown topics on first send (as NORMAL)")
    default_topic_queue_nums: int = config_field("defaultTopicQueueNums", 8, minimum=1, maximum=1024, unit="queues", doc="queues of an auto-created topic")
    transaction_timeout_ms: int = config_field("transactionTimeOut", 6_000, minimum=0, unit="ms", doc="age of a half message before its first check")
    transaction_check_interval_ms: int = config_field("transactionCheckInterval", 30_000, minimum=1, unit="ms", doc="period between checks of one half message")
    transaction_check_max: int = config_field("transactionCheckMax", 15, minimum=0, unit="checks", doc="checks before an unresolved half message is discarded")
    transaction_scan_interval_ms: int = config_field("transactionScanInterval", 1_000, minimum=1, unit="ms", doc="period of the transaction check service's scan")
    internal_put_retries: int = config_field("internalPutRetries", 5, minimum=0, maximum=100, unit="retries", doc="retries of an internal re-put (commit, timer, retry, DLQ) on a transient store error")
    internal_put_retry_backoff_ms: int = config_field("internalPutRetryBackoffMs", 200, minimum=1, unit="ms", doc="pause between internal re-put retries")
    max_delay_time_ms: int = config_field("maxDelayTimeMills", DAY_MS, minimum=1, unit="ms", doc="farthest delivery_timestamp ahead of now")
    timer_tick_ms: int = config_field("timerTickMs", 100, minimum=1, unit="ms", doc="period of the timer service (due-message scan)")
    timer_batch_max: int = config_field("timerBatchMax", 256, minimum=1, unit="messages", doc="most due messages delivered per timer tick")
    consumer_offset_update_version_step: int = config_field("consumerOffsetUpdateVersionStep", 500, minimum=1, unit="commits", doc="offset commits per DataVersion bump")
    delay_offset_update_version_step: int = config_field("delayOffsetUpdateVersionStep", 200, minimum=1, unit="resolutions",
                                                         doc="delay (timer) message resolutions -- deliveries, escapes, "
                                                             "recalls -- per DataVersion bump of the timer checkpoint")
    flush_consumer_offset_interval_ms: int = config_field("flushConsumerOffsetInterval", 5_000, minimum=1, unit="ms", doc="period of the offset + pop state snapshot")
    revive_interval_ms: int = config_field("reviveInterval", 1_000, minimum=1, unit="ms", doc="period of the scan that redelivers expired in-flight messages")
    pop_invisible_time_auto_renew_ms: int = config_field("popInvisibleTimeAutoRenewMs", 60_000, minimum=1, unit="ms", doc="invisible time of auto-renew (push consumer) receives")
    pop_inflight_max_per_queue: int = config_field("popInflightMaxPerQueue", 20_000, minimum=1, unit="messages", doc="most in-flight messages of one group in one queue")
    pop_scan_max: int = config_field("popScanMax", 256, minimum=1, unit="messages", doc="most consume-queue entries read per queue per receive (tag mismatches included)")
    max_receive_batch_size: int = config_field("maxReceiveBatchSize", 32, minimum=1, maximum=1024, unit="messages", doc="most messages in one receive")
    long_polling_max_ms: int = config_field("longPollingMaxMs", 20_000, minimum=0, unit="ms", doc="longest wait of a receive with nothing to deliver")
    revive_batch_max: int = config_field("reviveBatchMax", 512, minimum=1, unit="messages", doc="most expired in-flight messages handled per revive run")
    send_dedupe_window_ms: int = config_field("sendDedupeWindowMs", 60_000, minimum=0, unit="ms", doc="how long a message id is remembered to drop client retries: at least this long (unless sendDedupeMaxEntries / 2 newer ids came since), never past twice this")
    send_dedupe_max_entries: int = config_field("sendDedupeMaxEntries", 100_000, minimum=0, unit="entries", doc="bound of the send de-duplication memory: message ids kept, in two generations of half each (services.broker.dedupe)")
    clean_expired_interval_ms: int = config_field("cleanResourceInterval", 10_000, minimum=1, unit="ms", doc="period of the store retention clean")
    slave_synchronize_period_ms: int = config_field("slaveSynchronizePeriod", 10_000, minimum=1, unit="ms", doc="period of a slave's metadata sync from its master (topics, groups, offsets, timer checkpoint)")
    slave_synchronize_timeout_ms: int = config_field("slaveSynchronizeTimeoutMillis", 3_000, minimum=1, unit="ms", doc="deadline of one metadata fetch from the master")
    listen_port: int = config_field("listenPort", 0, minimum=0, maximum=65535, unit="port",
                                    doc="this broker's own client endpoint in the container (0: none, clients use the "
                                        "container's grpcServerPort); routes name the listenPort of every replica of "
                                        "the group, so clients reach a new master without a route refresh")
    enable_controller_mode: bool = config_field("enableControllerMode", False,
                                                doc="the controller assigns the broker id and role (RIP-44); brokerId and "
                                                    "brokerRole are then not configured")
    controller_addr: str = config_field("controllerAddr", "", unit="host:port;...",
                                        doc="controller members (enableControllerMode), ';'-separated")
    sync_broker_metadata_period_ms: int = config_field("syncBrokerMetadataPeriod", 5_000, minimum=10, unit="ms",
                                                       doc="controller mode: poll the group's view (the watch stream "
                                                           "pushes changes at once; this is the fallback)")
    check_sync_state_set_period_ms: int = config_field("checkSyncStateSetPeriod", 5_000, minimum=10, unit="ms",
                                                       doc="controller mode: a master proposes a refused or unanswered "
                                                           "SyncStateSet change again after this")
    sync_controller_metadata_period_ms: int = config_field("syncControllerMetadataPeriod", 10_000, minimum=10,
                                                           unit="ms", doc="controller mode: look up the controller leader")
    controller_heartbeat_timeout_ms: int = config_field("controllerHeartBeatTimeoutMills", 10_000, minimum=100,
                                                        unit="ms", doc="controller mode: the controller declares the broker "
                                                            "dead after this silence; a master that paused this long "
                                                            "writes nothing until the controller confirms its role")
    first_election_wait_ms: int = config_field("firstElectionWaitMillis", 10_000, minimum=0, maximum=600_000, unit="ms",
                                               doc="controller mode, a group's very first election only: wait up to "
                                                   "this long for all totalReplicas replicas to register, so that "
                                                   "brokerElectionPriority picks the first master (ours)")
    broker_election_priority: int = config_field("brokerElectionPriority", 2**31 - 1, minimum=1, maximum=2**31 - 1,
                                                 doc="controller mode: lower wins an election among equally "
                                                     "up-to-date replicas (also the first one)")

    enable_slave_acting_master: bool = config_field(
        "enableSlaveActingMaster", False,
        doc="RIP-32: when a group's master is gone, its live slave with the smallest id runs the group's special "
            "services (delay messages, transaction checks, pop retries), answers its reads and receives, and escapes "
            "what it must write to a live master; not with enableControllerMode")
    enable_remote_escape: bool = config_field(
        "enableRemoteEscape", False,
        doc="an acting slave may escape writes to masters in other containers (without it only to a master in its "
            "own container); needs enableSlaveActingMaster")
    sync_broker_member_group_period_ms: int = config_field(
        "syncBrokerMemberGroupPeriod", 1_000, minimum=100, maximum=600_000, unit="ms",
        doc="acting mode: poll the nameserver for the group's live members (the nameserver's push, "
            "notifyMinBrokerIdChanged, is faster; this is the fallback)")
    member_group_stale_ms: int = config_field(
        "memberGroupStaleMillis", 10_000, minimum=1_000, maximum=600_000, unit="ms",
        doc="acting mode: a slave whose last view of the group's members is older than this stops acting (it may "
            "have missed its master's return) (ours)")
    escape_timeout_ms: int = config_field(
        "escapeTimeoutMillis", 3_000, minimum=100, maximum=60_000, unit="ms",
        doc="deadline of one escape to another container's master (upstream's 3000 ms send timeout)")
    escape_route_max_age_ms: int = config_field(
        "escapeRouteMaxAgeMillis", 1_000, minimum=0, maximum=60_000, unit="ms",
        doc="an escape re-reads the topic's route from the nameserver when its copy is older than this (ours)")
    escape_exclude_ms: int = config_field(
        "escapeExcludeMillis", 10_000, minimum=100, maximum=600_000, unit="ms",
        doc="another container's master that did not answer an escape is not chosen again for this long "
            "(upstream #7923); one in the same container only until escapeRetryIntervalMillis (ours)")
    escape_retry_interval_ms: int = config_field(
        "escapeRetryIntervalMillis", 1_000, minimum=10, maximum=60_000, unit="ms",
        doc="after an escape found no target or failed, the same message is tried again after this (ours)")
    lock_in_strict_mode: bool = config_field(
        "lockInStrictMode", False,
        doc="FIFO delivery: a replica delivers a FIFO queue only while a quorum of the configured totalReplicas "
            "grants it the queue's lock (order over availability); false: its own lock")
    fifo_lock_lease_ms: int = config_field(
        "fifoLockLeaseMillis", 60_000, minimum=1_000, maximum=600_000, unit="ms",
        doc="how long a FIFO queue's lock lasts without renewal (upstream's lockMaxLiveTime) (ours)")
    lock_quorum_timeout_ms: int = config_field(
        "lockQuorumTimeoutMillis", 2_000, minimum=100, maximum=60_000, unit="ms",
        doc="lockInStrictMode: how long a replica waits for its peers' grants (upstream's 2000 ms)")
    handover_timeout_ms: int = config_field(
        "handoverTimeoutMillis", 3_000, minimum=100, maximum=60_000, unit="ms",
        doc="a returning master holds pop calls at most this long while it takes its group's state back "
            "(pre-online, or the hand-over); with skipPreOnline in acting mode, the deadline of its call to each "
            "member; a member that does not answer is skipped (ours)")
    skip_pre_online: bool = config_field(
        "skipPreOnline", False,
        doc="a master with totalReplicas > 1 goes online at once instead of first taking its group's tables back "
            "from its slaves (pre-online: no registration, heartbeat or special service until then)")
    pre_online_transfer_timeout_ms: int = config_field(
        "preOnlineTransferTimeoutMillis", 10_000, minimum=100, maximum=600_000, unit="ms",
        doc="pre-online: how long a master waits for a slave's replication to reach TRANSFER after telling it where "
            "it is (upstream's 10 s CONNECTION_ESTABLISH_TIMEOUT)")
    pre_online_sync_timeout_ms: int = config_field(
        "preOnlineSyncTimeoutMillis", 30_000, minimum=100, maximum=600_000, unit="ms",
        doc="pre-online: deadline of each call to a slave (telling it where the master is; pulling its consumer "
            "offsets, timer, transaction and pop state) (ours)")
    pre_online_retry_interval_ms: int = config_field(
        "preOnlineRetryIntervalMillis", 1_000, minimum=10, maximum=600_000, unit="ms",
        doc="pre-online: pause after a failed attempt (upstream's 1 s)")
    pre_online_max_attempts: int = config_field(
        "preOnlineMaxAttempts", 0, minimum=0, maximum=1_000_000, unit="attempts",
        doc="pre-online: go online with the master's own tables after this many failed attempts (0: never; the "
            "master stays out of routes until a reachable slave was synced) (ours)")

    def __post_init__(self) -> None:
        if not isinstance(self.broker_role, BrokerRole):
            object.__setattr__(self, "broker_role", BrokerRole(self.broker_role))

    @property
    def is_master(self) -> bool:
        return self.broker_role is not BrokerRole.SLAVE

    @property
    def controller_addresses(self) -> list[str]:
        return [a.strip() for a in self.controller_addr.split(";") if a.strip()]
