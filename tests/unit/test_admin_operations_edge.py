"""The edge of mqadmin's everyday operations: request validation and live broker config."""
from __future__ import annotations

import pytest

from metadata.config import ConfigError
from proto import admin_pb2 as pb
from services.admin import operation_converters as ops
from services.admin.converters import BadAdminRequest
from services.broker.config import BrokerConfig
from services.broker.live_config import LIVE_KEYS, NotLive, config_entries, updated_config
from services.broker.message_query import MessageMatch, per_queue_budget
from store.config import StoreConfig


def test_reset_request_needs_one_target_and_valid_names():
    reset = ops.reset_from_proto(pb.AdminResetOffsetRequest(broker_name="broker-a", group="G", topic="T", timestamp_ms=5))
    assert (reset.group, reset.topic, reset.timestamp_ms) == ("G", "T", 5)
    assert ops.reset_from_proto(pb.AdminResetOffsetRequest(broker_name="b", group="G", topic="T",
                                                           to_max_offset=True)).timestamp_ms is None
    for request, message in ((pb.AdminResetOffsetRequest(broker_name="b", group="G", topic="T"), "target"),
                             (pb.AdminResetOffsetRequest(broker_name="b", group="G", topic="T", timestamp_ms=-1), "negative"),
                             (pb.AdminResetOffsetRequest(broker_name="b", group="G", topic="T", to_max_offset=False), "true"),
                             (pb.AdminResetOffsetRequest(group="G", topic="T", timestamp_ms=1), "broker_name"),
                             (pb.AdminResetOffsetRequest(broker_name="b", group="a b", topic="T", timestamp_ms=1), "group")):
        with pytest.raises(BadAdminRequest, match=message):
            ops.reset_from_proto(request)


def test_query_request_limits():
    query = ops.query_from_proto(pb.AdminQueryMessageRequest(topic="T", key="order-1"))
    assert (query.max_scan, query.max_results, query.match) == (ops.DEFAULT_SCAN, 32, MessageMatch(key="order-1"))
    for request, message in ((pb.AdminQueryMessageRequest(topic="T"), "match"),
                             (pb.AdminQueryMessageRequest(topic="T", key="a b"), "without spaces"),
                             (pb.AdminQueryMessageRequest(topic="T", message_id="\x01"), "control"),
                             (pb.AdminQueryMessageRequest(topic="T", key="k", max_scan=2_000_000), "max_scan"),
                             (pb.AdminQueryMessageRequest(topic="T", key="k", max_results=5000), "max_results"),
                             (pb.AdminQueryMessageRequest(topic="T", key="k", max_body_bytes=-1), "max_body_bytes")):
        with pytest.raises(BadAdminRequest, match=message):
            ops.query_from_proto(request)
    assert per_queue_budget(100, 8) == 12 and per_queue_budget(3, 8) == 1


def test_client_filter_and_config_changes():
    assert ops.client_filter_from_proto(pb.AdminClientConnectionsRequest(group="G", client_type="PRODUCER")) == ("G", "", "PRODUCER")
    with pytest.raises(BadAdminRequest, match="client_type"):
        ops.client_filter_from_proto(pb.AdminClientConnectionsRequest(client_type="ROBOT"))
    with pytest.raises(BadAdminRequest, match="at least one"):
        ops.config_changes_from_proto({})
    with pytest.raises(BadAdminRequest, match="not a configuration key"):
        ops.config_changes_from_proto({"no such": "1"})


def test_config_entries_show_every_key_and_which_are_live():
    entries = {key: (value, unit, live) for key, value, unit, live in config_entries(BrokerConfig(), StoreConfig("/tmp/x"))}
    assert entries["popScanMax"] == ("256", "messages", True)
    assert entries["brokerRole"][0] == "ASYNC_MASTER" and not entries["brokerRole"][2]
    assert "storePathRootDir" in entries and set(LIVE_KEYS) <= set(entries)


def test_live_update_validates_like_the_file_and_refuses_restart_keys():
    config = BrokerConfig()
    changed = updated_config(config, {"popScanMax": "512", "autoCreateTopicEnable": "true"}, "c.toml")
    assert (changed.pop_scan_max, changed.auto_create_topic_enable, changed.broker_name) == (512, True, config.broker_name)
    with pytest.raises(NotLive, match="brokerRole exists but takes effect only at a restart: change it in c.toml"):
        updated_config(config, {"brokerRole": "SLAVE"}, "c.toml")
    with pytest.raises(NotLive, match="is not a broker key"):
        updated_config(config, {"flushDiskType": "SYNC_FLUSH"}, "c.toml")
    with pytest.raises(ConfigError, match="c.toml: defaultTopicQueueNums"):
        updated_config(config, {"defaultTopicQueueNums": "0"}, "c.toml")
    with pytest.raises(ConfigError, match="popScanMax"):
        updated_config(config, {"popScanMax": "many"}, "c.toml")
