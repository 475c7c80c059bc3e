"""One broker hosted by a container: binding its keys, opening and closing it.

Rules (reference 1.2 and 1.4):
- A broker's keys bind to ``BrokerConfig`` and ``StoreConfig``; any other key is an error
  naming the file and key (RocketMQ keys RelayMQ knowingly ignores are only logged).
- Outside controller mode a master has ``brokerId`` 0 and a slave a ``brokerId`` > 0.  With
  ``enableControllerMode`` the controller gives the id and the role: ``brokerRole`` is
  refused, a configured ``brokerId`` is ignored (RocketMQ's samples set -1), and a master
  acknowledges like a SYNC_MASTER (``allAckInSyncStateSet`` or ``inSyncReplicas``).
- Its store lives in ``{container root}/{brokerName}-{brokerId}`` (controller mode:
  ``{container root}/{brokerName}``) unless ``storePathRootDir`` is given; no two brokers of
  one container share a store directory.
- A master that needs pre-online (``ha.role.pre_online``) gets its driver before the broker
  starts, so nothing of it runs before it took its group's tables back; the container starts
  the driver once it serves and registers the broker when it is done.
- Opening order: the store directory's lock (``store.directory_lock``: a second process on
  the same store is refused before it reads anything), the store (recovery), then the broker
  on top of it; closing is the reverse, the store is flushed and fsynced, and the lock is
  released last.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from container.config import IGNORED_ROCKETMQ_KEYS, BrokerEntry, ContainerConfig, refuse_plain_acl
from metadata.config import ConfigError, bind, unknown_keys
from ha.replication.config import HaConfig
from scheduler.clock import Clock
from services.broker.api import TransactionCheckSink
from services.broker.broker import Broker
from services.broker.config import BrokerConfig, BrokerRole
from scheduler.periodic import PeriodicTasks
from services.acting.client import ActingClient
from services.acting.fifo_lock import FifoLocks
from services.acting.handover import take_over
from services.acting.member_watch import MemberWatch
from services.acting.state import ActingState
from ha.role.fence import PauseFence
from ha.role.pre_online import pre_online_needed
from services.ha.metadata_sync import MetadataSync
from services.ha.pre_online import PreOnlineDriver
from services.ha.replica import BrokerReplica
from services.replicas.manager import ReplicasManager
from store.config import StoreConfig
from store.directory_lock import DirectoryLock, lock_directory
from store.takeover import claim_if_unowned
from store.message_store import MessageStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BrokerSpec:
    broker: BrokerConfig
    store: StoreConfig
    ha: HaConfig
    where: str
    values: dict = field(default_factory=dict, compare=False)  # the keys as bound (a move hands them on)

    @property
    def identity(self) -> tuple[str, str, int]:
        return (self.broker.broker_cluster_name, self.broker.broker_name, self.broker.broker_id)

    @property
    def canonical_name(self) -> str:
        cluster, name, broker_id = self.identity
        return f"{cluster}_{name}_{broker_id}"


def bind_broker(entry: BrokerEntry, container: ContainerConfig) -> BrokerSpec:
    values = dict(entry.values)
    refuse_plain_acl(values, entry.where)
    for key in unknown_keys(values, BrokerConfig, StoreConfig, HaConfig):
        if key not in IGNORED_ROCKETMQ_KEYS:
            raise ConfigError(entry.where, key, "unknown key")
        log.warning("%s: %s is a RocketMQ key RelayMQ ignores", entry.where, key)
        del values[key]
    controller_mode = _controller_mode(values, entry.where)
    broker = bind(BrokerConfig, values, entry.where)
    if "storePathRootDir" not in values:
        folder = broker.broker_name if controller_mode else f"{broker.broker_name}-{broker.broker_id}"
        values["storePathRootDir"] = str(container.store_path_root_dir / folder)
    store = bind(StoreConfig, values, entry.where)
    if not store.store_path_root_dir.is_absolute():
        store = bind(StoreConfig, {**values, "storePathRootDir": str(Path.cwd() / store.store_path_root_dir)}, entry.where)
    if not controller_mode:
        _check_role(broker, entry.where)
        if str(values.get("allAckInSyncStateSet", "")).lower() == "true" or values.get("allAckInSyncStateSet") is True:
            log.warning("%s: allAckInSyncStateSet acts only with enableControllerMode; this broker waits for "
                        "inSyncReplicas acks", entry.where)
    _check_acting(broker, controller_mode, entry.where)
    if store.shared_storage and not container.grpc_server_port:
        raise ConfigError(entry.where, "sharedStorage", "needs a fixed grpcServerPort: the container's client "
                          "endpoint is its name in the store's ownership claims (docs/reassign.md)")
    try:
        ha = bind(HaConfig, values, entry.where)
    except ConfigError as failure:
        raise ConfigError(entry.where, failure.key, failure.reason) from None
    return BrokerSpec(broker, store, ha, entry.where, {**values, "storePathRootDir": str(store.store_path_root_dir)})


def _controller_mode(values: dict, where: str) -> bool:
    """Controller mode's rules on the raw keys (changes ``values``): no brokerRole, brokerId
    ignored, a master is a SYNC_MASTER, controllerAddr must name host:port members."""
    enabled = bind(BrokerConfig, {k: v for k, v in values.items() if k == "enableControllerMode"}, where)
    if not enabled.enable_controller_mode:
        return False
    if "brokerRole" in values:
        raise ConfigError(where, "brokerRole", "not with enableControllerMode: the controller gives the role")
    if "brokerId" in values:
        log.info("%s: brokerId %s is ignored with enableControllerMode: the controller assigns ids",
                 where, values.pop("brokerId"))
    values["brokerRole"] = "SYNC_MASTER"
    addresses = [a.strip() for a in str(values.get("controllerAddr", "")).split(";") if a.strip()]
    if not addresses:
        raise ConfigError(where, "controllerAddr", "required with enableControllerMode (host:port;host:port...)")
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(where, "controllerAddr", f"{address!r} is not host:port")
    return True


def _check_acting(broker: BrokerConfig, controller_mode: bool, where: str) -> None:
    """Acting master is the fixed-role deployment's failover (RIP-32); the controller's is RIP-44."""
    if broker.enable_slave_acting_master and controller_mode:
        raise ConfigError(where, "enableSlaveActingMaster", "not with enableControllerMode: the controller elects a new "
                                                            "master instead of letting a slave act")
    if broker.enable_remote_escape and not broker.enable_slave_acting_master:
        raise ConfigError(where, "enableRemoteEscape", "needs enableSlaveActingMaster (only an acting slave escapes)")
    if broker.lock_in_strict_mode and not broker.enable_slave_acting_master:
        raise ConfigError(where, "lockInStrictMode", "needs enableSlaveActingMaster (the quorum is asked of the group's "
                                                     "member set, which acting mode keeps)")


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
    replica: BrokerReplica
    metadata_sync: MetadataSync | None = None
    tasks: PeriodicTasks | None = None
    manager: ReplicasManager | None = None  # controller mode
    lock: DirectoryLock | None = None
    member_watch: MemberWatch | None = None  # acting mode
    handover: asyncio.Task | None = None  # acting mode, a master taking its special state back

    @property
    def acting(self) -> ActingState:
        return self.broker.acting

    @property
    def name(self) -> str:
        return self.spec.broker.broker_name

    @property
    def is_master(self) -> bool:
        return self.replica.is_master

    @property
    def controller_mode(self) -> bool:
        return self.spec.broker.enable_controller_mode

    @property
    def offered_master(self) -> str:
        """A slave: the internal address of a master that offered itself (pre-online), or ""."""
        slave = self.replica.slave
        return slave.offered_master if slave is not None else ""

    @property
    def pre_online(self) -> PreOnlineDriver | None:
        """The pre-online driver of a master that has not gone online yet (None otherwise)."""
        driver = self.broker.pre_online
        return driver if driver is not None and not driver.done else None


async def open_broker(spec: BrokerSpec, clock: Clock, sink: TransactionCheckSink,
                      acting_client: ActingClient | None = None, owner: str = "") -> HostedBroker:
    """Recover the store and start the broker: a configured master is master before its first
    call; a slave and every controller-mode broker start without a role (their replication
    starts with :func:`start_replication`).  ``owner``: this container's internal address,
    which a store on shared storage (``sharedStorage``) opens as (store.takeover: the first
    opener claims it; a store another container owns raises StoreIOError naming it)."""
    shared = owner if spec.store.shared_storage else None
    lock_name = f"lock.{owner.replace(':', '_').replace('/', '_')}" if shared else "lock"
    lock = lock_directory(spec.store.store_path_root_dir, f"relaymq broker {spec.canonical_name}", lock_name)
    try:
        if shared:
            claim_if_unowned(spec.store, shared)
        store = MessageStore(spec.store, clock.now_ms, shared=shared)
        report = store.start()
    except BaseException:
        lock.release()
        raise
    log.info("%s: store recovered: %s", spec.canonical_name, report)
    config = spec.broker
    fence = PauseFence(config.controller_heartbeat_timeout_ms) if config.enable_controller_mode else None
    replica = BrokerReplica(config.broker_name, 0 if config.enable_controller_mode else config.broker_id, store,
                            spec.ha, clock, fence)
    acting = ActingState(enabled=config.enable_slave_acting_master)
    locks = FifoLocks(config.broker_name, lambda: config.broker_id, config, spec.ha.total_replicas, clock,
                      lambda: acting.members, acting_client)
    broker = Broker(config, store, clock, sink, replica, acting=acting, fifo_locks=locks)
    if pre_online_needed(config.is_master, spec.ha.total_replicas, config.skip_pre_online, config.enable_controller_mode):
        broker.pre_online = PreOnlineDriver(broker, replica, clock)  # before start: no special service until online
    try:
        if config.is_master and not config.enable_controller_mode:
            await replica.become_master()
        await broker.start()
    except BaseException:
        await replica.stop()
        store.shutdown()
        lock.release()
        raise
    return HostedBroker(spec, store, broker, replica, lock=lock)


async def start_replication(hosted: HostedBroker, clock: Clock, master_address, on_topics_changed=None,
                            credentials=None) -> None:
    """A configured slave starts copying from ``await master_address()``; every broker that may
    be a slave syncs its metadata (topics, groups, offsets, timer checkpoint) from its master."""
    if hosted.controller_mode:
        return
    if not hosted.spec.broker.is_master:
        await hosted.replica.become_slave(master_address)
        start_metadata_sync(hosted, clock, master_address, on_topics_changed, credentials)


def start_metadata_sync(hosted: HostedBroker, clock: Clock, master_address, on_topics_changed=None,
                        credentials=None) -> None:
    """``credentials`` sign the sync's admin calls (``innerClientAuthenticationCredentials``)."""
    hosted.metadata_sync = MetadataSync(hosted.broker, master_address, clock, on_topics_changed, credentials)
    hosted.replica.add_metadata_listener(hosted.metadata_sync.sync_soon)
    hosted.tasks = PeriodicTasks(f"replication {hosted.spec.canonical_name}")
    hosted.metadata_sync.declare_on(hosted.tasks, initial_delay_ms=1_000)
    hosted.tasks.start()


def start_controller_mode(hosted: HostedBroker, address: str, heartbeat_interval_ms: int, clock: Clock,
                          on_role_changed, on_topics_changed=None, credentials=None) -> None:
    """Controller mode: the broker registers with the controller, which gives it its role."""
    hosted.manager = ReplicasManager(hosted, address, heartbeat_interval_ms, clock, on_role_changed)
    start_metadata_sync(hosted, clock, hosted.manager.current_master_address, on_topics_changed, credentials)
    hosted.manager.start()


def start_acting_mode(hosted: HostedBroker, nameserver, acting_client: ActingClient, clock: Clock) -> None:
    """Acting mode, once the broker is registered: watch the group's members; a master first
    takes back the special state its acting members advanced (services.acting.handover)."""
    if not hosted.acting.enabled or hosted.member_watch is not None:
        return
    hosted.member_watch = MemberWatch(hosted.broker, nameserver, clock)
    hosted.member_watch.start()
    if hosted.is_master and not hosted.acting.handover_done:  # pre-online took the state back already
        hosted.handover = asyncio.get_running_loop().create_task(take_over(hosted.broker, nameserver(), acting_client))


async def close_broker(hosted: HostedBroker) -> None:
    try:
        if hosted.broker.pre_online is not None:
            await hosted.broker.pre_online.stop()
        if hosted.handover is not None:
            hosted.handover.cancel()
            await asyncio.gather(hosted.handover, return_exceptions=True)
        if hosted.member_watch is not None:
            await hosted.member_watch.stop()
        if hosted.manager is not None:
            await hosted.manager.stop()
        if hosted.tasks is not None:
            await hosted.tasks.stop()
        if hosted.metadata_sync is not None:
            await hosted.metadata_sync.close()
        await hosted.replica.stop()
        await hosted.broker.stop()
    finally:
        hosted.store.shutdown()
        if hosted.lock is not None:
            hosted.lock.release()
