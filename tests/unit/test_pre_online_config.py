"""Pre-online's configuration keys and the update step's: bad values are refused naming the key,
the defaults are upstream's where upstream has the key."""
from __future__ import annotations

import pytest

from metadata.config import ConfigError, bind
from services.broker.config import BrokerConfig


@pytest.mark.parametrize("key, value, reason", [
    ("skipPreOnline", "maybe", "boolean"),
    ("preOnlineTransferTimeoutMillis", 99, "100"),
    ("preOnlineTransferTimeoutMillis", "soon", "integer"),
    ("preOnlineSyncTimeoutMillis", 700_000, "600000"),
    ("preOnlineRetryIntervalMillis", 5, "10"),
    ("preOnlineMaxAttempts", -1, "0"),
    ("delayOffsetUpdateVersionStep", 0, "1"),
    ("consumerOffsetUpdateVersionStep", 0, "1"),
])
def test_bad_values_are_refused_naming_the_key(key, value, reason):
    with pytest.raises(ConfigError) as refused:
        bind(BrokerConfig, {key: value}, "broker.toml")
    assert refused.value.key == key and reason in str(refused.value)


def test_defaults():
    config = bind(BrokerConfig, {}, "broker.toml")
    assert (config.skip_pre_online, config.pre_online_transfer_timeout_ms, config.pre_online_retry_interval_ms,
            config.pre_online_sync_timeout_ms, config.pre_online_max_attempts) == (False, 10_000, 1_000, 30_000, 0)
    assert (config.consumer_offset_update_version_step, config.delay_offset_update_version_step) == (500, 200)
    assert bind(BrokerConfig, {"skipPreOnline": "true"}, "b").skip_pre_online
