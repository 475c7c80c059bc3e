"""``relaymq admin ha-status`` shows a master in pre-online (not registered yet) as PRE_ONLINE with
the step it waits on, found through the address it offered its slave; no network: the
nameserver's members and each container's status are stand-ins."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from container import cli_ha

PRE_ONLINE = {"step": "WAIT_TRANSFER", "attempt": 2, "waitingOn": 1, "waitingOnAddress": "c2:1", "waitedMs": 850,
              "lastFailure": "TRANSFER_TIMEOUT: member 1 did not reach TRANSFER within 10000 ms", "synced": []}


async def no_controller(args, names):
    return {}


def run(monkeypatch, statuses: dict) -> list[dict]:
    slave = SimpleNamespace(cluster="DefaultCluster", broker_name="broker-a", broker_id=1, address="c2:1")

    async def members(args, cluster=None):
        return [slave]

    async def member_status(member, timeout_ms):
        return statuses.get((member.address, member.broker_id))

    monkeypatch.setattr(cli_ha, "_members", members)
    monkeypatch.setattr(cli_ha, "_member_status", member_status)
    monkeypatch.setattr(cli_ha, "_controller_replicas", no_controller)
    return asyncio.run(cli_ha.collect(SimpleNamespace(cluster=None, broker="broker-a", timeout_ms=1000, namesrv=["n:1"])))


def slave_status(offered: str) -> dict:
    return {"role": "SLAVE", "state": "HANDSHAKE", "maxOffset": 10, "confirmOffset": 10, "queueOffsetTotal": 1,
            "offeredMaster": offered, "specialServicesRunning": False, "acting": False}


def test_a_master_in_pre_online_is_shown_with_the_step_it_waits_on(monkeypatch):
    master = {"role": "MASTER", "maxOffset": 10, "queueOffsetTotal": 1, "slaves": [], "preOnline": PRE_ONLINE,
              "specialServicesRunning": False, "acting": False}
    (group,) = run(monkeypatch, {("c2:1", 1): slave_status("c1:1"), ("c1:1", 0): master})
    assert group["master"]["state"] == "PRE_ONLINE" and group["master"]["preOnline"]["step"] == "WAIT_TRANSFER"
    assert group["master"]["address"] == "c1:1" and not group["servable"]
    text = cli_ha._render({"groups": [group]})
    assert "master at c1:1 in pre-online, not in routes yet: waiting for slave 1's replication, attempt 2" in text
    assert "TRANSFER_TIMEOUT" in text


def test_without_an_offer_or_once_online_the_master_is_what_the_nameserver_says(monkeypatch):
    (group,) = run(monkeypatch, {("c2:1", 1): slave_status("")})
    assert group["master"]["state"] == "NOT_REGISTERED"
    done = {"role": "MASTER", "preOnline": {**PRE_ONLINE, "step": "ONLINE"}, "slaves": []}
    (group,) = run(monkeypatch, {("c2:1", 1): slave_status("c1:1"), ("c1:1", 0): done})
    assert group["master"]["state"] == "NOT_REGISTERED"  # online but not registered yet: the nameserver's word
