"""The BrokerContainer's configuration: one file, several brokers.

A container file holds container keys at the top level and its brokers either inline, as
``[[broker]]`` tables (TOML), or in separate files named by ``brokerConfigPaths``
(``:``-separated, RocketMQ's ``-b`` convention; relative paths are relative to the
container file).  Each broker's keys bind to two frozen configs: the broker's
(``services.broker.config.BrokerConfig``) and its store's (``store.config.StoreConfig``).

Rules:
- Every key is validated once here; components trust what they are given.
- An unknown key is an error naming file and key, except RocketMQ keys RelayMQ knowingly
  ignores (:data:`IGNORED_ROCKETMQ_KEYS`), which are logged, so that users can bring their
  RocketMQ files.
- Two brokers of one container may not share an identity or a store directory (reference
  1.1, 1.4); replica counts must satisfy total >= inSync >= minInSync (reference 1.2).
- Without ``storePathRootDir`` in a broker, its store lives in
  ``{container storePathRootDir}/{brokerName}-{brokerId}``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from container.config_loader import load_config_file
from metadata.config import ConfigError, bind, config_field, unknown_keys

log = logging.getLogger(__name__)

IGNORED_ROCKETMQ_KEYS = frozenset({
    "rocketmqHome", "deleteWhen", "brokerIP1", "brokerIP2", "namesrvAddr", "storePathCommitLog",
    "storePathConsumeQueue", "storePathIndex", "storeCheckpoint", "abortFile",
    "sendMessageThreadPoolNums", "pullMessageThreadPoolNums", "useReentrantLockWhenPutMessage",
    "waitTimeMillsInSendQueue", "fetchNamesrvAddrByAddressServer", "aclEnable", "traceTopicEnable",
    "autoCreateSubscriptionGroup", "messageDelayLevel", "clusterTopicEnable", "brokerTopicEnable",
})


def refuse_plain_acl(values: Mapping[str, Any], where: str) -> None:
    """``aclEnable = true`` asked for RocketMQ 4.x's plain ACL, which RelayMQ does not have:
    refused, pointing at ACL 2.0 (false is ignored, logged, as the other ignored keys)."""
    value = values.get("aclEnable")
    if value is True or (isinstance(value, str) and value.strip().lower() == "true"):
        raise ConfigError(where, "aclEnable", "RocketMQ 4.x's plain ACL is not supported; use ACL 2.0: "
                                              "authenticationEnabled, authorizationEnabled and authorizationMetadataFile "
                                              "(docs/security.md); relaymq admin migrate-acl --file plain_acl.yml "
                                              "converts a plain_acl.yml")


@dataclass(frozen=True)
class ContainerConfig:
    broker_container_ip: str = config_field("brokerContainerIP", "127.0.0.1", doc="host advertised to clients and the nameserver")
    grpc_server_port: int = config_field("grpcServerPort", 8081, minimum=0, maximum=65535, doc="client gRPC endpoint (RocketMQ 5 protocol)")
    grpc_bind_address: str = config_field("grpcBindAddress", "", doc="address the client endpoint binds; empty: brokerContainerIP")
    grpc_tls_port: int = config_field("grpcTlsPort", 0, minimum=0, maximum=65535,
                                      doc="second client gRPC endpoint, over TLS, for clients that default to TLS "
                                          "(Java, Go, C#, C++); 0: off")
    tls_server_cert_path: str = config_field("tlsServerCertPath", "",
                                             doc="PEM certificate chain of the TLS endpoint (RocketMQ's tls.server.certPath; "
                                                 "relative to the container file); required with grpcTlsPort")
    tls_server_key_path: str = config_field("tlsServerKeyPath", "",
                                            doc="PEM private key, unencrypted, of the TLS endpoint (RocketMQ's tls.server.keyPath; "
                                                "relative to the container file); required with grpcTlsPort")
    listen_port: int = config_field("listenPort", 10911, minimum=0, maximum=65535, doc="internal admin endpoint")
    ha_listen_port: int = config_field("haListenPort", 10912, minimum=0, maximum=65535,
                                       doc="replication port slaves of this container's masters connect to (0: any free port)")
    admin_bind_address: str = config_field("adminBindAddress", "127.0.0.1", doc="admin and internal RPCs stay on loopback unless set")
    namesrv_addr: str = config_field("namesrvAddr", "127.0.0.1:9876", doc="nameservers, ';'-separated host:port")
    start_embedded_namesrv: bool = config_field("startEmbeddedNamesrv", True, doc="run a nameserver inside this process")
    namesrv_listen_port: int = config_field("namesrvListenPort", 9876, minimum=0, maximum=65535, doc="port of the embedded nameserver")
    enable_controller_in_namesrv: bool = config_field("enableControllerInNamesrv", False, doc="run the controller inside the embedded nameserver")
    store_path_root_dir: Path = config_field("storePathRootDir", Path("./relaymq-data"), doc="data root; each broker gets a subfolder")
    broker_config_paths: str = config_field("brokerConfigPaths", "", doc="':'-separated broker files, besides inline [[broker]] tables")
    metrics_port: int = config_field("metricsPromExporterPort", 5557, minimum=0, maximum=65535, unit="", doc="Prometheus /metrics port; 0 disables")
    metrics_host: str = config_field("metricsPromExporterHost", "127.0.0.1", doc="Prometheus /metrics bind address")
    register_period_ms: int = config_field("registerNameServerPeriod", 30_000, minimum=10_000, maximum=60_000, unit="ms", doc="full re-registration with the nameserver")
    controller_addr: str = config_field("controllerAddr", "", doc="controller members (host:port;...) this container "
                                        "reports itself to every brokerHeartbeatInterval, so that brokers can be moved to "
                                        "and from it (reassign-broker); empty: its controller-mode brokers' controllerAddr")
    heartbeat_interval_ms: int = config_field("brokerHeartbeatInterval", 1_000, minimum=100, maximum=60_000, unit="ms", doc="lightweight heartbeat to the nameserver")
    broker_not_active_timeout_ms: int = config_field("brokerNotActiveTimeoutMillis", 10_000, minimum=1_000, maximum=600_000, unit="ms", doc="the nameserver drops a broker silent this long")
    admin_max_inbound_message_size: int = config_field(
        "adminMaxInboundMessageSize", 64 * 1024 * 1024, minimum=4 * 1024 * 1024, maximum=64 * 1024 * 1024, unit="bytes",
        doc="largest request the internal endpoint (admin, Locate, metadata sync) accepts; larger ones get "
            "RESOURCE_EXHAUSTED (ours)")
    bad_request_log_interval_ms: int = config_field(
        "badRequestLogIntervalMillis", 10_000, minimum=0, maximum=3_600_000, unit="ms",
        doc="requests that do not parse are logged at most once per peer host per interval, with the count "
            "of the ones not logged; every one is counted in relaymq_bad_requests_total (ours)")
    shutdown_timeout_ms: int = config_field("shutdownTimeoutMillis", 8_000, minimum=100, maximum=60_000, unit="ms", doc="graceful drain on SIGTERM before giving up")

    @property
    def client_bind_host(self) -> str:
        return self.grpc_bind_address or self.broker_container_ip

    @property
    def namesrv_addresses(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]


@dataclass(frozen=True)
class BrokerEntry:
    """One broker of the container: its raw keys and where they came from."""

    values: Mapping[str, Any]
    where: str


def _container_keys(document: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k != "broker"}


def _broker_entries(document: Mapping[str, Any], path: Path, override_paths: str | None) -> list[BrokerEntry]:
    entries: list[BrokerEntry] = []
    inline = document.get("broker", [])
    if isinstance(inline, Mapping):
        inline = [inline]
    if not isinstance(inline, list) or not all(isinstance(b, Mapping) for b in inline):
        raise ConfigError(str(path), "broker", "must be a list of [[broker]] tables")
    for index, values in enumerate(inline):
        entries.append(BrokerEntry(dict(values), f"{path} [[broker]] #{index + 1}"))
    paths = override_paths if override_paths is not None else str(document.get("brokerConfigPaths", "") or "")
    for raw in (p.strip() for p in paths.split(":") if p.strip()):
        broker_path = Path(raw) if Path(raw).is_absolute() else path.parent / raw
        entries.append(BrokerEntry(load_config_file(broker_path), str(broker_path)))
    return entries


def load_container_config(path: Path | str, broker_paths: str | None = None,
                          also: tuple[type, ...] = ()) -> tuple[ContainerConfig, list[BrokerEntry], dict[str, Any]]:
    """Parse and validate the container file.

    ``also`` are the other components whose keys may stand at the top level (the client
    protocol's, the embedded nameserver's); their raw values are returned for them to bind.
    Brokers are bound later by ``container.hosted_broker.bind_broker``.
    """
    path = Path(path)
    document = load_config_file(path)
    keys = _container_keys(document)
    refuse_plain_acl(keys, str(path))
    ignored = set()
    for key in unknown_keys(keys, ContainerConfig, *also):
        if key not in IGNORED_ROCKETMQ_KEYS:
            raise ConfigError(str(path), key, "unknown key")
        log.warning("%s: %s is a RocketMQ key RelayMQ ignores", path, key)
        ignored.add(key)
    values = {k: v for k, v in keys.items() if k not in ignored}
    config = bind(ContainerConfig, values, str(path))
    if config.grpc_tls_port and config.grpc_tls_port == config.grpc_server_port:
        raise ConfigError(str(path), "grpcTlsPort", f"{config.grpc_tls_port} is also grpcServerPort; TLS needs a port of its own")
    if not config.store_path_root_dir.is_absolute():
        config = replace(config, store_path_root_dir=(Path.cwd() / config.store_path_root_dir).resolve())
    return config, _broker_entries(document, path, broker_paths), values
