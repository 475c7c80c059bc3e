"""One broker hosted by a container: binding its keys, opening and closing it.

Rules (reference 1.2 and 1.4):
- A broker's keys bind to ``BrokerConfig`` and ``StoreConfig``; any other key is an error
  naming the file and key (RocketMQ keys RelayMQ knowingly ignores are only logged).
- Outside controller mode a master has ``brokerId`` 0 and a slave a ``brokerId`` > 0.
- Its store lives in ``{container root}/{brokerName}-{brokerId}`` unless
  ``storePathRootDir`` is given; no two brokers of one container share a store directory.
- Opening order: the store directory's lock (``store.directory_lock``: a second process on
  the same store is refused before it reads anything), the store (recovery), then the broker
  on top of it; closing is the reverse, the store is flushed and fsynced, and the lock is
  released last.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from container.config import IGNORED_ROCKETMQ_KEYS, BrokerEntry, ContainerConfig
from metadata.config import ConfigError, bind, unknown_keys
from ha.replication.config import HaConfig
from scheduler.clock import Clock
from services.broker.api import TransactionCheckSink
from services.broker.broker import Broker
from services.broker.config import BrokerConfig, BrokerRole
from scheduler.periodic import PeriodicTasks
from services.ha.master import ReplicationMaster
from services.ha.metadata_sync import MetadataSync
from services.ha.slave import ReplicationSlave
from store.config import StoreConfig
from store.directory_lock import DirectoryLock, lock_directory
from store.message_store import MessageStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BrokerSpec:
    broker: BrokerConfig
    store: StoreConfig
    ha: HaConfig
    where: str

    @property
    def identity(self) -> tuple[str, str, int]:
        return (self.broker.broker_cluster_name, self.broker.broker_name, self.broker.broker_id)

    @property
    def canonical_name(self) -> str:
        cluster, name, broker_id = self.identity
        return f"{cluster}_{name}_{broker_id}"


def bind_broker(entry: BrokerEntry, container: ContainerConfig) -> BrokerSpec:
    values = dict(entry.values)
    for key in unknown_keys(values, BrokerConfig, StoreConfig, HaConfig):
        if key not in IGNORED_ROCKETMQ_KEYS:
            raise ConfigError(entry.where, key, "unknown key")
        log.warning("%s: %s is a RocketMQ key RelayMQ ignores", entry.where, key)
        del values[key]
    broker = bind(BrokerConfig, values, entry.where)
    if "storePathRootDir" not in values:
        values["storePathRootDir"] = str(container.store_path_root_dir / f"{broker.broker_name}-{broker.broker_id}")
    store = bind(StoreConfig, values, entry.where)
    if not store.store_path_root_dir.is_absolute():
        store = bind(StoreConfig, {**values, "storePathRootDir": str(Path.cwd() / store.store_path_root_dir)}, entry.where)
    _check_role(broker, entry.where)
    try:
        ha = bind(HaConfig, values, entry.where)
    except ConfigError as failure:
        raise ConfigError(entry.where, failure.key, failure.reason) from None
    return BrokerSpec(broker, store, ha, entry.where)


def _check_role(broker: BrokerConfig, where: str) -> None:
    if broker.broker_role is BrokerRole.SLAVE and broker.broker_id <= 0:
        raise ConfigError(where, "brokerId", "slave broker id must be > 0")
    if broker.broker_role is not BrokerRole.SLAVE and broker.broker_id != 0:
        raise ConfigError(where, "brokerId", f"a {broker.broker_role.value} must have brokerId 0, got {broker.broker_id}")


def check_unique(specs: list[BrokerSpec]) -> None:
    """No two brokers with one identity or one store directory (reference 1.1, 1.4)."""
    seen_identity: dict[tuple[str, str, int], str] = {}
    seen_store: dict[Path, str] = {}
    for spec in specs:
        if spec.identity in seen_identity:
            raise ConfigError(spec.where, "brokerName", f"{spec.canonical_name} has already been added to current broker container ({seen_identity[spec.identity]})")
        root = spec.store.store_path_root_dir.resolve()
        if root in seen_store:
            raise ConfigError(spec.where, "storePathRootDir", f"{root} is already the store of {seen_store[root]}")
        seen_identity[spec.identity] = spec.where
        seen_store[root] = spec.canonical_name


@dataclass
class HostedBroker:
    spec: BrokerSpec
    store: MessageStore
    broker: Broker
    replication: ReplicationMaster | ReplicationSlave | None = None
    metadata_sync: MetadataSync | None = None
    tasks: PeriodicTasks | None = None
    lock: DirectoryLock | None = None

    @property
    def name(self) -> str:
        return self.spec.broker.broker_name

    @property
    def is_master(self) -> bool:
        return self.spec.broker.is_master


async def open_broker(spec: BrokerSpec, clock: Clock, sink: TransactionCheckSink) -> HostedBroker:
    """Raises ``DirectoryLocked`` when another process holds the store."""
    lock = lock_directory(spec.store.store_path_root_dir, f"relaymq broker {spec.canonical_name}")
    try:
        store = MessageStore(spec.store, clock.now_ms)
        report = store.start()
    except BaseException:
        lock.release()
        raise
    log.info("%s: store recovered: %s", spec.canonical_name, report)
    broker = Broker(spec.broker, store, clock, sink)
    try:
        await broker.start()
    except BaseException:
        store.shutdown()
        lock.release()
        raise
    return HostedBroker(spec, store, broker, lock=lock)


def start_replication(hosted: HostedBroker, clock: Clock, master_address, on_topics_changed=None) -> None:
    """A master serves its slaves' streams; a slave starts copying from ``await master_address()``
    and syncing its metadata (topics, groups, offsets, timer checkpoint) from the same master."""
    spec = hosted.spec
    if spec.broker.is_master:
        hosted.replication = ReplicationMaster(hosted.name, hosted.store, spec.ha, clock)
        hosted.replication.start()
        hosted.broker.replication = hosted.replication
    else:
        hosted.replication = ReplicationSlave(hosted.name, spec.broker.broker_id, hosted.store, spec.ha, clock,
                                              master_address)
        hosted.replication.start()
        hosted.metadata_sync = MetadataSync(hosted.broker, master_address, clock, on_topics_changed)
        hosted.tasks = PeriodicTasks(f"replication {spec.canonical_name}")
        hosted.metadata_sync.declare_on(hosted.tasks, initial_delay_ms=1_000)
        hosted.tasks.start()
    hosted.broker.replication_status = hosted.replication.status


async def close_broker(hosted: HostedBroker) -> None:
    try:
        if hosted.tasks is not None:
            await hosted.tasks.stop()
        if hosted.metadata_sync is not None:
            await hosted.metadata_sync.close()
        if hosted.replication is not None:
            await hosted.replication.stop()
        await hosted.broker.stop()
    finally:
        hosted.store.shutdown()
        if hosted.lock is not None:
            hosted.lock.release()
