"""What ``relaymq admin`` says during failures (issue 24, defect 8), without a network: the
nameserver's members, each container's status and the controller's replicas are stand-ins.

- ha-status under a controller names every replica of every group: the dead old master of
  broker-a (the new master never had it as a slave, the nameserver expired it) comes from the
  controller's replicas, as the dead slave of broker-b comes from its master's memory.
- cluster-list knows a slave that acts for its absent master (its BrokerStatus says so): its
  group is read and consumed there, not "cannot be written or consumed".
"""
from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

from container import admin_view as view
from container import cli_ha
from container.cli_status import acting_ids_of_status
from proto import admin_pb2 as apb

C2 = "c2:1"


def master_status(replica_id: int, slaves: list[dict]) -> dict:
    return {"role": "MASTER", "replicaId": replica_id, "maxOffset": 100, "confirmOffset": 100, "queueOffsetTotal": 5,
            "syncStateSet": [replica_id], "slaves": slaves, "specialServicesRunning": True, "acting": False}


def dead_slave(slave_id: int) -> dict:
    return {"slaveId": slave_id, "address": "c1:1", "connected": False, "learner": False, "ackOffset": 80,
            "inSyncStateSet": False}


def collect(monkeypatch, controller: dict) -> dict[str, dict]:
    """Container 1 (replica 1 of both groups) was killed; replica 2 in container 2 is master of both."""
    members = [SimpleNamespace(cluster="C", broker_name=name, broker_id=0, address=C2) for name in ("broker-a", "broker-b")]
    statuses = {"broker-a": master_status(2, []), "broker-b": master_status(2, [dead_slave(1)])}

    async def nameserver_members(args, cluster=None):
        return members

    async def member_status(member, timeout_ms):
        return statuses[member.broker_name]

    async def controller_replicas(args, names):
        return controller

    monkeypatch.setattr(cli_ha, "_members", nameserver_members)
    monkeypatch.setattr(cli_ha, "_member_status", member_status)
    monkeypatch.setattr(cli_ha, "_controller_replicas", controller_replicas)
    args = SimpleNamespace(cluster=None, broker=None, timeout_ms=1000, namesrv=["n:1"], controller=None)
    return {g["brokerName"]: g for g in asyncio.run(cli_ha.collect(args))}


def replicas(*ids_alive: tuple[int, bool]) -> list[dict]:
    return [{"brokerId": i, "address": f"c{i}:1", "alive": alive, "inSync": alive} for i, alive in ids_alive]


def test_ha_status_lists_the_dead_replica_in_every_group_it_belonged_to(monkeypatch):
    groups = collect(monkeypatch, {"broker-a": replicas((1, False), (2, True)), "broker-b": replicas((1, False), (2, True))})
    for name in ("broker-a", "broker-b"):
        assert [(s["brokerId"], s["state"]) for s in groups[name]["slaves"]] == [(1, "NOT_REGISTERED")], name
    text = cli_ha._render({"groups": list(groups.values())})
    assert text.count("NOT_REGISTERED") == 2, text


def test_without_a_controller_answer_ha_status_shows_what_it_reached(monkeypatch):
    groups = collect(monkeypatch, {})
    assert groups["broker-a"]["slaves"] == [] and [s["brokerId"] for s in groups["broker-b"]["slaves"]] == [1]


def test_a_replica_already_shown_is_not_added_again():
    group = {"master": {"replicaId": 2}, "slaves": [{"brokerId": 3}]}
    rows = cli_ha._controller_only_slaves(group, replicas((1, False), (2, True), (3, True)))
    assert [(r["brokerId"], r["lastClose"]) for r in rows] == [(1, "not alive at the controller")]


def broker_status(name: str, broker_id: int, acting: bool) -> apb.AdminBrokerStatusResponse:
    status = apb.AdminBrokerStatus(broker_name=name, broker_id=broker_id, status_json=json.dumps({"acting": acting}))
    return apb.AdminBrokerStatusResponse(brokers=[status])


def test_cluster_list_knows_the_slave_acting_for_its_absent_master():
    replies = {1: broker_status("broker-a", 1, True)}
    assert acting_ids_of_status(replies, "broker-a") == {1}
    assert acting_ids_of_status({1: broker_status("broker-a", 1, False)}, "broker-a") == set()
    assert acting_ids_of_status({1: view.Failure("down")}, "broker-a") == set()
    state = view.replica_states(view.Group("C", "broker-a", {1: "c2:1"}), replies, acting_ids_of_status(replies, "broker-a"))
    lines = view.unreachable_lines([state])
    assert "broker-a: no reachable master; slave 1 acts for it: its queues are read and consumed there, not written" in lines
    assert not any("cannot be written or consumed" in line for line in lines)
