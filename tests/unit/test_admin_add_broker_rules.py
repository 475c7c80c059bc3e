"""Section 1.3's checks for adding a broker at runtime, as a pure function."""
from __future__ import annotations

import pytest

from services.admin.add_broker_rules import AddBrokerRefusal, NewBrokerClaim, check_config_path, check_new_broker


def test_empty_path_and_empty_properties():
    assert check_config_path("  ").message == "addBroker config path is empty"
    assert check_config_path("/x.properties") is None
    assert check_new_broker({}, []).message == "addBroker properties empty"


def test_master_role_forces_id_zero_and_slave_needs_positive_id():
    claim = check_new_broker({"brokerName": "b", "brokerId": "3"}, [])
    assert claim == NewBrokerClaim("DefaultCluster", "b", 0, "ASYNC_MASTER", False)
    assert check_new_broker({"brokerName": "b", "brokerRole": "SLAVE", "brokerId": "0"}, []).reason is AddBrokerRefusal.SLAVE_BROKER_ID
    slave = check_new_broker({"brokerName": "b", "brokerRole": "SLAVE", "brokerId": 2}, [])
    assert slave.broker_id == 2 and slave.canonical_name == "DefaultCluster_b_2"


@pytest.mark.parametrize("total, in_sync, minimum", [(1, 2, 1), (1, 1, 2), (3, 1, 2)])
def test_invalid_replicas(total, in_sync, minimum):
    values = {"brokerName": "b", "totalReplicas": total, "inSyncReplicas": in_sync, "minInSyncReplicas": minimum}
    assert check_new_broker(values, []).message == "invalid replicas number"


def test_already_added_and_controller_mode_checks_by_name():
    hosted = [("DefaultCluster", "b", 0)]
    assert check_new_broker({"brokerName": "b"}, hosted).message == "DefaultCluster_b_0 has already been added to current broker container"
    assert isinstance(check_new_broker({"brokerName": "b", "brokerRole": "SLAVE", "brokerId": "1"}, hosted), NewBrokerClaim)
    controller = {"brokerName": "b", "enableControllerMode": "true", "brokerRole": "SLAVE", "brokerId": "5"}
    assert check_new_broker(controller, hosted).reason is AddBrokerRefusal.ALREADY_ADDED


def test_bad_values_and_unsupported_modes_are_named():
    assert "brokerRole" in check_new_broker({"brokerName": "b", "brokerRole": "BOSS"}, []).message
    assert "brokerId" in check_new_broker({"brokerName": "b", "brokerId": "x"}, []).message
    assert "brokerName is required" in check_new_broker({"brokerId": "0"}, []).message
    assert check_new_broker({"brokerName": "b", "duplicationEnable": "true"}, []).reason is AddBrokerRefusal.UNSUPPORTED
    assert check_new_broker({"brokerName": "b", "enableDLegerCommitLog": True}, []).reason is AddBrokerRefusal.UNSUPPORTED
