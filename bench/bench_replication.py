"""Replication figures (issue 5): loopback copy, slave catch-up, steady replication, SYNC vs ASYNC.

In one run, with real container processes on 127.0.0.1 (a master container with an embedded
nameserver, a slave container pointed at it with ``haMasterAddress``):

(a) loopback: a plain copy of the catch-up's byte count from a file, over a loopback TCP
    socket (``socket.sendfile``), into a file in another process, fdatasynced at the end: MiB/s
    (the ratio of (b) is to this figure, since a SYNC_FLUSH slave acks only what is fdatasynced;
    the figure up to the last write, before the fdatasync, is printed too);
(b) catch-up: a master whose store was filled offline (``MessageStore.put``, batches of
    ``maxBatchPut``) with ~N MiB of 1 KiB messages, and an empty slave container started
    against it: seconds from the slave's "container ready" until the master reports the
    slave's acked offset equal to its max offset; MiB/s, msgs/s and the ratio to (a);
    the copy is then compared byte for byte with the master's commit log;
(c) steady: 1 KiB messages sent to that master (batches of 32, 16 in flight, counter ids)
    for --seconds: bytes and messages from the first send until the slave's ack reaches the last
    one (the one client process may be what limits it: compare with "sends alone");
(d) SYNC_MASTER vs ASYNC_MASTER, each a fresh master + slave pair: 1 KiB sends with 16 and 64
    in flight, and batches of 32 with 16 in flight: msgs/s, p50, p99, and SYNC/ASYNC.

Both brokers use --flush (default SYNC_FLUSH, as conf/2container).  The disk is synced
(``os.sync``) before (a) and (b) are timed, so neither competes with the writeback of the
files it starts from.  The machine has 2 cores shared with others: the load average is
printed before and after each phase.

    .venv/bin/python bench/bench_replication.py                                  # 1 GiB, 5 s cases
    .venv/bin/python bench/bench_replication.py --catch-up-mib 256 --seconds 3   # quick
    .venv/bin/python bench/bench_replication.py --profile /tmp/prof              # py-spy both sides of (b)
--profile samples both containers (py-spy, 200 Hz), which slows them: take figures without it
(BENCH_PY_SPY_NATIVE=1 adds C frames).  It prints the top functions of each profile.
Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from bench.bench_broker import META, closed_loop, message  # noqa: E402
from proto import admin_pb2 as apb  # noqa: E402
from proto import messaging_definition_pb2 as d  # noqa: E402
from proto import messaging_service_pb2 as s  # noqa: E402
from proto import messaging_service_pb2_grpc as g  # noqa: E402
from services.admin.client import AdminClient  # noqa: E402
from tests.support.container_process import ContainerProcess  # noqa: E402

MIB = 1 << 20
NATIVE = ["--native"] if os.environ.get("BENCH_PY_SPY_NATIVE") else []
BODY_BYTES = 1024
BROKER = "broker-a"
COPY_RECEIVER = """
import os, socket, sys
listener = socket.create_server(("127.0.0.1", 0))
print("READY", listener.getsockname()[1], flush=True)
connection, _ = listener.accept()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
buf = bytearray(1 << 20)
view = memoryview(buf)
while True:
    n = connection.recv_into(buf)
    if not n:
        break
    os.write(fd, view[:n])
connection.sendall(b"w")
os.fdatasync(fd)
os.close(fd)
connection.sendall(b"s")
"""


def load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


# --- (a) loopback copy ----------------------------------------------------------------------------
def loopback_copy(nbytes: int, tmp: Path) -> dict:
    source = tmp / "copy-source"
    with open(source, "wb") as out:
        block = os.urandom(MIB)
        for _ in range(nbytes // MIB):
            out.write(block)
    os.sync()  # the copy does not compete with the source's writeback (the catch-up is timed the same way)
    receiver = subprocess.Popen([sys.executable, "-c", COPY_RECEIVER, str(tmp / "copy-target")],
                                stdout=subprocess.PIPE)
    try:
        port = int(receiver.stdout.readline().split()[1])
        began = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port)) as sock, open(source, "rb") as data:
            sock.sendfile(data)
            sock.shutdown(socket.SHUT_WR)
            sock.recv(1)
            written = time.perf_counter() - began
            sock.recv(1)
        elapsed = time.perf_counter() - began
    finally:
        receiver.wait(30)
    source.unlink()
    (tmp / "copy-target").unlink()
    return {"bytes": nbytes, "seconds": elapsed, "mib_s": nbytes / MIB / elapsed,
            "written_s": written, "written_mib_s": nbytes / MIB / written}


# --- containers -----------------------------------------------------------------------------------
def group_entry(role: str, flush: str, broker_id: int, extra: dict) -> dict:
    return {"brokerName": BROKER, "brokerId": broker_id, "brokerRole": role, "flushDiskType": flush,
            "totalReplicas": 2, "inSyncReplicas": 2 if role == "SYNC_MASTER" else 1, "minInSyncReplicas": 1,
            "haSendHeartbeatInterval": 1000, **extra}


def make_pair(root: Path, role: str, flush: str, extra: dict) -> tuple[ContainerProcess, ContainerProcess]:
    master = ContainerProcess(root / "master", brokers=[group_entry(role, flush, 0, extra)])
    slave_entry = {**group_entry("SLAVE", flush, 1, extra), "haMasterAddress": f"127.0.0.1:{master.admin_port}"}
    slave = ContainerProcess(root / "slave", brokers=[slave_entry], embedded_namesrv=False,
                             namesrv_port=master.namesrv_port)
    return master, slave


async def ha_status(master: ContainerProcess) -> dict:
    client = AdminClient(f"127.0.0.1:{master.admin_port}", 5000)
    try:
        reply = await client.call("BrokerStatus", apb.AdminBrokerStatusRequest(broker_name=BROKER))
    finally:
        await client.close()
    return json.loads(reply.brokers[0].status_json)["ha"]


async def wait_acked(master: ContainerProcess, target: int | None, timeout_s: float, in_set: bool = False) -> dict:
    """Poll the master until its slave acked ``target`` (None: its max offset); returns the status."""
    deadline = time.perf_counter() + timeout_s
    while True:
        status = await ha_status(master)
        slaves = status["slaves"]
        want = status["maxOffset"] if target is None else target
        if slaves and slaves[0]["ackOffset"] >= want and (not in_set or slaves[0]["inSyncStateSet"]):
            return status
        if time.perf_counter() > deadline:
            raise RuntimeError(f"slave did not ack {want} in {timeout_s}s: {status}")
        await asyncio.sleep(0.05)  # each poll costs the master a status document


def create_topic(container: ContainerProcess, topic: str) -> None:
    deadline = time.monotonic() + 30
    while True:  # the broker registers at the nameserver shortly after start
        done = container.admin("update-topic", "--topic", topic, "--type", "NORMAL", "--queues", "8",
                               "--namesrv", container.namesrv)
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"update-topic failed: {done.stderr[-500:]}")
        time.sleep(0.2)


# --- (b) catch-up ---------------------------------------------------------------------------------
def fill_store(path: Path, nbytes: int) -> dict:
    """Offline: ~``nbytes`` of 1 KiB messages in 8 queues, through MessageStore.put, with the
    system properties a client send gets (message id, tag, message type)."""
    from metadata.message import MessageDraft, Prop
    from scheduler.clock import SystemClock
    from store.config import FlushDiskType, StoreConfig
    from store.message_store import MessageStore

    store = MessageStore(StoreConfig(path, flush_disk_type=FlushDiskType.ASYNC_FLUSH), SystemClock().now_ms)
    store.start()
    body, now, count = b"x" * BODY_BYTES, int(time.time() * 1000), 0
    began = time.perf_counter()

    async def fill():
        nonlocal count
        while store.commit_log_max_offset < nbytes:
            drafts = [MessageDraft("bench-catch-up", (count + i) % 8, body, now, "127.0.0.1:1",
                                   {Prop.MESSAGE_ID: f"{count + i:032X}", Prop.TAG: "TagA",
                                    Prop.MESSAGE_TYPE: "NORMAL"}, {})
                      for i in range(store.config.max_batch_put)]
            await store.put(drafts)
            count += len(drafts)

    asyncio.run(fill())
    max_offset = store.commit_log_max_offset
    store.shutdown()
    os.sync()  # the catch-up does not compete with the fill's writeback (nor does the loopback copy)
    return {"messages": count, "bytes": max_offset, "fill_s": time.perf_counter() - began}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads) so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, tuple[float, float]]:
    """Per thread (by name, same names summed): (user, system) CPU seconds so far, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[str, tuple[float, float]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended
        user, system = found.get(name, (0.0, 0.0))
        found[name] = (user + int(fields[11]) / tick, system + int(fields[12]) / tick)
    return found


def cpu_split(before: dict, after: dict) -> str:
    rows = []
    for name, (user, system) in after.items():
        user0, system0 = before.get(name, (0.0, 0.0))
        if user - user0 + system - system0 >= 0.05:
            rows.append((user - user0 + system - system0, f"{name} {user - user0:.1f}u+{system - system0:.1f}s"))
    return ", ".join(text for _, text in sorted(rows, reverse=True))


def py_spy(pid: int, out: Path) -> subprocess.Popen:
    """Sample ``pid`` until SIGINT; collapsed stacks (``--format raw``) into ``out``."""
    tool = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen([tool, "record", "--pid", str(pid), "--rate", "200", "--format", "raw", *NATIVE,
                             "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


_ENTRY_FILES = ("<frozen runpy>", "__main__.py", "cli.py", "cli_container.py", "runners.py", "__init__.py", "threading.py")


def _frame_name(frame: str) -> str:
    """``name (path/file.py:line)`` -> ``name (file.py)``."""
    name, _, where = frame.strip().partition(" (")
    return f"{name} ({where.rstrip(')').rsplit('/', 1)[-1].split(':')[0]})"


def profile_summary(path: Path, top: int = 10) -> str:
    """The functions with the most samples of a py-spy raw profile: own (self) and with callees
    (inclusive, entry points such as the event loop's run left out)."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = [_frame_name(frame) for frame in stack.split(";")]
        total += int(count)
        own[frames[-1]] = own.get(frames[-1], 0) + int(count)
        for frame in set(frames):
            if frame.rsplit(" (", 1)[-1].rstrip(")") not in _ENTRY_FILES:
                inclusive[frame] = inclusive.get(frame, 0) + int(count)
    lines = [f"{path.stem}: {total} samples (all threads; idle waits included)"]
    for title, table in (("self", own), ("inclusive", inclusive)):
        best = sorted(table.items(), key=lambda item: -item[1])[:top]
        lines.append(f"  {title}: " + ", ".join(f"{name} {100 * n / max(total, 1):.1f}%" for name, n in best))
    return "\n".join(lines)


def catch_up(master: ContainerProcess, slave: ContainerProcess, args, filled: dict) -> dict:
    master.start(timeout_s=120)
    spawned = time.perf_counter()
    slave.start(timeout_s=60)
    ready = time.perf_counter()
    pids = {"master": master.process.pid, "slave": slave.process.pid}
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    threads_before = {name: thread_cpu(pid) for name, pid in pids.items()}
    spies = []
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        spies = [py_spy(p.process.pid, args.profile / f"{name}.txt")
                 for name, p in (("master", master), ("slave", slave))]
    status = asyncio.run(wait_acked(master, filled["bytes"], timeout_s=3600))
    done = time.perf_counter()
    cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
    threads = {name: cpu_split(threads_before[name], thread_cpu(pid)) for name, pid in pids.items()}
    for spy in spies:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
    seconds = done - ready
    figures = {"seconds": seconds, "from_spawn_s": done - spawned, "bytes": status["maxOffset"],
               "mib_s": filled["bytes"] / MIB / seconds, "msgs_s": filled["messages"] / seconds,
               "master_cpu_s": cpu["master"], "slave_cpu_s": cpu["slave"], "threads": threads}
    if args.verify:
        figures["identical"] = same_commit_log(master.data_dir / f"{BROKER}-0", slave.data_dir / f"{BROKER}-1")
    return figures


def same_commit_log(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in (a / "commitlog").iterdir())
    if names != sorted(p.name for p in (b / "commitlog").iterdir()):
        return False
    for name in names:
        with open(a / "commitlog" / name, "rb") as left, open(b / "commitlog" / name, "rb") as right:
            while True:
                x, y = left.read(8 * MIB), right.read(8 * MIB)
                if x != y:
                    return False
                if not x:
                    break
    return True


# --- (c) steady replication and (d) sends ---------------------------------------------------------
async def steady(master: ContainerProcess, topic: str, seconds: float) -> dict:
    before = (await ha_status(master))["maxOffset"]
    async with grpc.aio.insecure_channel(master.endpoint) as channel:
        stub = g.MessagingServiceStub(channel)

        ids = iter(range(1 << 62))
        template = message(topic)

        def fresh() -> d.Message:  # a copy with a counter id: cheaper than a uuid per message
            copy = d.Message()
            copy.CopyFrom(template)
            copy.system_properties.message_id = f"{os.getpid():08X}{next(ids):024X}"
            return copy

        async def send_batch():
            response = await stub.SendMessage(s.SendMessageRequest(messages=[fresh() for _ in range(32)]), metadata=META)
            assert response.status.code == d.OK, response.status

        began = time.perf_counter()
        sent = await closed_loop(send_batch, 16, seconds, per_request=32)
    status = await wait_acked(master, None, timeout_s=600)
    elapsed = time.perf_counter() - began
    moved = status["maxOffset"] - before
    messages = sent["requests"] * 32
    return {"seconds": elapsed, "mib_s": moved / MIB / elapsed, "msgs_s": messages / elapsed,
            "send_msgs_s": sent["msg_s"], "messages": messages}


async def send_cases(endpoint: str, topic: str, seconds: float, master: ContainerProcess) -> dict:
    results = {}
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = g.MessagingServiceStub(channel)

        async def send(count: int) -> None:
            response = await stub.SendMessage(s.SendMessageRequest(messages=[message(topic) for _ in range(count)]),
                                              metadata=META)
            assert response.status.code == d.OK, response.status

        await send(1)  # warm-up: then wait until the slave acked it (it is in the SyncStateSet from its first ack)
        await wait_acked(master, None, timeout_s=60, in_set=True)

        for concurrency in (16, 64):
            results[f"send c={concurrency}"] = await closed_loop(lambda: send(1), concurrency, seconds)
        results["batch32 c=16"] = await closed_loop(lambda: send(32), 16, seconds, per_request=32)
    return results


def role_cases(root: Path, role: str, args) -> dict:
    master, slave = make_pair(root / role, role, args.flush, args.extra)
    try:
        master.start()
        slave.start()
        asyncio.run(wait_acked(master, 0, timeout_s=60))
        create_topic(master, "bench-send")
        return asyncio.run(send_cases(master.endpoint, "bench-send", args.seconds, master))
    finally:
        slave.kill()
        master.kill()
        shutil.rmtree(root / role, ignore_errors=True)


# --- report ---------------------------------------------------------------------------------------
def report_sends(results: dict) -> None:
    print(f"{'case':<14}{'ASYNC msg/s':>12}{'p50':>8}{'p99':>8}{'SYNC msg/s':>12}{'p50':>8}{'p99':>8}{'SYNC/ASYNC':>12}")
    sync, async_ = results["SYNC_MASTER"], results["ASYNC_MASTER"]
    for case in async_:
        a, b = async_[case], sync[case]
        print(f"{case:<14}{a['msg_s']:>12.0f}{a['p50_ms']:>8.2f}{a['p99_ms']:>8.2f}"
              f"{b['msg_s']:>12.0f}{b['p50_ms']:>8.2f}{b['p99_ms']:>8.2f}{b['msg_s'] / a['msg_s']:>12.2f}")
    print("(latencies in ms)")


def run(args, tmp: Path) -> None:
    copy = {"mib_s": float("nan"), "written_mib_s": float("nan")}
    if "a" in args.phases:
        print(f"== (a) loopback copy of {args.catch_up_mib} MiB (sendfile -> recv_into/write, fdatasync)   {load()}")
        copy = loopback_copy(args.catch_up_mib * MIB, tmp)
        print(f"loopback: {copy['mib_s']:.0f} MiB/s fdatasynced ({copy['seconds']:.2f} s); "
              f"{copy['written_mib_s']:.0f} MiB/s written before the fdatasync ({copy['written_s']:.2f} s)")
    if "b" in args.phases or "c" in args.phases:
        catch_up_and_steady(args, tmp, copy)
    if "d" in args.phases:
        print(f"\n== (d) sends under ASYNC_MASTER vs SYNC_MASTER (slave connected, {args.flush}), "
              f"{args.seconds} s per case   {load()}")
        results = {role: role_cases(tmp, role, args) for role in ("ASYNC_MASTER", "SYNC_MASTER")}
        report_sends(results)
        print(load())


def catch_up_and_steady(args, tmp: Path, copy: dict) -> None:
    nbytes = args.catch_up_mib * MIB if "b" in args.phases else 0
    print(f"\n== (b) catch-up of an empty slave, {nbytes // MIB} MiB of 1 KiB messages   {load()}")
    master, slave = make_pair(tmp / "catch-up", "ASYNC_MASTER", args.flush, args.extra)
    filled = fill_store(master.data_dir / f"{BROKER}-0", nbytes)
    print(f"filled offline: {filled['messages']} messages, {filled['bytes'] / MIB:.0f} MiB in {filled['fill_s']:.1f} s")
    try:
        figures = catch_up(master, slave, args, filled)
        print(f"catch-up: {figures['seconds']:.2f} s from slave ready ({figures['from_spawn_s']:.2f} s from spawn): "
              f"{figures['mib_s']:.0f} MiB/s, {figures['msgs_s']:.0f} msgs/s, "
              f"ratio to the loopback copy {figures['mib_s'] / copy['mib_s']:.2f} "
              f"(to its unsynced write {figures['mib_s'] / copy['written_mib_s']:.2f}); "
              f"byte-identical: {figures.get('identical', 'not checked')}   {load()}")
        print(f"CPU used meanwhile: slave {figures['slave_cpu_s']:.1f} s ({figures['bytes'] / MIB / figures['slave_cpu_s']:.0f} "
              f"MiB per slave CPU-second), master {figures['master_cpu_s']:.1f} s")
        for name in ("slave", "master"):
            print(f"  {name} threads (user+system s): {figures['threads'][name]}")
        if args.profile:
            for name in ("slave", "master"):
                print(profile_summary(args.profile / f"{name}.txt"))
        if "c" in args.phases:
            create_topic(master, "bench-steady")
            print(f"\n== (c) steady replication: batches of 32 x 1 KiB, 16 in flight, {args.seconds} s   {load()}")
            flow = asyncio.run(steady(master, "bench-steady", args.seconds))
            print(f"steady: {flow['mib_s']:.1f} MiB/s, {flow['msgs_s']:.0f} msgs/s replicated (acked) over "
                  f"{flow['seconds']:.2f} s; sends alone {flow['send_msgs_s']:.0f} msgs/s   {load()}")
    finally:
        slave.kill()
        master.kill()
        shutil.rmtree(tmp / "catch-up", ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--catch-up-mib", type=int, default=1024, help="master's log size for (a) and (b)")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of (c) and of each case of (d)")
    parser.add_argument("--flush", choices=["SYNC_FLUSH", "ASYNC_FLUSH"], default="SYNC_FLUSH")
    parser.add_argument("--batch-size", type=int, default=0, help="haTransferBatchSize (0: the broker's default)")
    parser.add_argument("--profile", type=Path, help="py-spy both containers during (b), raw stacks into this folder")
    parser.add_argument("--no-verify", dest="verify", action="store_false", help="skip the byte comparison of (b)")
    parser.add_argument("--phases", default="abcd", help="which of (a) loopback (b) catch-up (c) steady (d) sends")
    parser.add_argument("--tmp", type=Path, help="work folder (default: a temporary folder)")
    args = parser.parse_args()
    args.extra = {"haTransferBatchSize": args.batch_size} if args.batch_size else {}
    print(f"python {sys.version.split()[0]}, grpcio {grpc.__version__}, {os.cpu_count()} cpus, {load()}; "
          f"1 KiB bodies, flushDiskType {args.flush}, haTransferBatchSize {args.batch_size or 'default'}, "
          f"master and slave are separate container processes on 127.0.0.1")
    if args.tmp:
        args.tmp.mkdir(parents=True, exist_ok=True)
        run(args, Path(tempfile.mkdtemp(dir=args.tmp)))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            run(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
