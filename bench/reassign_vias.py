"""The two ways bench/bench_reassign.py moves broker-a, one per ``--via`` (docs/reassign.md).

* ``containers`` (:class:`ContainersRun`): a standalone nameserver and two container processes
  (tests/support/container_process.py); the move is the containers' side called directly
  (:func:`move_via_containers`): ``Release`` on the source, then ``Open`` on the target with the
  keys and the end the source handed over, as the controller's driver does.
* ``cli`` (:class:`CliRun`): the deployment of conf/reassign from its shipped files
  (tests/support/reassign_cluster.py: a nameserver with the embedded controller, container-1
  serving broker-a, an idle container-2, both reporting to the controller); the move is the
  operator's command (:func:`move_via_cli`),
  ``relaymq admin reassign-broker --broker broker-a --to TARGET --execute --json``, which the
  controller leader drives.  The controller's log lines (each step as committed, to the
  millisecond) give its steps' times; the command's ``--json`` gives the move's record.

Both give the bench one interface: ``shared`` (the store, filled before :meth:`launch`),
``source_endpoint`` (its name in the store's claims) and ``target_endpoint``,
``namesrv_port`` and ``source_admin_port`` (for the catch-up replica), ``launch()``,
``create_topic()``, ``client()``, ``move()`` and ``close()``.  Brokers on both may fill the
disk to 95 % (:data:`RETENTION`).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import grpc

from proto import reassign_pb2 as rpb
from proto import reassign_pb2_grpc as rgrpc
from store.config import StoreConfig
from store.ownership_files import read_ledger
from tests.support.container_process import ContainerProcess
from tests.support.failover_load import Client
from tests.support.nameserver_process import start_nameserver
from tests.support.reassign_cluster import ReassignCluster, _toml

BROKER = "broker-a"        # bench_replication.wait_acked asks the master about this broker
SEGMENT_BYTES = StoreConfig(Path(".")).mapped_file_size_commit_log  # the brokers' (default) and the fill's
# This VM's filesystem reports 252 GiB of blocks of which about 100 GiB are usable, so the used
# ratio retention measures ((blocks - available) / blocks, as RocketMQ does) passes the default
# diskMaxUsedSpaceRatio (75) once the 10 GiB store, its copy and the replica are on disk, and
# retention deleted the oldest segments mid-run (the replica then stopped, its position below the
# master's min).  The benchmark measures moves, not retention: the brokers may fill the disk to 95 %.
RETENTION = {"diskMaxUsedSpaceRatio": 95, "diskSpaceWarningLevelRatio": 97}
SOURCE_START_S = 600       # the source opens the filled store as its owner


@dataclass(frozen=True)
class Move:
    """One move's times (``time.monotonic``, the clients' events' clock) and answers.

    ``released_at`` is when the source no longer serves the broker (Release answered; via the
    controller, its OPENING step committed, which follows Release's answer): a send the client
    starts after it can only be served by the target."""
    began: float                 # Release called; via cli, the command started
    committed_at: float | None   # the move began: Release called; via cli, the controller committed it
    released_at: float
    opened_at: float | None      # Open answered; via cli, the controller committed OPENED
    epoch: int
    sealed_end: int | None
    starts_at: int | None
    extra: dict = field(default_factory=dict)

    def figures(self) -> dict:
        def ms(start: float | None, end: float | None) -> float | None:
            return None if start is None or end is None else round((end - start) * 1000, 1)
        return {"release_ms": ms(self.committed_at, self.released_at), "open_ms": ms(self.released_at, self.opened_at),
                "handover_ms": ms(self.committed_at, self.opened_at),
                "epoch": self.epoch, "sealed_end": self.sealed_end, "starts_at": self.starts_at,
                "tail_bytes": None if self.sealed_end is None else self.sealed_end % SEGMENT_BYTES, **self.extra}


def create_topic(admin, topic: str) -> None:
    """``admin(*args)``: a finished ``relaymq admin`` command."""
    deadline = time.monotonic() + 30
    while True:  # the broker registers at the nameserver shortly after its container is ready
        done = admin("update-topic", "--topic", topic, "--type", "NORMAL", "--queues", "8", "-b", BROKER)
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"update-topic failed: {done.stdout[-300:]} {done.stderr[-300:]}")
        time.sleep(0.2)


# --- via containers ---------------------------------------------------------------------------------
class _Clients:
    """The load clients of a run, logged under its root and stopped with it."""
    root: Path
    clients: list

    def client(self, *args: str, name: str) -> Client:
        client = Client(*args, log_path=self.root / f"{name}.log")
        self.clients.append(client)
        return client


class ContainersRun(_Clients):
    """A standalone nameserver and the containers of one size's run: container-1 (the source)
    serves broker-a from the shared store, container-2 (the target) a spare broker.  The
    containers' ports are chosen at once (the source's client endpoint is its name in the
    store's claims); :meth:`launch` starts them, :meth:`close` ends whatever was started."""

    via = "containers"

    def __init__(self, root: Path):
        self.root, self.shared = root, root / "shared-store" / BROKER
        self.nameserver = start_nameserver(root / "namesrv")
        entry = {"brokerName": BROKER, "storePathRootDir": str(self.shared), "sharedStorage": True,
                 "flushDiskType": "SYNC_FLUSH", "totalReplicas": 2, **RETENTION}
        self.source = ContainerProcess(root / "container-1", brokers=[entry], embedded_namesrv=False,
                                       namesrv_port=self.nameserver.port)
        self.target = ContainerProcess(root / "container-2", brokers=[{"brokerName": "broker-spare"}],
                                       embedded_namesrv=False, namesrv_port=self.nameserver.port)
        self.namesrv_port, self.source_admin_port = self.nameserver.port, self.source.admin_port
        self.source_endpoint, self.target_endpoint = self.source.endpoint, self.target.endpoint
        self.replica: ContainerProcess | None = None
        self.clients: list[Client] = []
        self.channels: list[grpc.Channel] = []

    def launch(self) -> float:
        """Seconds the source took to start: it opens the filled store as its owner."""
        began = time.perf_counter()
        self.source.start(timeout_s=SOURCE_START_S)
        started = time.perf_counter() - began
        self.target.start(timeout_s=60)
        return started


    def create_topic(self, topic: str) -> None:
        create_topic(lambda *args: self.source.admin(*args, "-n", self.nameserver.address), topic)

    def move(self) -> Move:
        """The channels to the containers are closed by :meth:`close`: closing a channel
        waited for ready takes grpcio 200 ms, which the figures after the move would count."""
        self.channels = [grpc.insecure_channel(f"127.0.0.1:{c.admin_port}") for c in (self.source, self.target)]
        return move_via_containers(*self.channels, self.target.endpoint, BROKER, read_ledger(self.shared).newest.epoch + 1)

    def close(self) -> None:
        for channel in self.channels:
            channel.close()
        for client in self.clients:
            client.stop(timeout_s=10)
        for container in (self.replica, self.target, self.source):
            if container is not None:
                container.kill()
        self.nameserver.kill()


def move_via_containers(to_source: grpc.Channel, to_target: grpc.Channel, target_endpoint: str, broker: str,
                        epoch: int) -> Move:
    """The containers' side of a move, called directly (services/reassign/service.py): Release
    on the source's internal port (calls still reaching it are relayed to the target's client
    endpoint from then on), then Open on the target's with the keys and the sealed end it
    answered.  Channels are connected before the clock starts; the caller closes them."""
    for channel in (to_source, to_target):
        grpc.channel_ready_future(channel).result(timeout=10)
    began = time.monotonic()
    released = rgrpc.ReassignServiceStub(to_source).Release(
        rpb.ReleaseRequest(broker_name=broker, epoch=epoch, target_endpoint=target_endpoint), timeout=120)
    released_at = time.monotonic()
    opened = rgrpc.ReassignServiceStub(to_target).Open(
        rpb.OpenRequest(broker_name=broker, epoch=epoch, broker_entry_json=released.broker_entry_json,
                       handed_end=released.sealed_end),
        timeout=600)
    return Move(began, began, released_at, time.monotonic(), epoch, released.sealed_end, opened.starts_at)


# --- via cli ----------------------------------------------------------------------------------------
class CliRun(ReassignCluster, _Clients):
    """conf/reassign's deployment on free ports (chosen when constructed), its store at
    ``root/shared-store/broker-a`` claimed for container-1's client endpoint; the brokers'
    retention as :data:`RETENTION`, the only change to the shipped files besides the ports."""

    via = "cli"

    def __init__(self, root: Path):
        super().__init__(root)
        self.root, self.shared = root, root / "shared-store" / BROKER
        self.source_endpoint, self.target_endpoint = self.endpoint(1), self.endpoint(2)
        self.source_admin_port = self.admin_1
        self.replica: ContainerProcess | None = None
        self.clients: list[Client] = []

    def _config(self, name: str) -> Path:
        path = super()._config(name)
        values = tomllib.loads(path.read_text())
        if values.get("broker"):
            for broker in values["broker"]:
                broker.update(RETENTION)
            path.write_text(_toml(values))
        return path

    def launch(self) -> float:
        """Seconds container-1 took to start: it opens the filled store as its owner."""
        self.start("namesrv")
        began = time.perf_counter()
        self.start("container-1", timeout_s=SOURCE_START_S)
        started = time.perf_counter() - began
        self.start("container-2", timeout_s=60)
        self.wait_for(lambda: len([c for c in self.moves_list()["containers"] if c["live"]]) == 2, 20,
                      "both containers reported to the controller")
        return started


    def create_topic(self, topic: str) -> None:
        create_topic(self.admin, topic)

    def move(self) -> Move:
        return move_via_cli(self)

    def close(self) -> None:
        for client in self.clients:
            client.stop(timeout_s=10)
        if self.replica is not None:
            self.replica.kill()
        super().close()


def relaymq() -> list[str]:
    """The operator's command: the venv's ``relaymq`` script, else ``python -m container``."""
    script = Path(sys.executable).parent / "relaymq"
    return [str(script)] if script.exists() else [sys.executable, "-m", "container"]


def move_via_cli(cluster: CliRun) -> Move:
    """``relaymq admin reassign-broker --broker broker-a --to TARGET --execute --json``, timed
    from the command's start to its exit (``cli_ms``); the controller's own duration of the
    move is its record's ``sinceMs - startedMs`` at DONE (``controller_ms``).  The steps' times
    are the controller's log lines; without its OPENING line, the source is taken to have
    released when the command ended (later than it did: the move's figure can only grow)."""
    command = [*relaymq(), "admin", "reassign-broker", "--broker", BROKER, "--to", cluster.target_endpoint,
               "--execute", "--json", "-n", cluster.namesrv]
    began = time.monotonic()
    done = subprocess.run(command, check=False, cwd=cluster.workdir, capture_output=True, text=True, timeout=300)
    ended = time.monotonic()
    try:
        document = json.loads(done.stdout)
        record = document["move"]
    except (ValueError, KeyError):
        raise RuntimeError(f"reassign-broker exited {done.returncode}: {done.stdout[-800:]} {done.stderr[-800:]}") from None
    if done.returncode != 0 or record["step"] != "DONE":
        raise RuntimeError(f"the move did not complete (exit {done.returncode}): {done.stdout[-1500:]} {done.stderr[-800:]}")
    steps = controller_steps(cluster.workdir / "namesrv.log", BROKER, record["epoch"], until="OPENED")
    return Move(began, steps.get("COMMITTED"), steps.get("OPENING", ended), steps.get("OPENED"), record["epoch"],
                record.get("handedEnd"), read_ledger(cluster.shared).newest.start,
                {"cli_ms": round((ended - began) * 1000, 1), "controller_ms": record["sinceMs"] - record["startedMs"],
                 "fenced": record.get("fenced", False), "released_from": "log" if "OPENING" in steps else "command end",
                 "cli_steps": " ".join(f"{s['step']}@{s['atS']:.3f}" for s in document.get("steps", []))})


# services/controller/reassign.py's lines: "move of B from S to T committed at ownership epoch N",
# then "move of B: STEP -> STEP" as each step is committed; the format is container/cli_container.py's.
LOG_LINE = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) WARNING services\.controller\.reassign: move of (\S+)"
                      r"(?: from \S+ to \S+ committed at ownership epoch (\d+)|: [A-Z_]+ -> ([A-Z_]+))")


def controller_steps(log: Path, broker: str, epoch: int, until: str, timeout_s: float = 3.0) -> dict[str, float]:
    """When the controller committed each step of ``broker``'s move at ``epoch`` (COMMITTED,
    OPENING, ...), on this process's ``time.monotonic``; waits up to ``timeout_s`` for ``until``.
    The log's times are cut to the millisecond: 1 ms is added, so that each is after its commit."""
    deadline = time.monotonic() + timeout_s
    while True:
        offset = time.time() - time.monotonic()   # the log's clock (wall) minus this one
        steps: dict[str, float] = {}
        for line in log.read_text(errors="replace").splitlines():
            match = LOG_LINE.match(line)
            if match is None or match.group(2) != broker:
                continue
            at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() + 0.001 - offset
            if match.group(3) is not None:
                steps = {"COMMITTED": at} if int(match.group(3)) == epoch else {}
            elif steps:
                steps.setdefault(match.group(4), at)
        if until in steps or time.monotonic() > deadline:
            return steps
        time.sleep(0.1)
