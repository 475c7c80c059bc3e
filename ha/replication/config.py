"""Replication configuration: one frozen dataclass with RocketMQ's key names (reference 6.2).

Rules: every limit of the replication cores is a field here with its unit and default; the
container binds it with :func:`metadata.config.bind`; the cores trust the values.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from metadata.config import ConfigError, config_field


class BrokerRole(str, Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


@dataclass(frozen=True)
class HaConfig:
    broker_role: BrokerRole = config_field(
        "brokerRole", BrokerRole.ASYNC_MASTER, unit="enum",
        doc="ASYNC_MASTER acknowledges after the local write; SYNC_MASTER after the replicas too; SLAVE replicates")
    ha_master_address: str = config_field(
        "haMasterAddress", "", unit="host:port",
        doc="SLAVE: the master container's internal address; empty: the one the nameserver returns")
    ha_transfer_batch_size: int = config_field(
        "haTransferBatchSize", 4 * 1024 * 1024, unit="bytes", minimum=1, maximum=16 * 1024 * 1024,
        doc="most bytes of one transfer batch (at least one whole record is always sent); batches reach it only "
            "while a slave is behind, and below about 4 MiB per-batch costs limit catch-up (upstream: 32 KiB)")
    ha_coalesce_bytes: int = config_field(
        "haCoalesceBytes", 1024 * 1024, unit="bytes", minimum=0, maximum=16 * 1024 * 1024,
        doc="while a slave has not acked the last batch, what is written since waits for that ack and goes as "
            "one batch, unless this many bytes (or a full haTransferBatchSize) are ready or a heartbeat interval "
            "passed (0: every write goes at once; an idle link always sends at once). RelayMQ's own key: under "
            "load one batch and one ack carry many puts instead of one each (docs/performance.md has the figures)")
    ha_max_gap_not_in_sync: int = config_field(
        "haMaxGapNotInSync", 256 * 1024 * 1024, unit="bytes", minimum=0,
        doc="RIP-34: a slave whose ack lags the master by less than this counts as in sync")
    ha_max_time_slave_not_catchup_ms: int = config_field(
        "haMaxTimeSlaveNotCatchup", 15_000, unit="ms", minimum=1,
        doc="a SyncStateSet member not caught up for this long is shrunk out of the set")
    ha_send_heartbeat_interval_ms: int = config_field(
        "haSendHeartbeatInterval", 5000, unit="ms", minimum=1,
        doc="idle interval after which the slave acks and the master sends an empty batch")
    ha_housekeeping_interval_ms: int = config_field(
        "haHousekeepingInterval", 20_000, unit="ms", minimum=1,
        doc="a connection whose peer sent nothing for this long is closed (the judge's own pauses not counted)")
    total_replicas: int = config_field(
        "totalReplicas", 1, unit="replicas", minimum=1, doc="replicas in the group, the master included")
    in_sync_replicas: int = config_field(
        "inSyncReplicas", 1, unit="replicas", minimum=1,
        doc="SYNC_MASTER: replicas (the master included) that must hold a message before it is acknowledged")
    min_in_sync_replicas: int = config_field(
        "minInSyncReplicas", 1, unit="replicas", minimum=1,
        doc="fewer in-sync replicas than this fails a put at once (IN_SYNC_REPLICAS_NOT_ENOUGH)")
    enable_auto_in_sync_replicas: bool = config_field(
        "enableAutoInSyncReplicas", False, unit="bool",
        doc="lower the acks needed to the in-sync count, never below minInSyncReplicas")
    all_ack_in_sync_state_set: bool = config_field(
        "allAckInSyncStateSet", False, unit="bool",
        doc="controller mode: every SyncStateSet member must ack (inSyncReplicas is then ignored)")
    sync_from_last_file: bool = config_field(
        "syncFromLastFile", False, unit="bool",
        doc="an empty slave starts from the master's last commit-log file instead of its min offset")
    async_learner: bool = config_field(
        "asyncLearner", False, unit="bool",
        doc="this slave never joins the SyncStateSet (asynchronous copy, never elected)")
    slave_timeout_ms: int = config_field(
        "slaveTimeout", 3000, unit="ms", minimum=1,
        doc="SYNC_MASTER: a put waits at most this for replica acks, then FLUSH_SLAVE_TIMEOUT")
    ha_max_epoch_entries: int = config_field(
        "haMaxEpochEntries", 1000, unit="entries", minimum=1,
        doc="most epoch entries a master handshake carries (upstream's buffer limit)")
    ha_connect_timeout_ms: int = config_field(
        "haConnectTimeoutMillis", 3000, unit="ms", minimum=1, maximum=600_000,
        doc="SLAVE: a connection to the master (Locate, then the replication port) not made within this fails")
    ha_connect_retry_interval_ms: int = config_field(
        "haConnectRetryInterval", 1000, unit="ms", minimum=1, maximum=600_000,
        doc="SLAVE: pause before connecting again after a failed or closed connection")
    ha_max_writes_in_flight: int = config_field(
        "haMaxWritesInFlight", 2, unit="batches", minimum=1, maximum=64,
        doc="SLAVE: replicated batches written by the writer thread while the next ones are checked")
    ha_inline_write_max_bytes: int = config_field(
        "haInlineWriteMaxBytes", 65_536, unit="bytes", minimum=0, maximum=16 << 20,
        doc="SLAVE: a replicated batch at most this large is written on the event loop when no write is in "
            "flight (handing a few KiB to the writer thread and back cost more than the write); 0: always the thread")
    ha_max_pending_acks: int = config_field(
        "haMaxPendingAcks", 10_000, unit="puts", minimum=1,
        doc="most SYNC_MASTER puts waiting for replica acks; beyond it a put fails with SLAVE_NOT_AVAILABLE")

    def __post_init__(self) -> None:
        if not isinstance(self.broker_role, BrokerRole):
            object.__setattr__(self, "broker_role", BrokerRole(self.broker_role))
        if self.ha_master_address and not _is_host_port(self.ha_master_address):
            raise ConfigError("ha config", "haMasterAddress",
                              f"{self.ha_master_address!r} is not host:port with a port in 1..65535")
        if self.min_in_sync_replicas > self.total_replicas:
            raise ConfigError("ha config", "minInSyncReplicas",
                              f"{self.min_in_sync_replicas} exceeds totalReplicas {self.total_replicas}")
        if self.in_sync_replicas > self.total_replicas:
            raise ConfigError("ha config", "inSyncReplicas",
                              f"{self.in_sync_replicas} exceeds totalReplicas {self.total_replicas}")


def _is_host_port(text: str) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) <= 65535 and not any(c.isspace() for c in text)
