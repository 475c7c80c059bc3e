"""Three ``relaymq controller`` processes on 127.0.0.1, SIGKILL, restart.

Checks: a new leader appears after kill -9 of the leader under a stream of writes; every
acknowledged change is still there; followers answer NOT_LEADER; with two of three down
writes fail cleanly and change nothing; after restarting everyone the state is recovered
from disk.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proto import controller_pb2 as pb
from services.controller.client import ControllerClient
from tests.support.container_process import free_ports

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
Code = pb.ControllerStatus


class Group:
    def __init__(self, tmp_path: Path):
        self.ports = free_ports(3)
        self.addresses = [f"127.0.0.1:{p}" for p in self.ports]
        peers = ";".join(f"n{i}-{a}" for i, a in enumerate(self.addresses))
        self.files = []
        for i in range(3):
            path = tmp_path / f"n{i}.toml"
            path.write_text(f'controllerDLegerPeers = "{peers}"\ncontrollerDLegerSelfId = "n{i}"\n'
                            f'controllerStorePath = "{tmp_path / f"data-n{i}"}"\n')
            self.files.append(path)
        self.logs = [open(tmp_path / f"n{i}.log", "ab") for i in range(3)]
        self.procs: list[subprocess.Popen | None] = [None, None, None]

    def start(self, i: int) -> None:
        self.procs[i] = subprocess.Popen([sys.executable, "-m", "container", "controller", "-c", str(self.files[i])],
                                         cwd=ROOT, stdout=self.logs[i], stderr=subprocess.STDOUT)

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)
        self.procs[i] = None

    def close(self) -> None:
        for i in range(3):
            self.kill(i)
        for log in self.logs:
            log.close()


async def metadata_of(address: str):
    client = ControllerClient([address], call_timeout_s=0.5, attempts=1)
    try:
        return await client.metadata()
    except Exception:
        return None
    finally:
        await client.close()


async def wait_leader(group: Group, among: list[int], timeout_s: float = 20.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for i in among:
            meta = await metadata_of(group.addresses[i])
            if meta is not None and meta.is_leader:
                return i
        await asyncio.sleep(0.05)
    raise AssertionError("no serving leader")


async def apply_and_register(client: ControllerClient, name: str) -> bool:
    reply = await client.call("ApplyBrokerId", pb.ApplyBrokerIdRequest(
        cluster_name="c", broker_name=name, applied_broker_id=1, register_check_code=f"{name}:1;1"))
    if reply.status.code != Code.SUCCESS:
        return False
    reply = await client.call("ElectMaster", pb.ElectMasterRequest(cluster_name="c", broker_name=name, broker_id=1))
    return reply.status.code == Code.SUCCESS


class Writer:
    """Registers brokers set-0, set-1, ... one after another, recording which were acknowledged."""

    def __init__(self, client: ControllerClient):
        self.client, self.acknowledged, self._stop = client, [], asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            name = f"set-{n}"
            n += 1
            try:
                if await apply_and_register(self.client, name):
                    self.acknowledged.append(name)
            except Exception:  # refused or timed out during the election: not acknowledged
                pass

    async def until(self, count: int, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.acknowledged) < count and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    async def stop(self) -> list[str]:
        self._stop.set()
        await self._task
        return self.acknowledged


def test_kill_leader_under_writes_then_quorum_loss_then_full_restart(tmp_path):
    group = Group(tmp_path)

    async def scenario():
        for i in range(3):
            group.start(i)
        leader = await wait_leader(group, [0, 1, 2])
        client = ControllerClient(group.addresses, call_timeout_s=2.0, attempts=30, deadline_s=20.0)
        writer = Writer(client)
        await writer.until(20)
        group.kill(leader)
        before_kill = len(writer.acknowledged)
        survivors = [i for i in range(3) if i != leader]
        new_leader = await wait_leader(group, survivors)
        assert new_leader != leader
        await writer.until(before_kill + 20)
        acknowledged = await writer.stop()
        assert len(acknowledged) >= before_kill + 20, "writes did not resume on the new leader"

        reply = await client.call("GetSyncStateData", pb.GetSyncStateDataRequest())
        present = {g.view.broker_name: g.view for g in reply.groups}
        lost = [name for name in acknowledged if name not in present]
        assert not lost, f"acknowledged changes lost: {lost[:5]}"
        assert all(present[name].master_epoch == 1 and present[name].master_broker_id == 1 for name in acknowledged)

        follower = next(i for i in survivors if i != new_leader)
        direct = ControllerClient([group.addresses[follower]], attempts=1)
        refused = await direct.call("GetReplicaInfo", pb.GetReplicaInfoRequest(broker_name="set-0"))
        assert refused.status.code == Code.CONTROLLER_NOT_LEADER
        assert refused.status.leader_address == group.addresses[new_leader]
        await direct.close()

        # two of three down: writes fail cleanly, nothing changes
        group.kill(new_leader)
        lonely = ControllerClient([group.addresses[follower]], call_timeout_s=1.0, attempts=3, deadline_s=4.0)
        reply = await lonely.call("ApplyBrokerId", pb.ApplyBrokerIdRequest(
            cluster_name="c", broker_name="during-outage", applied_broker_id=1, register_check_code="x:1;1"))
        assert reply.status.code != Code.SUCCESS
        await lonely.close()

        # restart everyone: recovered from disk
        for i in range(3):
            if group.procs[i] is None:
                group.start(i)
        await wait_leader(group, [0, 1, 2])
        reply = await client.call("GetSyncStateData", pb.GetSyncStateDataRequest())
        assert reply.status.code == Code.SUCCESS
        recovered = {g.view.broker_name: g.view for g in reply.groups}
        assert "during-outage" not in recovered
        assert set(acknowledged) <= set(recovered)
        assert all(recovered[n].master_epoch == present[n].master_epoch for n in present)
        await client.close()

    try:
        asyncio.run(scenario())
    finally:
        group.close()
