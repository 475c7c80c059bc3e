"""services/status_metrics.py: samples from status mappings, and the one collector of all sources."""
from __future__ import annotations

import asyncio
import threading

from prometheus_client import CollectorRegistry, generate_latest

from metadata.route_types import BrokerGroupInfo, BrokerIdentity, ClusterInfo
from services.status_metrics import (StatusMetrics, broker_samples, controller_samples, master_samples,
                                     nameserver_samples, slave_samples)

MASTER_STATUS = {"role": "MASTER", "maxOffset": 5000, "confirmOffset": 4000, "syncStateSet": [0, 1],
                 "epochs": [[1, 0], [3, 2048]], "syncStateSetEpoch": 6,
                 "slaves": [{"slaveId": 1, "connected": True, "inSyncStateSet": True, "ackOffset": 4000},
                            {"slaveId": 2, "connected": False, "inSyncStateSet": False, "ackOffset": 5000}]}


def values(samples):
    return {(s.name, s.labels): s.value for s in samples}


def test_broker_role_is_one_sample_per_role():
    found = values(broker_samples("broker-a", 1, "SLAVE"))
    assert found[("relaymq_broker_up", (("broker", "broker-a"), ("broker_id", "1")))] == 1
    assert found[("relaymq_broker_role", (("broker", "broker-a"), ("broker_id", "1"), ("role", "SLAVE")))] == 1
    assert found[("relaymq_broker_role", (("broker", "broker-a"), ("broker_id", "1"), ("role", "MASTER")))] == 0


def test_master_samples_per_slave_and_lag_counted_only_when_behind():
    asked = []
    found = values(master_samples("broker-a", MASTER_STATUS, lambda offset: asked.append(offset) or 7))
    one, two = (("broker", "broker-a"), ("slave_id", "1")), (("broker", "broker-a"), ("slave_id", "2"))
    assert found[("relaymq_replication_slave_connected", one)] == 1
    assert found[("relaymq_replication_slave_connected", two)] == 0
    assert found[("relaymq_replication_slave_lag_bytes", one)] == 1000
    assert found[("relaymq_replication_slave_lag_messages", one)] == 7
    assert found[("relaymq_replication_slave_lag_messages", two)] == 0
    assert asked == [4000]  # the caught-up slave costs no store lookup
    assert found[("relaymq_replication_slave_in_sync", one)] == 1
    assert found[("relaymq_replication_sync_state_set_size", (("broker", "broker-a"),))] == 2
    assert found[("relaymq_replication_sync_state_set_epoch", (("broker", "broker-a"),))] == 6
    assert values(master_samples("broker-a", {**MASTER_STATUS, "masterEpoch": 9}, lambda o: 0))[
        ("relaymq_replication_epoch", (("broker", "broker-a"), ("broker_id", "0")))] == 9
    assert found[("relaymq_replication_epoch", (("broker", "broker-a"), ("broker_id", "0")))] == 3
    assert found[("relaymq_replication_confirm_offset_bytes", (("broker", "broker-a"), ("broker_id", "0")))] == 4000


def test_slave_samples():
    status = {"role": "SLAVE", "masterAddress": "", "ackedOffset": 10, "maxOffset": 12, "confirmOffset": 8, "epochs": []}
    found = values(slave_samples("broker-b", 1, status))
    labels = (("broker", "broker-b"), ("broker_id", "1"))
    assert found[("relaymq_replication_master_connected", labels)] == 0
    assert found[("relaymq_replication_acked_offset_bytes", labels)] == 10
    assert found[("relaymq_replication_epoch", labels)] == 0
    assert values(slave_samples("broker-b", 1, {**status, "masterAddress": "127.0.0.1:1"}))[
        ("relaymq_replication_master_connected", labels)] == 1


def _registration(name: str, broker_id: int):
    from metadata.route_types import Registration
    from metadata.topic_config import TopicTable

    return Registration(BrokerIdentity("C", name, broker_id), "a:1", "a:2", TopicTable(), 1000, 0)


def test_nameserver_samples_count_groups_without_master():
    info = ClusterInfo({"C": ("broker-a", "broker-b")},
                       (BrokerGroupInfo("C", "broker-a", (_registration("broker-a", 0), _registration("broker-a", 1))),
                        BrokerGroupInfo("C", "broker-b", (_registration("broker-b", 1),))))
    found = values(nameserver_samples(info))
    assert found[("relaymq_nameserver_brokers_alive", (("cluster", "C"),))] == 3
    assert found[("relaymq_nameserver_broker_groups", (("cluster", "C"),))] == 2
    assert found[("relaymq_nameserver_broker_groups_without_master", (("cluster", "C"),))] == 1


def test_collector_merges_sources_runs_them_on_their_loop_and_survives_a_failing_one():
    collector = StatusMetrics()
    registry = CollectorRegistry()
    registry.register(collector)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    seen_threads = []

    def on_loop():
        seen_threads.append(threading.current_thread())
        return controller_samples("G", "n0", True, 4, 17, 2, 3)

    def broken():
        raise RuntimeError("owner stopping")
    try:
        collector.add(on_loop, loop)
        collector.add(lambda: broker_samples("broker-a", 0, "MASTER"))
        token = collector.add(broken)
        text = generate_latest(registry).decode()
        assert seen_threads == [thread]
        assert 'relaymq_controller_term{group="G",member="n0"} 4.0' in text
        assert 'relaymq_controller_elections_total{group="G",member="n0"} 2.0' in text
        assert 'relaymq_broker_role{broker="broker-a",broker_id="0",role="MASTER"} 1.0' in text
        assert text.count("# TYPE relaymq_broker_up gauge") == 1
        collector.remove(token)
        collector.remove(token)  # idempotent
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def test_docs_list_every_metric():
    from pathlib import Path

    from services.metrics import REGISTRY
    from services.status_metrics import COUNTER, FAMILIES

    docs = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    names = {f"{name}_total" if kind == COUNTER else name for name, (kind, _) in FAMILIES.items()}
    for family in REGISTRY.collect():  # every registered metric, the process collector's too
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    missing = sorted(name for name in names if f"`{name}`" not in docs)
    assert not missing, f"docs/metrics.md does not list {missing}"
