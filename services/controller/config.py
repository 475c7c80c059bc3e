"""``ControllerConfig``: every controller key, its unit and default, in one place.

Keys follow RocketMQ's controller names (``controllerDLegerPeers``, ``enableElectUncleanMaster``,
...) so users can bring their files; keys of our own Raft timing and limits use the
``controllerRaft*``/``controller*`` prefix.  ``controller_config(values, where)`` binds and
then checks the cross-field rules (peer list syntax, self id among peers), raising
``ConfigError`` naming the key.

Peer ids are names (``n0``); Raft node ids are their positions in the peer list sorted by
name, so every member derives the same numbers from the same peer string.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from metadata.config import ConfigError, bind, config_field


@dataclass(frozen=True)
class ControllerPeerAddress:
    name: str
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class ControllerConfig:
    peers_text: str = config_field("controllerDLegerPeers", doc="peers 'n0-host:port;n1-host:port;...'")
    self_id: str = config_field("controllerDLegerSelfId", doc="this member's id in controllerDLegerPeers")
    group: str = config_field("controllerDLegerGroup", "RelayMQController", doc="controller group name")
    store_path_text: str = config_field("controllerStorePath", "", unit="path",
                                        doc="Raft log and snapshots; default ./relaymq-data/controller/<selfId>")
    enable_elect_unclean_master: bool = config_field("enableElectUncleanMaster", False,
                                                     doc="elect outside the SyncStateSet (may lose messages)")
    notify_broker_role_changed: bool = config_field("notifyBrokerRoleChanged", True,
                                                    doc="push role changes to WatchReplicaInfo subscribers")
    scan_not_active_broker_interval_ms: int = config_field("scanNotActiveBrokerInterval", 5000, unit="ms",
                                                           minimum=10, doc="expire silent brokers")
    scan_inactive_master_interval_ms: int = config_field("scanInactiveMasterInterval", 5000, unit="ms", minimum=10,
                                                         doc="re-elect for sets whose master is not alive")
    heartbeat_timeout_ms: int = config_field("controllerHeartBeatTimeoutMills", 10_000, unit="ms", minimum=1,
                                             doc="broker liveness when its heartbeat sends no timeout")
    elect_master_max_retry_count: int = config_field("electMasterMaxRetryCount", 3, minimum=1,
                                                     doc="controller-triggered election attempts per scan")
    request_timeout_ms: int = config_field("controllerRequestTimeoutMills", 5000, unit="ms", minimum=1,
                                           doc="wait for a request's events to commit")
    request_queue_capacity: int = config_field("controllerRequestThreadPoolQueueCapacity", 50_000, minimum=1,
                                               doc="queued controller requests on the leader")
    batch_max: int = config_field("controllerBatchMax", 64, minimum=1, doc="requests decided per Raft round")
    tick_ms: int = config_field("controllerRaftTickMs", 100, unit="ms", minimum=1, doc="Raft tick length")
    heartbeat_ticks: int = config_field("controllerRaftHeartbeatTicks", 2, unit="ticks", minimum=1,
                                        doc="leader heartbeat interval")
    max_heartbeat_leak: int = config_field("controllerRaftMaxHeartBeatLeak", 3, minimum=1,
                                           doc="missed heartbeats before a follower campaigns")
    election_jitter_ticks: int = config_field("controllerRaftElectionJitterTicks", 4, unit="ticks", minimum=0,
                                              doc="random extra election delay")
    pre_vote: bool = config_field("controllerRaftPreVote", True, doc="pre-vote before raising the term")
    peer_queue_capacity: int = config_field("controllerPeerQueueCapacity", 1024, unit="messages", minimum=1,
                                            doc="outgoing Raft messages queued per peer (oldest dropped)")
    snapshot_every_entries: int = config_field("controllerSnapshotEveryEntries", 10_000, unit="entries",
                                               minimum=1, doc="compact the Raft log after this many applied entries "
                                                   "(and at least as many bytes as the last snapshot)")
    max_brokers: int = config_field("controllerMaxBrokers", 100_000, minimum=1, doc="brokers tracked for liveness")
    watch_queue_capacity: int = config_field("controllerWatchQueueCapacity", 256, minimum=1,
                                             doc="pending notices per WatchReplicaInfo subscriber")
    max_watchers: int = config_field("controllerMaxWatchers", 10_000, minimum=1,
                                     doc="concurrent WatchReplicaInfo subscribers")

    max_message_bytes: int = config_field("controllerMaxMessageBytes", 4 << 20, unit="bytes", minimum=1 << 16,
                                          maximum=1 << 30, doc="standalone member: largest gRPC message accepted or "
                                                               "sent; larger requests get RESOURCE_EXHAUSTED (ours)")
    bad_request_log_interval_ms: int = config_field(
        "badRequestLogIntervalMillis", 10_000, unit="ms", minimum=0, maximum=3_600_000,
        doc="requests that do not parse are logged at most once per peer host per interval (ours)")
    reassign_release_timeout_ms: int = config_field(
        "reassignReleaseTimeoutMillis", 5000, unit="ms", minimum=100,
        doc="a broker move's source that has not released within this goes on fenced (ours, issue 26)")
    reassign_open_timeout_ms: int = config_field(
        "reassignOpenTimeoutMillis", 10_000, unit="ms", minimum=100,
        doc="a broker move's target that has not opened within this rolls the move back (ours, issue 26)")
    metrics_port: int = config_field("controllerMetricsPort", 0, unit="port", minimum=0, maximum=65535,
                                     doc="standalone member: Prometheus /metrics port on its peer host; 0: off (ours)")

    @property
    def peers(self) -> tuple[ControllerPeerAddress, ...]:
        return parse_peers(self.peers_text, "controllerDLegerPeers")

    @property
    def self_peer(self) -> ControllerPeerAddress:
        return next(p for p in self.peers if p.name == self.self_id)

    @property
    def store_path(self) -> Path:
        if self.store_path_text:
            return Path(self.store_path_text).expanduser()
        return Path("relaymq-data") / "controller" / self.self_id


def parse_peers(text: str, where: str) -> tuple[ControllerPeerAddress, ...]:
    parsed = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        name, sep, address = part.partition("-")
        host, colon, port = address.rpartition(":")
        if not sep or not name or not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(where, "controllerDLegerPeers", f"{part!r} is not 'id-host:port'")
        parsed.append((name, host, int(port)))
    names = sorted(name for name, _, _ in parsed)
    if len(set(names)) != len(names):
        raise ConfigError(where, "controllerDLegerPeers", "peer ids must be unique")
    return tuple(ControllerPeerAddress(name, names.index(name), host, port) for name, host, port in parsed)


def controller_config(values: Mapping[str, Any], where: str, **overrides: Any) -> ControllerConfig:
    config = bind(ControllerConfig, values, where, **overrides)
    peers = parse_peers(config.peers_text, where)
    if not peers:
        raise ConfigError(where, "controllerDLegerPeers", "needs at least one peer")
    if config.self_id not in {p.name for p in peers}:
        raise ConfigError(where, "controllerDLegerSelfId",
                          f"{config.self_id!r} is not one of {', '.join(p.name for p in peers)}")
    return config
