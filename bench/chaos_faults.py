"""The faults bench/chaos.py injects into a ControllerModeCluster, one per round.

Each fault is a pair: ``inject(cluster)`` returns what it did (for the timeline) and a heal
function.  Faults are named by what they hit at the moment they are injected: the container
holding broker-a's master or its slave (with two containers, that container may host
broker-b's master too), the controller leader (three standalone controllers), both at once;
SIGKILL (heal: restart) or SIGSTOP (heal: SIGCONT); a full disk (the container's stores sit
on a small filesystem; a filler file takes the rest; heal: delete it).  With the sandbox of
bench/chaos_env.py (root): a network partition of the container (its link down; heal: up)
and a slow disk (a blkio throttle of ``SLOW_DISK_WRITE_IOPS`` on its filesystem's device for
its process; heal: lifted).
"""
from __future__ import annotations

import asyncio
import signal

from services.controller.client import ControllerClient, ControllerClientError

KINDS = ("kill-master", "kill-slave", "kill-controller-leader", "kill-master-and-controller-leader",
         "stop-master", "stop-slave", "stop-controller-leader", "disk-full", "partition-master", "partition-slave",
         "slow-disk-master", "slow-disk-slave")
SANDBOX_KINDS = ("disk-full", "partition-master", "partition-slave", "slow-disk-master", "slow-disk-slave")
HOLD_S = {"stop": 3.0, "kill": 1.0, "disk": 4.0, "partition": 4.0, "slow": 4.0}
SLOW_DISK_WRITE_IOPS = 10   # with ext4's journal, an fdatasync of appended data takes ~2-3 writes


def controller_leader(cluster) -> int | None:
    """Index of the controller member that leads now (None: no leader answers)."""
    async def ask():
        client = ControllerClient(cluster.controller_addr.split(";"), call_timeout_s=1, attempts=3, deadline_s=3)
        try:
            return (await client.metadata()).leader_address
        finally:
            await client.close()
    try:
        leader = asyncio.run(ask())
    except (ControllerClientError, Exception):  # noqa: BLE001 - no leader now
        return None
    for index, port in enumerate(cluster.controller_ports):
        if leader and leader.endswith(f":{port}"):
            return index
    return None


def _kill_controller(cluster, index: int):
    process = cluster.controller_processes[index]
    process.kill()
    process.wait()

    def heal():
        cluster.controller_processes[index] = cluster.start_controller(index)
    return heal


def _stop_controller(cluster, index: int):
    process = cluster.controller_processes[index]
    process.send_signal(signal.SIGSTOP)
    return lambda: process.send_signal(signal.SIGCONT)


def _kill_container(cluster, index: int):
    cluster.kill(index)
    return lambda: cluster.restart_container(index)


def _stop_container(cluster, index: int):
    cluster.pause(index)
    return lambda: cluster.resume(index)


def _fill_disk(cluster, index: int):
    mount = cluster.containers[index].data_dir
    filler = mount / "filler"
    with open(filler, "wb") as out:
        chunk = b"\0" * (1 << 20)
        try:
            while True:
                out.write(chunk)
                out.flush()
        except OSError:
            pass
    return lambda: filler.unlink(missing_ok=True)


def _partition(cluster, index: int):
    cluster.network.partition(index)
    return lambda: cluster.network.heal_partition(index)


def _slow_disk(cluster, index: int):
    cluster.network.slow_disk(index, cluster.containers[index].process.pid, SLOW_DISK_WRITE_IOPS)
    return lambda: cluster.network.heal_slow_disk(index)


def inject(cluster, kind: str, broker: str = "broker-a") -> tuple[str, object]:
    """Inject ``kind``; returns (what was hit, heal)."""
    master = cluster.master_container(broker)
    master = 0 if master is None else master
    slave = 1 - master
    if kind == "kill-master":
        return f"container {master + 1} (master of {broker})", _kill_container(cluster, master)
    if kind == "kill-slave":
        return f"container {slave + 1} (slave of {broker})", _kill_container(cluster, slave)
    if kind == "stop-master":
        return f"container {master + 1} (master of {broker})", _stop_container(cluster, master)
    if kind == "stop-slave":
        return f"container {slave + 1} (slave of {broker})", _stop_container(cluster, slave)
    if kind == "disk-full":
        return f"container {master + 1} disk (master of {broker})", _fill_disk(cluster, master)
    if kind.startswith("partition-") or kind.startswith("slow-disk-"):
        index = master if kind.endswith("-master") else slave
        role = "master" if index == master else "slave"
        if kind.startswith("partition-"):
            return f"container {index + 1} network (holds the {role} of {broker})", _partition(cluster, index)
        return f"container {index + 1} disk slowed (holds the {role} of {broker})", _slow_disk(cluster, index)
    leader = controller_leader(cluster)
    leader = 0 if leader is None else leader
    if kind == "kill-controller-leader":
        return f"controller n{leader}", _kill_controller(cluster, leader)
    if kind == "stop-controller-leader":
        return f"controller n{leader}", _stop_controller(cluster, leader)
    assert kind == "kill-master-and-controller-leader", kind
    heal_controller = _kill_controller(cluster, leader)
    heal_container = _kill_container(cluster, master)

    def heal():
        heal_controller()
        heal_container()
    return f"container {master + 1} (master of {broker}) and controller n{leader}", heal
