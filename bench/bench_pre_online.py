"""Pre-online figures: a returning master taking back an acting slave's tables, and the offset
diff's pre-online gate on the same data.

Runs the acting-master deployment on free loopback ports (tests/support/acting_cluster.py) and,
per --keys K:
1. broker-a's master and slave are stopped (SIGTERM) and both get the same consumerOffset.json of
   K consumer-offset keys (topic "bench", 8 queues, K/8 groups; DataVersion 0/5), as if the slave
   had synced it; they start again (metadata sync every 10 s, RocketMQ's controller-mode pace, and
   the default replication heartbeat and silence limits: the test deployment's 1 s sync and 3 s
   silence limit are made for small tables);
2. --messages NORMAL messages go to topic "plain" (broker-a only); broker-a's master is killed
   (SIGKILL); its slave acts (it opens state version 1 over the K keys) and a PushConsumer of
   group "g" (the official client) consumes and acks every message there;
3. the gate runs: ``relaymq offset-diff --gate pre-online`` over the dead master's file and the
   live slave (wall time and exit code: 0, a rejoin rolls nothing back);
4. the master's container starts again: start -> online is from the process's spawn to the log
   line of its pre-online's end (its own clock: "pre-online done after N ms" is the driver's part);
5. a fresh PushConsumer of "g" runs until --observe-s passes after one new message arrived:
   re-delivered = how many of the --messages it got again (must be 0).

    .venv/bin/python bench/bench_pre_online.py --keys 10000 1000000

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import datetime
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from metadata.consumer_offsets import ConsumerOffsetTable, OffsetKey  # noqa: E402
from metadata.data_version import DataVersion  # noqa: E402
from tests.support.acting_cluster import ActingCluster  # noqa: E402
from tests.support.failover_load import ACTING, Client, wait_started  # noqa: E402

QUEUES = 8
DONE = re.compile(r"^(\S+ \S+) INFO services\.ha\.pre_online: broker-a-0: pre-online done after (\d+) ms \((\w+)")


def offsets_file(keys: int) -> str:
    groups = max(1, keys // QUEUES)
    table = {OffsetKey("bench", f"g-{index:07d}"): {queue: (index * 7 + queue) % 1000 for queue in range(QUEUES)}
             for index in range(groups)}
    return ConsumerOffsetTable(DataVersion(0, 1_700_000_000_000, 5), table).dumps()


def client(workdir: Path, name: str, *args: str) -> Client:
    return Client(*args, log_path=workdir / f"{name}.log", script=ACTING)


def received(consumer: Client) -> list[dict]:
    return [e for e in consumer.snapshot() if e["event"] == "recv"]


def seed(cluster: ActingCluster, keys: int) -> None:
    """Both replicas of broker-a hold the same K keys, as after a metadata sync."""
    text = offsets_file(keys)
    for index in (1, 0):
        cluster.containers[index].stop()
    for directory in (cluster.containers[0].data_dir / "broker-a-0", cluster.containers[1].data_dir / "broker-a-1"):
        (directory / "config" / "consumerOffset.json").write_text(text)
    for index in (0, 1):
        cluster.containers[index].start(timeout_s=120)
    cluster.wait_for(lambda: 0 in cluster.members("broker-a") and 1 in cluster.members("broker-a"), 60, "broker-a back")


def replicated(cluster: ActingCluster) -> bool:
    """broker-a's slave acknowledged the master's whole log (what the acting slave serves)."""
    ha = (cluster.broker_status(0, "broker-a") or {}).get("ha") or {}
    return any(s["slaveId"] == 1 and s["ackOffset"] >= ha.get("maxOffset", 1) > 0 for s in ha.get("slaves", []))


def consume_on_the_acting_slave(cluster: ActingCluster, workdir: Path, endpoint: str, messages: int) -> set[str]:
    producer = client(workdir, "producer", "delay", "--endpoint", endpoint, "--topic", "plain", "--count", str(messages),
                      "--normal", "--due-from", "0", "--due-to", "0")
    producer.process.wait(120)
    sent = {e["body"] for e in producer.snapshot() if e["event"] == "sent"}
    cluster.wait_for(lambda: replicated(cluster), 120, "the messages on the slave too")
    cluster.kill(0)
    cluster.wait_for(lambda: (cluster.broker_status(1, "broker-a") or {}).get("acting"), 30, "the slave acts")
    consumer = client(workdir, "consumer-acting", "push", "--endpoint", endpoint, "--topic", "plain", "--group", "g")
    wait_started(consumer)
    cluster.wait_for(lambda: {e["body"] for e in received(consumer)} >= sent, 120, "consumed on the acting slave")
    time.sleep(2)  # the push consumer acks after its listener returns: let the last acks land
    consumer.stop()
    return sent


def gate(cluster: ActingCluster, workdir: Path) -> tuple[float, int]:
    master_file = cluster.containers[0].data_dir / "broker-a-0" / "config" / "consumerOffset.json"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "container", "offset-diff", "--quiet", "--gate", "pre-online",
                           "--snapshot", f"broker-a:0={master_file}", "--fetch-timeout-ms", "120000",
                           "--replica", f"broker-a@127.0.0.1:{cluster.containers[1].admin_port}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    (workdir / "gate.out").write_text(done.stdout + done.stderr)
    return time.monotonic() - started, done.returncode


def restart_to_online(cluster: ActingCluster) -> tuple[float, int, str]:
    log = cluster.containers[0].data_dir / "container.log"
    before = log.read_text().count("pre-online done")
    spawned = time.time()
    cluster.restart(0)
    cluster.wait_for(lambda: log.read_text().count("pre-online done") > before, 600, "pre-online done")
    line = [m for m in map(DONE.match, log.read_text().splitlines()) if m][-1]
    at = datetime.datetime.strptime(line.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return at - spawned, int(line.group(2)), line.group(3)


def redelivered(cluster: ActingCluster, workdir: Path, endpoint: str, sent: set[str], observe_s: float) -> int:
    consumer = client(workdir, "consumer-after", "push", "--endpoint", endpoint, "--topic", "plain", "--group", "g")
    wait_started(consumer)
    producer = client(workdir, "producer-after", "delay", "--endpoint", endpoint, "--topic", "plain", "--count", "1",
                      "--normal", "--prefix", "after-", "--due-from", "0", "--due-to", "0")
    producer.process.wait(60)
    cluster.wait_for(lambda: any(e["body"].startswith("after-") for e in received(consumer)), 60, "a new message consumed")
    time.sleep(observe_s)  # what must not happen: nothing to wait for
    consumer.stop()
    return sum(1 for e in received(consumer) if e["body"] in sent)


def one_run(workdir: Path, keys: int, messages: int, observe_s: float) -> dict:
    # the test deployment syncs metadata every second; a million keys want RocketMQ's pace (10 s)
    cluster = ActingCluster(workdir, broker_keys={"preOnlineSyncTimeoutMillis": 120_000, "slaveSynchronizePeriod": 10_000,
                                                  "haHousekeepingInterval": 20_000, "haSendHeartbeatInterval": 5_000}).start()
    try:
        cluster.admin("update-topic", "--topic", "plain", "--type", "NORMAL", "--queues", "2", "-b", "broker-a")
        cluster.admin("update-topic", "--topic", "bench", "--type", "NORMAL", "--queues", str(QUEUES), "-b", "broker-a")
        cluster.admin("update-group", "--group", "g")
        seed(cluster, keys)
        endpoint = f"{cluster.endpoint(0)};{cluster.endpoint(1)}"
        sent = consume_on_the_acting_slave(cluster, workdir, endpoint, messages)
        gate_s, gate_exit = gate(cluster, workdir)
        online_s, driver_ms, reason = restart_to_online(cluster)
        again = redelivered(cluster, workdir, endpoint, sent, observe_s)
        return {"keys": keys, "online_s": online_s, "driver_ms": driver_ms, "reason": reason, "redelivered": again,
                "consumed": len(sent), "gate_s": gate_s, "gate_exit": gate_exit}
    finally:
        cluster.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--messages", type=int, default=50, help="consumed on the acting slave")
    parser.add_argument("--observe-s", type=float, default=5.0, help="how long the fresh consumer watches for re-deliveries")
    parser.add_argument("--workdir", type=Path, help="keep every run's logs and stores here (default: a temporary folder)")
    args = parser.parse_args()
    if any(k < QUEUES for k in args.keys) or args.messages < 1 or args.observe_s < 0:
        parser.error(f"--keys at least {QUEUES}, --messages at least 1, --observe-s not negative")
    print(f"{'keys':>9}  {'start->online s':>15}  {'pre-online ms':>13}  {'reason':<8}  {'re-delivered':>12}  "
          f"{'gate s':>7}  {'gate exit':>9}")
    for keys in args.keys:
        if args.workdir:
            r = one_run(args.workdir / f"keys-{keys}", keys, args.messages, args.observe_s)
        else:
            with tempfile.TemporaryDirectory(prefix="bench-pre-online-") as tmp:
                r = one_run(Path(tmp), keys, args.messages, args.observe_s)
        print(f"{r['keys']:>9,}  {r['online_s']:>15.2f}  {r['driver_ms']:>13,}  {r['reason']:<8}  "
              f"{r['redelivered']:>5} of {r['consumed']:<4}  {r['gate_s']:>7.1f}  {r['gate_exit']:>9}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
