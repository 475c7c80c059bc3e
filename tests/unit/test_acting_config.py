"""The acting-master keys refuse bad values and contradicting combinations with a message
naming the key; their defaults are upstream's."""
from __future__ import annotations

from pathlib import Path

import pytest

from container.config import BrokerEntry, ContainerConfig, load_container_config
from container.config_loader import load_config_file
from container.hosted_broker import bind_broker
from metadata.config import ConfigError, bind
from services.broker.config import BrokerConfig
from services.nameserver.config import namesrv_config


@pytest.mark.parametrize("key, value, reason", [
    ("enableSlaveActingMaster", "maybe", "boolean"),
    ("enableRemoteEscape", 2, "boolean"),
    ("lockInStrictMode", "strict", "boolean"),
    ("syncBrokerMemberGroupPeriod", 10, "100"),
    ("syncBrokerMemberGroupPeriod", "often", "integer"),
    ("memberGroupStaleMillis", 10, "1000"),
    ("escapeTimeoutMillis", 0, "100"),
    ("escapeTimeoutMillis", 120_000, "60000"),
    ("escapeRouteMaxAgeMillis", -1, "0"),
    ("escapeExcludeMillis", 5, "100"),
    ("escapeRetryIntervalMillis", 0, "10"),
    ("fifoLockLeaseMillis", 10, "1000"),
    ("lockQuorumTimeoutMillis", 10, "100"),
    ("handoverTimeoutMillis", 10, "100"),
])
def test_broker_keys_refuse_bad_values(key, value, reason):
    with pytest.raises(ConfigError) as refused:
        bind(BrokerConfig, {key: value}, "c.toml")
    assert refused.value.key == key and reason in str(refused.value)


@pytest.mark.parametrize("key, value", [("notifyMinBrokerIdChanged", "sometimes"), ("notifyMinBrokerIdTimeoutMillis", 1),
                                        ("notifyMinBrokerIdTimeoutMillis", 100_000)])
def test_nameserver_keys_refuse_bad_values(key, value):
    with pytest.raises(ConfigError) as refused:
        namesrv_config({key: value}, "n.toml")
    assert refused.value.key == key


def _bind(tmp_path, **values):
    return bind_broker(BrokerEntry({"brokerName": "broker-a", **values}, "c.toml [[broker]] #1"),
                       ContainerConfig(store_path_root_dir=tmp_path))


def test_acting_master_is_not_for_controller_mode(tmp_path):
    with pytest.raises(ConfigError) as refused:
        _bind(tmp_path, enableControllerMode=True, controllerAddr="127.0.0.1:9876", enableSlaveActingMaster=True)
    assert refused.value.key == "enableSlaveActingMaster" and "enableControllerMode" in str(refused.value)


def test_remote_escape_needs_acting_master(tmp_path):
    with pytest.raises(ConfigError) as refused:
        _bind(tmp_path, enableRemoteEscape=True)
    assert refused.value.key == "enableRemoteEscape" and "enableSlaveActingMaster" in str(refused.value)
    spec = _bind(tmp_path, enableRemoteEscape=True, enableSlaveActingMaster=True, brokerId=1, brokerRole="SLAVE")
    assert spec.broker.enable_remote_escape and spec.broker.enable_slave_acting_master


def test_strict_lock_needs_acting_master(tmp_path):
    with pytest.raises(ConfigError) as refused:
        _bind(tmp_path, lockInStrictMode=True)
    assert refused.value.key == "lockInStrictMode" and "enableSlaveActingMaster" in str(refused.value)
    assert _bind(tmp_path, lockInStrictMode=True, enableSlaveActingMaster=True).broker.lock_in_strict_mode


def test_defaults_are_upstreams():
    config = bind(BrokerConfig, {}, "c")
    assert not config.enable_slave_acting_master and not config.enable_remote_escape and not config.lock_in_strict_mode
    assert config.sync_broker_member_group_period_ms == 1_000 and config.escape_timeout_ms == 3_000
    assert config.lock_quorum_timeout_ms == 2_000 and config.fifo_lock_lease_ms == 60_000
    nameserver = namesrv_config({}, "n")
    assert not nameserver.notify_min_broker_id_changed and nameserver.notify_min_broker_id_timeout_ms == 300


CONF = Path(__file__).resolve().parents[2] / "conf" / "acting-master"


@pytest.mark.parametrize("name, port, master, slave", [("container-1.toml", 8081, "broker-a", "broker-b"),
                                                       ("container-2.toml", 8082, "broker-b", "broker-a")])
def test_the_shipped_acting_master_deployment(name, port, master, slave, tmp_path, monkeypatch):
    """conf/acting-master: the exact ports, roles and keys the issue and scripts rely on."""
    monkeypatch.chdir(tmp_path)
    config, entries, _ = load_container_config(CONF / name)
    assert (config.broker_container_ip, config.grpc_server_port, config.start_embedded_namesrv,
            config.namesrv_addr) == ("127.0.0.1", port, False, "127.0.0.1:9876")
    specs = {spec.broker.broker_name: spec for spec in (bind_broker(e, config) for e in entries)}
    assert (specs[master].broker.broker_id, specs[slave].broker.broker_id) == (0, 1)
    for spec in specs.values():
        assert spec.broker.enable_slave_acting_master and spec.store.flush_disk_type.value == "SYNC_FLUSH"
        ha = spec.ha
        assert (ha.total_replicas, ha.in_sync_replicas, ha.min_in_sync_replicas, ha.enable_auto_in_sync_replicas) == \
            (2, 2, 1, True)
    assert specs[master].ha.broker_role.value == "SYNC_MASTER"
    # each group's master has the smaller of the group's two listen ports (see the file's comment)
    assert {"broker-a": 8091, "broker-b": 8093}[master] == specs[master].broker.listen_port
    assert {"broker-a": 8092, "broker-b": 8094}[slave] == specs[slave].broker.listen_port


def test_the_shipped_acting_master_nameserver():
    config = namesrv_config(load_config_file(CONF / "namesrv.toml"), "namesrv.toml")
    assert (config.listen_port, config.bind_address) == (9876, "127.0.0.1")
    assert config.support_acting_master and config.notify_min_broker_id_changed
