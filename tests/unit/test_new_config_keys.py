"""The configuration keys issue 17 added refuse bad values with a message naming the key."""
from __future__ import annotations

import pytest

from container.config import ContainerConfig
from metadata.config import ConfigError, bind
from services.controller.config import controller_config
from services.nameserver.config import namesrv_config

PEERS = {"controllerDLegerPeers": "n0-127.0.0.1:9878", "controllerDLegerSelfId": "n0"}


@pytest.mark.parametrize("key, value, reason", [
    ("adminMaxInboundMessageSize", 1024, "4194304"),
    ("adminMaxInboundMessageSize", 1 << 30, "67108864"),
    ("badRequestLogIntervalMillis", -1, "0"),
    ("badRequestLogIntervalMillis", "often", "integer"),
])
def test_container_keys(key, value, reason):
    with pytest.raises(ConfigError) as refused:
        bind(ContainerConfig, {key: value}, "c.toml")
    assert refused.value.key == key and reason in str(refused.value)


@pytest.mark.parametrize("key, value", [("badRequestLogIntervalMillis", 4_000_000), ("namesrvMetricsPort", 70000),
                                        ("namesrvMetricsPort", -1)])
def test_nameserver_keys(key, value):
    with pytest.raises(ConfigError) as refused:
        namesrv_config({key: value}, "n.toml")
    assert refused.value.key == key


@pytest.mark.parametrize("key, value", [("controllerMaxMessageBytes", 10), ("controllerMetricsPort", 65536),
                                        ("badRequestLogIntervalMillis", -5)])
def test_controller_keys(key, value):
    with pytest.raises(ConfigError) as refused:
        controller_config({**PEERS, key: value}, "ctl.toml")
    assert refused.value.key == key


def test_defaults():
    assert bind(ContainerConfig, {}, "c").bad_request_log_interval_ms == 10_000
    assert namesrv_config({}, "n").metrics_port == 0
    assert controller_config(PEERS, "ctl").max_message_bytes == 4 << 20


@pytest.mark.parametrize("key, value", [
    ("receiveBacklogProbeIntervalMillis", -1), ("receiveBacklogProbeIntervalMillis", 60_001),
    ("receiveBacklogFreshMillis", 0), ("brokerEndpointMaxConnectionAgeMillis", -1),
    ("brokerEndpointMaxConnectionAgeGraceMillis", "soon"),
])
def test_issue_23_messaging_keys(key, value):
    from services.messaging.config import MessagingConfig
    with pytest.raises(ConfigError) as refused:
        bind(MessagingConfig, {key: value}, "c.toml")
    assert refused.value.key == key


def test_a_backlog_answer_must_be_trusted_at_least_one_probe_interval():
    from services.messaging.config import MessagingConfig
    with pytest.raises(ConfigError) as refused:
        bind(MessagingConfig, {"receiveBacklogProbeIntervalMillis": 2000, "receiveBacklogFreshMillis": 1000}, "c.toml")
    assert refused.value.key == "receiveBacklogFreshMillis"


@pytest.mark.parametrize("value", [-1, 17 << 20, "big"])
def test_ha_inline_write_max_bytes_is_bounded(value):
    from ha.replication.config import HaConfig
    with pytest.raises(ConfigError) as refused:
        bind(HaConfig, {"haInlineWriteMaxBytes": value}, "b.toml")
    assert refused.value.key == "haInlineWriteMaxBytes"
