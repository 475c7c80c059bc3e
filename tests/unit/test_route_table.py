"""The nameserver's route table: register, heartbeat expiry, route building, id-0 claims."""
from __future__ import annotations

import pytest

from metadata.data_version import DataVersion
from metadata.route_table import RouteTable, RouteTableOptions
from metadata.route_types import (
    BrokerAddress, BrokerIdentity, BrokerRegistered, BrokerRemoved, HeartbeatReply, Rejected, RemovalReason, RouteRejection,
)
from metadata.topic_config import PERM_READ, PERM_READ_WRITE, TopicConfig, TopicTable

NOW = 1_000_000


def topics(*names: str, state_version: int = 0, queues: int = 4, message_type: str = "NORMAL") -> TopicTable:
    version = DataVersion(state_version=state_version, timestamp_ms=1, counter=len(names))
    return TopicTable(version, {n: TopicConfig(n, queues, queues, message_type=message_type) for n in names})


def ident(name: str = "broker-a", broker_id: int = 0, cluster: str = "DefaultCluster") -> BrokerIdentity:
    return BrokerIdentity(cluster, name, broker_id)


def register(table: RouteTable, identity: BrokerIdentity, address: str, table_topics: TopicTable, now_ms: int = NOW, **kw):
    decision = table.register(identity, address, address.replace("109", "808"), table_topics, now_ms, **kw)
    table.apply_all(decision.events)
    return decision


def test_register_then_route_lists_the_group_with_queue_data():
    table = RouteTable()
    register(table, ident(), "127.0.0.1:10911", topics("T", queues=4, message_type="FIFO"))
    register(table, ident(broker_id=1), "127.0.0.1:10912", topics("T"))
    route = table.route("T")
    assert route is not None and len(route.brokers) == 1
    group = route.brokers[0]
    assert dict(group.addresses).keys() == {0, 1}
    assert group.addresses[0].address == "127.0.0.1:10911"
    assert group.queue_data.read_queue_nums == 4 and group.queue_data.perm == PERM_READ_WRITE
    assert group.queue_data.message_type == "FIFO"


def test_unknown_topic_has_no_route():
    table = RouteTable()
    register(table, ident(), "127.0.0.1:10911", topics("T"))
    assert table.route("Other") is None


def test_commands_do_not_change_state_until_applied():
    table = RouteTable()
    decision = table.register(ident(), "a:1", "a:2", topics("T"), NOW)
    assert isinstance(decision.events[0], BrokerRegistered)
    assert table.route("T") is None
    table.apply_all(decision.events)
    assert table.route("T") is not None


def test_heartbeat_expiry_removes_the_broker_after_its_timeout():
    table = RouteTable(RouteTableOptions(default_heartbeat_timeout_ms=120_000))
    register(table, ident(), "a:1", topics("T"), heartbeat_timeout_ms=10_000)
    register(table, ident("broker-b"), "b:1", topics("T"))  # default 120 s
    assert table.scan_not_active(NOW + 10_000).events == ()  # exactly at the limit: still alive
    decision = table.scan_not_active(NOW + 10_001)
    assert decision.events == (BrokerRemoved(ident(), RemovalReason.EXPIRED),)
    table.apply_all(decision.events)
    assert [b.broker_name for b in table.route("T").brokers] == ["broker-b"]


def test_heartbeat_refreshes_liveness_and_asks_for_registration_when_versions_differ():
    table = RouteTable()
    register(table, ident(), "a:1", topics("T"), heartbeat_timeout_ms=10_000)
    decision = table.heartbeat(ident(), NOW + 9_000, topics("T").data_version)
    assert decision.reply == HeartbeatReply(registration_needed=False)
    table.apply_all(decision.events)
    assert table.scan_not_active(NOW + 15_000).events == ()
    assert table.heartbeat(ident(), NOW, DataVersion(0, 5, 99)).reply.registration_needed
    unknown = table.heartbeat(ident("nobody"), NOW)
    assert unknown.events == () and unknown.reply.registration_needed


def test_unregister_removes_and_empty_group_leaves_the_cluster():
    table = RouteTable()
    register(table, ident(), "a:1", topics("T"))
    decision = table.unregister(ident(), "a:1", 0)
    table.apply_all(decision.events)
    assert table.route("T") is None
    assert table.cluster_info().groups == ()
    again = table.unregister(ident(), "a:1", 0)
    assert isinstance(again.reply, Rejected) and again.reply.reason is RouteRejection.BROKER_NOT_REGISTERED


# (registered at, with stateVersion) x (unregister names address, stateVersion) -> removed, or the named reason
UNREGISTER_CASES = [
    ("own registration", ("old:1", 1), ("old:1", 1), None),
    ("own, named with a newer stateVersion", ("old:1", 1), ("old:1", 2), None),
    # a master stopped (SIGSTOP) past the election wakes, turns slave and unregisters its old id 0,
    # which is by then its successor's registration
    ("the successor's registration", ("new:1", 2), ("old:1", 1), RouteRejection.HELD_BY_ANOTHER_ADDRESS),
    ("the successor's, even named with a larger epoch", ("new:1", 2), ("old:1", 3),
     RouteRejection.HELD_BY_ANOTHER_ADDRESS),
    # the same container registered the id again, with a newer epoch, before a late unregister arrived
    ("a newer registration of the same address", ("old:1", 3), ("old:1", 1), RouteRejection.STALE_STATE_VERSION),
]


@pytest.mark.parametrize("registered, named, rejection", [c[1:] for c in UNREGISTER_CASES],
                         ids=[c[0] for c in UNREGISTER_CASES])
def test_an_unregister_removes_only_the_registration_it_names(registered, named, rejection):
    table = RouteTable()
    register(table, ident(), registered[0], topics("T", state_version=registered[1]))
    register(table, ident(broker_id=1), "slave:1", topics("T", state_version=registered[1]))
    decision = table.unregister(ident(), *named)
    if rejection is None:
        assert decision.events == (BrokerRemoved(ident(), RemovalReason.UNREGISTERED),) and decision.reply is None
    else:
        assert decision.events == () and isinstance(decision.reply, Rejected) and decision.reply.reason is rejection
    table.apply_all(decision.events)
    addresses = table.route("T").brokers[0].addresses
    assert (0 in addresses) == (rejection is not None)
    if rejection is not None:
        assert addresses[0].address == registered[0]


def test_two_id0_claims_prefer_the_larger_state_version():
    table = RouteTable()
    register(table, ident(), "old:1", topics("T", state_version=5))
    stale = register(table, ident(), "rogue:1", topics("T", state_version=4))
    assert isinstance(stale.reply, Rejected) and stale.reply.reason is RouteRejection.STALE_STATE_VERSION
    assert table.route("T").brokers[0].addresses[0].address == "old:1"
    newer = register(table, ident(), "new:1", topics("T", state_version=6))
    assert newer.reply.replaced == ident()
    assert table.route("T").brokers[0].addresses[0].address == "new:1"


def test_an_expired_holder_loses_its_id_even_with_a_larger_state_version():
    table = RouteTable()
    register(table, ident(), "old:1", topics("T", state_version=9), heartbeat_timeout_ms=1_000)
    decision = register(table, ident(), "new:1", topics("T", state_version=1), now_ms=NOW + 2_000)
    assert not decision.rejected
    assert table.route("T").brokers[0].addresses[0].address == "new:1"


def test_a_broker_name_belongs_to_one_cluster():
    table = RouteTable()
    register(table, ident(), "a:1", topics("T"))
    decision = register(table, ident(cluster="Other"), "b:1", topics("T"))
    assert decision.reply.reason is RouteRejection.BROKER_NAME_IN_OTHER_CLUSTER


def test_slave_reply_carries_the_master_address():
    table = RouteTable()
    register(table, ident(), "master:1", topics("T"))
    assert register(table, ident(broker_id=1), "slave:1", topics("T")).reply.master_address == "master:1"
    assert register(table, ident(), "master:1", topics("T")).reply.master_address == ""


def test_cluster_info_groups_brokers_by_cluster_and_name():
    table = RouteTable()
    register(table, ident("broker-a"), "a:1", topics("T"))
    register(table, ident("broker-a", 1), "b:1", topics("T"))
    register(table, ident("broker-c", cluster="C2"), "c:1", topics())
    info = table.cluster_info()
    assert dict(info.clusters) == {"C2": ("broker-c",), "DefaultCluster": ("broker-a",)}
    group_a = [g for g in info.groups if g.broker_name == "broker-a"][0]
    assert [m.identity.broker_id for m in group_a.members] == [0, 1]
    assert table.master_addresses("DefaultCluster") == {"broker-a": "a:1"}


def test_acting_group_without_master_routes_the_slave_as_id0_read_only():
    table = RouteTable(RouteTableOptions(support_acting_master=True))
    register(table, ident(), "master:1", topics("T"), enable_acting_master=True)
    register(table, ident(broker_id=1), "slave:1", topics("T"), enable_acting_master=True)
    register(table, ident("broker-b"), "b:1", topics("T"), enable_acting_master=True)
    table.apply_all(table.unregister(ident(), "master:1", 0).events)
    groups = {g.broker_name: g for g in table.route("T").brokers}
    assert dict(groups["broker-a"].addresses).keys() == {0}
    assert groups["broker-a"].addresses[0].address == "slave:1"
    assert groups["broker-a"].queue_data.perm == PERM_READ
    assert groups["broker-b"].queue_data.perm == PERM_READ_WRITE  # only the master-less group is rewritten
    register(table, ident(), "master:1", topics("T"), enable_acting_master=True)
    again = table.route("T").brokers[0]
    assert again.addresses[0].address == "master:1" and again.addresses[1].address == "slave:1"
    assert again.queue_data.perm == PERM_READ_WRITE


def test_old_version_group_keeps_slave_id_and_write_perm():
    table = RouteTable(RouteTableOptions(support_acting_master=True))
    register(table, ident(), "master:1", topics("T"))
    register(table, ident(broker_id=1), "slave:1", topics("T"))
    table.apply_all(table.unregister(ident(), "master:1", 0).events)
    group = table.route("T").brokers[0]
    assert dict(group.addresses).keys() == {1} and group.queue_data.perm == PERM_READ_WRITE


def test_the_number_of_brokers_is_limited_but_known_brokers_may_re_register():
    table = RouteTable(RouteTableOptions(max_brokers=1))
    register(table, ident(), "a:1", topics("T"))
    assert register(table, ident("broker-b"), "b:1", topics()).reply.reason is RouteRejection.TOO_MANY_BROKERS
    assert not register(table, ident(), "a:1", topics("T", "U")).rejected


def test_routes_and_cluster_info_carry_each_containers_tls_endpoint_and_a_re_registration_replaces_it():
    table = RouteTable()
    register(table, ident(), "127.0.0.1:1091", topics("T"), tls_client_endpoint="127.0.0.1:8443")
    register(table, ident("broker-b"), "127.0.0.1:2091", topics("T"))  # its container has no TLS port
    groups = {g.broker_name: g for g in table.route("T").brokers}
    assert groups["broker-a"].addresses[0] == BrokerAddress("127.0.0.1:1091", "127.0.0.1:8081", "127.0.0.1:8443")
    assert groups["broker-b"].addresses[0].tls_client_endpoint == ""
    members = {g.broker_name: g.members[0] for g in table.cluster_info().groups}
    assert members["broker-a"].tls_client_endpoint == "127.0.0.1:8443" and members["broker-b"].tls_client_endpoint == ""
    register(table, ident(), "127.0.0.1:1091", topics("T"))  # restarted without grpcTlsPort
    assert table.route("T").brokers[0].addresses[0].tls_client_endpoint == ""
    register(table, ident("broker-b"), "127.0.0.1:2091", topics("T"), tls_client_endpoint="127.0.0.1:9443")
    assert table.route("T").brokers[1].addresses[0].tls_client_endpoint == "127.0.0.1:9443"


def test_heartbeats_keep_the_tls_endpoint_and_expiry_removes_it_with_the_broker():
    table = RouteTable()
    register(table, ident(), "a:1091", topics("T"), heartbeat_timeout_ms=10_000, tls_client_endpoint="a:8443")
    table.apply_all(table.heartbeat(ident(), NOW + 9_000).events)
    assert table.registration(ident()).tls_client_endpoint == "a:8443"
    table.apply_all(table.scan_not_active(NOW + 19_001).events)
    assert table.registration(ident()) is None and table.route("T") is None
    register(table, ident(), "a:1091", topics("T"), now_ms=NOW + 20_000)  # back, without TLS this time
    assert table.route("T").brokers[0].addresses[0].tls_client_endpoint == ""


def test_the_acting_master_rewrite_moves_the_slaves_tls_endpoint_to_id0():
    table = RouteTable(RouteTableOptions(support_acting_master=True))
    register(table, ident(), "master:1091", topics("T"), enable_acting_master=True, tls_client_endpoint="master:8443")
    register(table, ident(broker_id=1), "slave:1091", topics("T"), enable_acting_master=True,
             tls_client_endpoint="slave:8443")
    table.apply_all(table.unregister(ident(), "master:1091", 0).events)
    acting = table.route("T").brokers[0].addresses[0]
    assert acting == BrokerAddress("slave:1091", "slave:8081", "slave:8443")
