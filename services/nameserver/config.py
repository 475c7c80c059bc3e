"""``NamesrvConfig``: every nameserver key, its unit and default, in one place.

Key names follow RocketMQ's namesrv (``listenPort``, ``scanNotActiveBrokerInterval``,
``supportActingMaster``, ``enableControllerInNamesrv``) so users can bring their files; keys
of our own (bind address, limits) say so in their doc.  The nameserver listens on loopback
unless ``bindAddress`` says otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from metadata.config import bind, config_field


@dataclass(frozen=True)
class NamesrvConfig:
    listen_port: int = config_field("listenPort", 9876, minimum=0, maximum=65535,
                                    doc="gRPC port of the nameserver (0: any free port)")
    bind_address: str = config_field("bindAddress", "127.0.0.1", doc="interface to listen on (ours; loopback by default)")
    scan_not_active_broker_interval_ms: int = config_field(
        "scanNotActiveBrokerInterval", 5000, unit="ms", minimum=10, maximum=3_600_000,
        doc="how often brokers whose heartbeats stopped are removed")
    broker_channel_expired_time_ms: int = config_field(
        "brokerChannelExpiredTime", 120_000, unit="ms", minimum=100, maximum=86_400_000,
        doc="liveness timeout of a registration that carries none (RocketMQ's DEFAULT_BROKER_CHANNEL_EXPIRED_TIME)")
    support_acting_master: bool = config_field("supportActingMaster", False,
                                               doc="rewrite routes of master-less acting groups (reference 2.3)")
    notify_min_broker_id_changed: bool = config_field(
        "notifyMinBrokerIdChanged", False,
        doc="push a group's new smallest broker id to its members at once (acting master); they poll otherwise")
    notify_min_broker_id_timeout_ms: int = config_field(
        "notifyMinBrokerIdTimeoutMillis", 300, unit="ms", minimum=10, maximum=60_000,
        doc="deadline of one min-id push to a broker (upstream's 300 ms one-way) (ours)")
    enable_controller_in_namesrv: bool = config_field("enableControllerInNamesrv", False,
                                                      doc="run the controller inside the nameserver process")
    max_brokers: int = config_field("namesrvMaxBrokers", 10_000, minimum=1, maximum=1_000_000,
                                    doc="registered brokers at most (ours)")
    max_topics_per_registration: int = config_field(
        "namesrvMaxTopicsPerRegistration", 100_000, minimum=1, maximum=10_000_000,
        doc="topics one registration may carry (ours)")
    max_message_bytes: int = config_field("namesrvMaxMessageBytes", 64 << 20, unit="bytes", minimum=1 << 16,
                                          maximum=1 << 30, doc="largest gRPC message accepted or sent (ours)")
    bad_request_log_interval_ms: int = config_field(
        "badRequestLogIntervalMillis", 10_000, unit="ms", minimum=0, maximum=3_600_000,
        doc="requests that do not parse are logged at most once per peer host per interval (ours)")
    metrics_port: int = config_field("namesrvMetricsPort", 0, unit="port", minimum=0, maximum=65535,
                                     doc="standalone nameserver: Prometheus /metrics port on bindAddress; 0: off "
                                         "(inside a container, the container's metricsPromExporterPort serves them) (ours)")
    max_concurrent_rpcs: int = config_field("namesrvMaxConcurrentRpcs", 1024, minimum=1, maximum=1_000_000,
                                            doc="RPCs served at once (ours)")

    @property
    def address(self) -> str:
        return f"{self.bind_address}:{self.listen_port}"


def namesrv_config(values: Mapping[str, Any], where: str, **overrides: Any) -> NamesrvConfig:
    """Bind from a flat mapping of RocketMQ keys; raises ``ConfigError`` naming ``where`` and the key."""
    return bind(NamesrvConfig, values, where, **overrides)
