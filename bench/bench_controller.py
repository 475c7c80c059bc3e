"""Controller figures: leader failover, committed operations per second, electMaster latency.

Runs three real ``relaymq controller`` processes on 127.0.0.1 (free ports, default timing:
tick 100 ms, heartbeat every 2 ticks, maxHeartBeatLeak 3, jitter 4 ticks; fsync on every
Raft write) and prints:
- failover: from SIGKILL of the leader to the first write committed by the new leader
  (p50/p99 over --runs runs; the killed member is restarted between runs);
- ops/s: ApplyBrokerId writes with --concurrency callers for --seconds;
- electMaster latency: admin-designated elections alternating between two alive brokers.

    .venv/bin/python bench/bench_controller.py --runs 20 --seconds 5 --elections 50
    # stability: elections under 10 minutes of saturating, then of paced ("normal") load
    .venv/bin/python bench/bench_controller.py --runs 1 --seconds 600 --elections 10 --workdir DIR --log-level INFO
    .venv/bin/python bench/bench_controller.py --runs 1 --seconds 600 --elections 10 --rate 50
The saturating load registers a new broker set per call, so the tables (and snapshots)
grow without bound: about 200k sets after 10 minutes.  With --log-level INFO the member
logs in --workdir show role changes, loop stalls, slow GCs and snapshot timings.
Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proto import controller_pb2 as pb  # noqa: E402
from services.controller.client import ControllerClient  # noqa: E402

Code = pb.ControllerStatus


from tests.support.container_process import free_ports  # noqa: E402


class Cluster:
    def __init__(self, workdir: Path, log_level: str = "WARNING") -> None:
        self.log_level = log_level
        self.addresses = [f"127.0.0.1:{p}" for p in free_ports(3)]
        peers = ";".join(f"n{i}-{a}" for i, a in enumerate(self.addresses))
        self.files = []
        for i in range(3):
            path = workdir / f"n{i}.toml"
            path.write_text(f'controllerDLegerPeers = "{peers}"\ncontrollerDLegerSelfId = "n{i}"\n'
                            f'controllerStorePath = "{workdir / f"data-n{i}"}"\n')
            self.files.append(path)
        self.logs = [open(workdir / f"n{i}.log", "ab") for i in range(3)]
        self.procs: list[subprocess.Popen | None] = [None] * 3

    def start(self, i: int) -> None:
        self.procs[i] = subprocess.Popen([sys.executable, "-m", "container", "controller", "-c", str(self.files[i]),
                                          "--log-level", self.log_level], cwd=ROOT, stdout=self.logs[i],
                                         stderr=subprocess.STDOUT)

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)
        self.procs[i] = None

    def close(self) -> None:
        for i in range(3):
            self.kill(i)


async def leader_index(cluster: Cluster, timeout_s: float = 20.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for i, address in enumerate(cluster.addresses):
            if cluster.procs[i] is None:
                continue
            client = ControllerClient([address], call_timeout_s=0.3, attempts=1)
            try:
                meta = await client.metadata()
                if meta.is_leader:
                    return i
            except Exception:
                pass
            finally:
                await client.close()
        await asyncio.sleep(0.05)
    raise RuntimeError("no leader")


async def current_term(cluster: Cluster) -> int:
    client = ControllerClient(cluster.addresses)
    try:
        return (await client.metadata()).term
    finally:
        await client.close()


def apply_request(name: str) -> pb.ApplyBrokerIdRequest:
    return pb.ApplyBrokerIdRequest(cluster_name="bench", broker_name=name, applied_broker_id=1,
                                   register_check_code=f"{name}:1;1")


async def failover_once(cluster: Cluster, run: int) -> float:
    leader = await leader_index(cluster)
    survivors = [cluster.addresses[i] for i in range(3) if i != leader]
    client = ControllerClient(survivors, call_timeout_s=0.25, attempts=10_000, deadline_s=30.0, retry_pause_s=0.01)
    cluster.kill(leader)
    killed_at = time.monotonic()
    reply = await client.call("ApplyBrokerId", apply_request(f"failover-{run}"))
    elapsed = time.monotonic() - killed_at
    await client.close()
    if reply.status.code != Code.SUCCESS:
        for address in survivors:
            probe = ControllerClient([address], attempts=1)
            meta = await probe.metadata()
            print(f"  stuck: {address} {meta.self_id} term {meta.term} commit {meta.commit_index} "
                  f"leader {meta.leader_id} is_leader {meta.is_leader}", flush=True)
            await probe.close()
        raise RuntimeError(f"run {run}: no write committed after kill -9 of n{leader}: {reply.status.remark}")
    cluster.start(leader)
    return elapsed


async def ops_per_second(cluster: Cluster, seconds: float, concurrency: int, rate: float = 0.0) -> float:
    """Committed ApplyBrokerId calls per second; ``rate`` > 0 paces all callers to that many calls/s."""
    client = ControllerClient(cluster.addresses)
    done = 0
    started = time.monotonic()
    end = started + seconds
    issued = 0

    async def pace() -> None:
        nonlocal issued
        issued += 1
        delay = started + issued / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    async def caller(worker: int) -> None:
        nonlocal done
        n = 0
        while time.monotonic() < end:
            if rate > 0:
                await pace()
            reply = await client.call("ApplyBrokerId", apply_request(f"ops-{worker}-{n}"))
            n += 1
            if reply.status.code == Code.SUCCESS:
                done += 1
    await asyncio.gather(*(caller(w) for w in range(concurrency)))
    rate = done / (time.monotonic() - started)
    await client.close()
    return rate


async def elect_latencies(cluster: Cluster, count: int) -> list[float]:
    client = ControllerClient(cluster.addresses)
    for broker_id in (1, 2):
        await client.call("ApplyBrokerId", pb.ApplyBrokerIdRequest(
            cluster_name="bench", broker_name="elect-set", applied_broker_id=broker_id,
            register_check_code=f"h:{broker_id};1"))
    latencies = []
    for n in range(count):
        for broker_id in (1, 2):  # alive on the leader: heartbeat before each election
            await client.call("BrokerHeartbeat", pb.BrokerHeartbeatRequest(
                cluster_name="bench", broker_name="elect-set", broker_id=broker_id, broker_address=f"h:{broker_id}"))
        started = time.monotonic()
        reply = await client.call("ElectMaster", pb.ElectMasterRequest(
            cluster_name="bench", broker_name="elect-set", broker_id=1 + n % 2, designate_elect=True))
        latencies.append(time.monotonic() - started)
        assert reply.status.code == Code.SUCCESS, reply.status.remark
        view = reply.view  # the next designated broker must be in the SyncStateSet
        altered = await client.call("AlterSyncStateSet", pb.AlterSyncStateSetRequest(
            broker_name="elect-set", master_broker_id=view.master_broker_id, master_epoch=view.master_epoch,
            new_sync_state_set=[1, 2], sync_state_set_epoch=view.sync_state_set_epoch))
        assert altered.status.code == Code.SUCCESS, altered.status.remark
    await client.close()
    return latencies


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


async def main(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(Path(args.workdir) if args.workdir else Path(tmp), args.log_level)
        try:
            for i in range(3):
                cluster.start(i)
            await leader_index(cluster)
            failovers = []
            for run in range(args.runs):
                failovers.append(await failover_once(cluster, run))
                print(f"  failover run {run}: {failovers[-1] * 1000:.0f} ms", flush=True)
                await asyncio.sleep(args.settle_s)  # let the restarted member rejoin before the next kill
            await asyncio.sleep(args.settle_s)
            term_before = await current_term(cluster)
            rate = await ops_per_second(cluster, args.seconds, args.concurrency, args.rate)
            elect = await elect_latencies(cluster, args.elections)
            term_after = await current_term(cluster)
        finally:
            cluster.close()
    print(f"controller bench: 3 processes on 127.0.0.1, default timing, fsync on; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cpus")
    print(f"failover (kill -9 leader -> first committed write), {len(failovers)} runs: "
          f"p50 {statistics.median(failovers) * 1000:.0f} ms, p99 {percentile(failovers, 99) * 1000:.0f} ms, "
          f"max {max(failovers) * 1000:.0f} ms")
    load = f"paced to {args.rate:g} calls/s" if args.rate > 0 else "saturating"
    print(f"committed ApplyBrokerId ops/s ({args.concurrency} callers, {load}, {args.seconds:.0f} s): {rate:.0f}")
    print(f"leader elections during the load phases (term {term_before} -> {term_after}): "
          f"{term_after - term_before}")
    print(f"electMaster latency, {len(elect)} elections: p50 {statistics.median(elect) * 1000:.1f} ms, "
          f"p99 {percentile(elect, 99) * 1000:.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="failover runs")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of the ops/s phase")
    parser.add_argument("--concurrency", type=int, default=64, help="concurrent callers in the ops/s phase")
    parser.add_argument("--elections", type=int, default=200, help="electMaster calls to time")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="pace the ops/s phase to this many calls/s in all ('normal' load); 0 = saturate")
    parser.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING"),
                        help="log level of the controller processes (their logs are in --workdir)")
    parser.add_argument("--workdir", default="", help="keep configs, data and logs here")
    parser.add_argument("--settle-s", type=float, default=2.0, help="pause after restarting a killed member")
    asyncio.run(main(parser.parse_args()))
