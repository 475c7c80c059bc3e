"""Moving a broker to another container without copying its data, against rebuilding a replica
by copying it (issue 26's figures; design: docs/reassign.md).

For each store size (``--sizes 100M,1G,10G``: MiB and GiB) and each way of moving (``--via
containers``, ``cli`` or both, comma-separated: one row each, each on its own deployment and
its own store; bench/reassign_vias.py), in one run:

1. fill: broker-a's store on "shared storage" (a directory both containers reach) is filled
   offline as its source container would have written it: claimed for that container's client
   endpoint at ownership epoch 1 (its bytes start at 0), then ``MessageStore.put`` of
   ``--body-kib`` messages in 8 queues of one topic (ASYNC_FLUSH, batches of up to 8 MiB),
   closed cleanly, then ``os.sync`` so that nothing after competes with its writeback;
2. copy (the reference, since this VM's speed moves 2x between minutes; once per size, on the
   first via's store): ``cp -a`` of the store directory on the same disk, then fdatasync of
   every copied file; the copy is deleted;
3. the deployment starts: via ``containers`` a standalone nameserver and two container
   processes (tests/support/container_process.py), container-1 (the source) serving broker-a
   (``sharedStorage``, SYNC_FLUSH), container-2 (the target) a spare broker; via ``cli`` the
   deployment of conf/reassign from its shipped files (tests/support/reassign_cluster.py: a
   nameserver with the embedded controller, container-1 serving broker-a, container-2 idle).
   Catch-up (issue 5; once per size, on the first via's deployment): a third container with
   an empty broker-a slave (SYNC_FLUSH) joins the source and replicates until the master
   reports the slave's acked offset at its max offset: seconds from the slave's "container
   ready"; the slave is stopped then.  (It is done before the move: a slave of the moved
   broker does not get past the hole the takeover leaves in the old segment.)
4. move: the official Python client (tests/support/official_client/steady.py, default
   settings) sends 1 KiB messages at ``--rate`` per second to a topic only broker-a has,
   through the source's endpoint.  Via ``containers`` (``move_via_containers``): ``Release``
   on the source's internal port (naming the target, to which the source relays the calls
   that still reach it), then ``Open`` on the target's with the keys and the sealed end the
   source answered, as the controller's driver does.  Via ``cli`` (``move_via_cli``): the
   operator's ``relaymq admin reassign-broker --broker broker-a --to TARGET --execute
   --json``; the controller leader drives the same steps.  Figures: Release and Open
   durations (via cli: between the controller's commits of the move, OPENING and OPENED, from
   its log), the handover (Release called to Open answered), served (Release called to the
   target's first acknowledgement of a send made straight to its endpoint, sent every 10 ms
   from when Open answered; via containers only), the move (Release called, via cli the
   command started, to the official client's first acknowledged send served by the target:
   the first acknowledged send it started after Release answered, via cli after the
   controller committed OPENING, when the source no longer serves broker-a), the client's
   longest time with no acknowledged send from then to that send, and acknowledged messages
   lost (every acknowledged message is consumed from the target at the end; must be 0).  Via
   cli also the command's wall time and the controller's duration of the move (its record's
   ``sinceMs - startedMs`` at DONE).  ``tail``: the source's bytes in its last commit-log
   segment, which the target's open scans.

Goals (issue 26): a move under 1 s for any size, a gap under 0.5 s.  A client that is not
relayed reaches the target at its next route refresh (the official clients': every 30 s), so
``--after-s`` waits longer than that for the first acknowledged send on the target.

    .venv/bin/python bench/bench_reassign.py                      # 100M, 1G and 10G
    .venv/bin/python bench/bench_reassign.py --sizes 100M --via cli,containers --json
Prints how it ran (command, commit, machine), then one line per size and via.  Benchmarks print;
they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from bench.bench_broker import META, message  # noqa: E402
from bench.bench_failover import settle  # noqa: E402
from bench.bench_replication import wait_acked  # noqa: E402
from bench.reassign_vias import BROKER, RETENTION, CliRun, ContainersRun, Move  # noqa: E402
from metadata.message import MessageDraft, Prop  # noqa: E402
from proto import messaging_definition_pb2 as d  # noqa: E402
from proto import messaging_service_pb2 as s  # noqa: E402
from proto import messaging_service_pb2_grpc as g  # noqa: E402
from scheduler.clock import SystemClock  # noqa: E402
from store.config import FlushDiskType, StoreConfig  # noqa: E402
from store.message_store import MessageStore  # noqa: E402
from store.takeover import claim_if_unowned  # noqa: E402
from tests.support.container_process import ContainerProcess  # noqa: E402
from tests.support.failover_load import Client, drain, longest_gap, wait_started  # noqa: E402

MIB = 1 << 20
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
SIZE = re.compile(r"(\d+)([KMGT])(?:i?B)?", re.IGNORECASE)
MAX_SIZE = 1 << 40
TOPIC = "normal"           # the load's topic, on broker-a only
PROBE_TOPIC = "probe"      # the direct sends' topic, on broker-a only
FILL_TOPIC = "bench-fill"
FILL_QUEUES = 8
FILL_BATCH_BYTES = 8 * MIB
DISK_USE_MAX = 0.70        # the brokers delete the oldest segments above diskMaxUsedSpaceRatio (75%)
VIAS = {"containers": ContainersRun, "cli": CliRun}   # --via: the deployment, whose move() moves broker-a
Run = ContainersRun | CliRun


def parse_sizes(text: str) -> list[tuple[str, int]]:
    """``"100M,1G,10G"`` -> [(label, bytes)]; binary units (``100M`` is 100 MiB), K to T, an
    optional ``B`` or ``iB``; each at least 1 MiB, at most 1 TiB, none twice."""
    sizes = []
    for part in text.split(","):
        label = part.strip()
        match = SIZE.fullmatch(label)
        if not match:
            raise argparse.ArgumentTypeError(f"{label!r} is not a size such as 100M, 1G or 10G")
        nbytes = int(match.group(1)) * UNITS[match.group(2).upper()]
        if not MIB <= nbytes <= MAX_SIZE:
            raise argparse.ArgumentTypeError(f"{label}: a size is at least 1M and at most 1T")
        if any(nbytes == known for _, known in sizes):
            raise argparse.ArgumentTypeError(f"{label}: the same size twice")
        sizes.append((label, nbytes))
    return sizes


def parse_vias(text: str) -> list[str]:
    """``"cli,containers"`` -> ["cli", "containers"]: each of :data:`VIAS` at most once, in order."""
    vias = [part.strip() for part in text.split(",")]
    for via in vias:
        if via not in VIAS:
            raise argparse.ArgumentTypeError(f"{via!r}: a via is one of {', '.join(VIAS)}")
    if len(set(vias)) != len(vias):
        raise argparse.ArgumentTypeError(f"{text}: the same via twice")
    return vias


def how_it_ran(args) -> dict:
    def git(*command: str) -> str:
        done = subprocess.run(["git", *command], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "container", "services", "store", "ha",
                "metadata", "scheduler", "proto", "conf")
    return {"command": shlex.join([sys.executable, *sys.argv]),
            "commit": git("rev-parse", "--short", "HEAD") + (" (product files modified)" if dirty else ""),
            "machine": f"{platform.machine()}, {os.cpu_count()} cpus, {platform.platform()}, "
                       f"python {platform.python_version()}, grpcio {grpc.__version__}",
            "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "fill": f"offline MessageStore.put of {args.body_kib} KiB messages in {FILL_QUEUES} queues, up to the size, "
                    "as the source (epoch 1), ASYNC_FLUSH, closed cleanly, os.sync",
            "via": ",".join(args.via), "rate": args.rate}


# --- 1 and 2: fill, and the plain copy --------------------------------------------------------------
def fill_store(root: Path, nbytes: int, body_bytes: int, owner: str) -> dict:
    """Offline, as ``owner`` (the source container's name in the claims) would have written it:
    the empty store claimed at epoch 1 (its bytes start at 0), then ``body_bytes`` messages
    with the system properties a client's send gets, in batches while the next one stays
    within ``nbytes`` (so that the last segment is as full as the size allows: the target's
    open scans it); closed cleanly (the store's clean checkpoint), then the disk synced."""
    config = StoreConfig(root, flush_disk_type=FlushDiskType.ASYNC_FLUSH, shared_storage=True)
    assert claim_if_unowned(config, owner), f"{root} was claimed already"
    store = MessageStore(config, SystemClock().now_ms, shared=owner)
    store.start()
    body, now, count = b"x" * body_bytes, int(time.time() * 1000), 0
    batch = max(1, min(store.config.max_batch_put, FILL_BATCH_BYTES // body_bytes, nbytes // body_bytes // 8))
    began = time.perf_counter()

    async def fill() -> None:
        nonlocal count
        grown = 0  # by the last batch
        while store.commit_log_max_offset + grown <= nbytes:
            before = store.commit_log_max_offset
            drafts = [MessageDraft(FILL_TOPIC, (count + i) % FILL_QUEUES, body, now, "127.0.0.1:1",
                                   {Prop.MESSAGE_ID: f"{count + i:032X}", Prop.TAG: "TagA",
                                    Prop.MESSAGE_TYPE: "NORMAL"}, {})
                      for i in range(batch)]
            await store.put(drafts)
            count += len(drafts)
            grown = store.commit_log_max_offset - before

    try:
        asyncio.run(fill())
        written = store.commit_log_max_offset
    finally:
        store.shutdown()
    filled_s = time.perf_counter() - began
    os.sync()
    return {"messages": count, "bytes": written, "fill_s": filled_s, "fill_synced_s": time.perf_counter() - began}


def copy_store(root: Path, into: Path) -> dict:
    """``cp -a`` of the store directory, then fdatasync of every file copied; deleted after."""
    began = time.perf_counter()
    subprocess.run(["cp", "-a", str(root), str(into)], check=True)
    copied = time.perf_counter() - began
    for path in sorted(into.rglob("*")):
        if path.is_file() and not path.is_symlink():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
    synced = time.perf_counter() - began
    shutil.rmtree(into)
    return {"copy_s": copied, "copy_synced_s": synced}


# --- 3: a replica rebuilt by copying ------------------------------------------------------------------
def catch_up(cluster: Run, nbytes: int) -> dict:
    """An empty slave of broker-a (SYNC_FLUSH) joins the source and copies its whole store;
    stopped once caught up.  None when it does not catch up in time (at less than 4 MiB/s)."""
    master = SimpleNamespace(admin_port=cluster.source_admin_port)   # what wait_acked asks
    entry = {"brokerName": BROKER, "brokerId": 1, "brokerRole": "SLAVE", "flushDiskType": "SYNC_FLUSH",
             "totalReplicas": 2, "haMasterAddress": f"127.0.0.1:{master.admin_port}", **RETENTION}
    cluster.replica = replica = ContainerProcess(cluster.root / "replica", brokers=[entry], embedded_namesrv=False,
                                                 namesrv_port=cluster.namesrv_port)
    spawned = time.perf_counter()
    replica.start(timeout_s=60)
    ready = time.perf_counter()
    try:
        status = asyncio.run(wait_acked(master, None, timeout_s=120 + nbytes / (4 * MIB)))
    except RuntimeError as late:
        print(f"# catch-up: {late}", file=sys.stderr)
        return {"catch_up_s": None, "catch_up_from_spawn_s": None}
    done = time.perf_counter()
    replica.stop()
    shutil.rmtree(replica.data_dir, ignore_errors=True)
    return {"catch_up_s": round(done - ready, 3), "catch_up_from_spawn_s": round(done - spawned, 3),
            "catch_up_bytes": status["maxOffset"] - status["minOffset"]}


# --- 4: the move --------------------------------------------------------------------------------------
def first_on_target(producer: Client, move: Move, timeout_s: float) -> float | None:
    """When the first send the client started after Release answered was acknowledged (the
    source no longer serves the broker then: the target did), or None within ``timeout_s``."""
    deadline = move.began + timeout_s
    while True:
        found = [e["t"] for e in producer.snapshot() if e["event"] == "ack" and e["sent"] >= move.released_at]
        if found:
            return min(found)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def first_served(channel: grpc.Channel, timeout_s: float = 60.0) -> float | None:
    """When the target first acknowledged a send made straight to its endpoint (sent again every
    10 ms until it is), or None within ``timeout_s``."""
    stub, deadline = g.MessagingServiceStub(channel), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            response = stub.SendMessage(s.SendMessageRequest(messages=[message(PROBE_TOPIC)]), metadata=META,
                                        timeout=5)
            if response.status.code == d.OK:
                return time.monotonic()
        except grpc.RpcError:
            pass
        time.sleep(0.01)
    return None


def move_under_load(cluster: Run, args) -> dict:
    for topic in (TOPIC, PROBE_TOPIC):
        cluster.create_topic(topic)
    producer = cluster.client("produce", "--endpoint", cluster.source_endpoint, "--topic", TOPIC, "--rate",
                              str(args.rate), "--seconds", "3600", name="producer")
    wait_started(producer)
    settle(producer, args.before_s)
    with grpc.insecure_channel(cluster.target_endpoint) as direct:
        grpc.channel_ready_future(direct).result(timeout=10)
        move = cluster.move()
        # via cli the command returns once the target serves: a probe sent then tells nothing
        served = first_served(direct) if cluster.via == "containers" else None
    first = first_on_target(producer, move, args.after_s)
    end = (first if first is not None else move.began + args.after_s) + 0.5
    time.sleep(max(0.0, end - time.monotonic()))
    gap, gap_at = longest_gap([producer], None, move.began, end)
    producer.stop()
    consumer = cluster.client("consume", "--endpoint", cluster.target_endpoint, "--topic", TOPIC, "--group", "after-move",
                              "--seconds", "3600", name="consumer")
    counts = drain([consumer], [producer], timeout_s=120)
    consumer.stop()
    return {**move.figures(), "served_ms": None if served is None else round((served - move.began) * 1000, 1),
            "move_ms": None if first is None else round((first - move.began) * 1000, 1),
            "gap_ms": round(gap * 1000, 1), "gap_from_ms": round((gap_at - move.began) * 1000, 1),
            "acked": len(counts.acked), "lost": len(counts.lost), "duplicated": counts.duplicates,
            "failed_sends": counts.fails}


def one_size(label: str, nbytes: int, args, root: Path):
    """One row per via, each on its own deployment and its own filled store; the copy and the
    catch-up (the references) run once, on the first via's store, and are on every row."""
    references: dict = {}
    for via in args.via:
        yield one_move(label, nbytes, via, args, root / label / via, references)


def one_move(label: str, nbytes: int, via: str, args, root: Path, references: dict) -> dict:
    """``references``: the copy's and the catch-up's figures, made here when empty."""
    check_disk(root.parent.parent, nbytes)
    row = {"size": label, "via": via, "load": f"{os.getloadavg()[0]:.2f}"}
    cluster = VIAS[via](root)
    first = not references
    try:
        row.update(fill_store(cluster.shared, nbytes, args.body_kib * 1024, cluster.source_endpoint))
        if first:
            references.update(copy_store(cluster.shared, cluster.root / "copy"), references_via=via)
        row["source_start_s"] = round(cluster.launch(), 3)
        if first:
            references.update(catch_up(cluster, nbytes))
        row.update(move_under_load(cluster, args))
    finally:
        cluster.close()
        row["load_after"] = f"{os.getloadavg()[0]:.2f}"
        if not args.keep:
            shutil.rmtree(cluster.root, ignore_errors=True)
    row.update(references)
    for key in ("fill_s", "fill_synced_s", "copy_s", "copy_synced_s"):
        row[key] = round(row[key], 3)
    return row


def check_disk(where: Path, nbytes: int) -> None:
    """The store, its copy and the replica's copy fit, below the brokers' retention threshold."""
    usage = shutil.disk_usage(where)
    if usage.used + 3 * nbytes > DISK_USE_MAX * usage.total:
        raise SystemExit(f"{where}: {nbytes / MIB:.0f} MiB three times would take the disk over "
                         f"{DISK_USE_MAX:.0%} ({usage.used / MIB:.0f} of {usage.total / MIB:.0f} MiB used)")


# --- report -------------------------------------------------------------------------------------------
COLUMNS = (("size", "size", "{}"), ("via".rjust(10), "via", "{}"), ("store MiB", "bytes", "mib"),
           ("msgs", "messages", "{}"),
           ("tail MiB", "tail_bytes", "mib"), ("start s", "source_start_s", "{:.2f}"),
           ("release ms", "release_ms", "{:.0f}"), ("open ms", "open_ms", "{:.0f}"),
           ("handover ms", "handover_ms", "{:.0f}"), ("served ms", "served_ms", "{:.0f}"),
           ("move ms", "move_ms", "{:.0f}"), ("gap ms", "gap_ms", "{:.0f}"), ("cli ms", "cli_ms", "{:.0f}"),
           ("ctl ms", "controller_ms", "{:.0f}"),
           ("acked", "acked", "{}"), ("lost", "lost", "{}"), ("failed", "failed_sends", "{}"),
           ("catch-up s", "catch_up_s", "{:.2f}"), ("copy s", "copy_s", "{:.2f}"),
           ("copy+sync s", "copy_synced_s", "{:.2f}"), ("load", "load", "{}"))


def render_row(row: dict) -> str:
    cells = []
    for title, key, form in COLUMNS:
        value = row.get(key)
        text = "-" if value is None else f"{value / MIB:.0f}" if form == "mib" else form.format(value)
        cells.append(text.rjust(len(title)))
    return "  ".join(cells)


def header(how: dict) -> str:
    return "\n".join([
        f"# bench_reassign: {how['command']}",
        f"# commit {how['commit']}; {how['machine']}",
        f"# load before {how['load_before']}; fill: {how['fill']}",
        f"# move via {how['via']}; the official Python client sends 1 KiB at {how['rate']}/s through the source's endpoint",
        ("# via containers: Release and Open called on the containers; via cli: relaymq admin reassign-broker "
         "--execute --json on conf/reassign (the controller drives the move)"),
        "# tail: the source's bytes in its last commit-log segment when released (the target's open scans them)",
        ("# release, open, handover: Release called -> answered -> Open answered (via cli: the controller's log, "
         "move committed -> OPENING -> OPENED committed)"),
        ("# served: Release called -> the target acknowledged a send made straight to its endpoint (sent every "
         "10 ms from when Open answered; not via cli)"),
        ("# move: Release called (via cli: the command started) -> the official client's first acknowledged send "
         "served by the target (goal < 1000 ms); gap: its longest time without an acknowledged send meanwhile "
         "(goal < 500 ms); failed: sends it gave up"),
        ("# cli: the command's wall time; ctl: the controller's duration of the move (its record's sinceMs - "
         "startedMs at DONE)"),
        ("# catch-up: an empty slave copies the store over HA replication (issue 5); copy: cp -a of the store "
         "directory (+ fdatasync of the copies); both once per size, on the first via's store"),
        "  ".join(title for title, _, _ in COLUMNS)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=parse_sizes("100M,1G,10G"),
                        help="store sizes, comma-separated, binary units (default 100M,1G,10G)")
    parser.add_argument("--via", type=parse_vias, default=parse_vias("containers"),
                        help="how the move is made, comma-separated, each a row: containers (Release and Open "
                             "called directly; the default), cli (relaymq admin reassign-broker --execute)")
    parser.add_argument("--body-kib", type=int, default=16, choices=range(1, 1025), metavar="KIB",
                        help="body size of the messages the store is filled with (default 16)")
    parser.add_argument("--rate", type=float, default=200.0, help="the client's sends per second (default 200)")
    parser.add_argument("--before-s", type=float, default=2.0, help="steady load before the move (default 2)")
    parser.add_argument("--after-s", type=float, default=45.0,
                        help="longest wait for the first acknowledged send on the target (default 45: past the "
                             "client's 30 s route refresh)")
    parser.add_argument("--dir", type=Path, help="parent directory of the run (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the stores and logs")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    args = parser.parse_args()
    if not (args.rate > 0 and args.before_s > 0 and args.after_s > 0):
        parser.error("--rate, --before-s and --after-s must be positive")
    how = how_it_ran(args)
    root = Path(tempfile.mkdtemp(prefix="relaymq-reassign-", dir=args.dir))
    if not args.json:
        print(header(how), flush=True)
    rows = []
    try:
        for label, nbytes in args.sizes:
            for row in one_size(label, nbytes, args, root):
                rows.append(row)
                if not args.json:
                    print(render_row(row), flush=True)
    finally:
        if args.keep:
            print(f"# kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps({"how": how, "sizes": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
