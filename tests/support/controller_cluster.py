"""The controller-mode deployment for tests and benchmarks, on free loopback ports.

Like ``conf/controller-mode``: a nameserver with the embedded controller (or, with
``controllers=3``, a standalone three-member controller group), and two containers, each
hosting one replica of broker-a and one of broker-b with their own endpoints (listenPort);
container 0 is meant to host broker-a's master and container 1 broker-b's
(brokerElectionPriority).  Every process is real; ``kill``/``pause``/``resume`` send SIGKILL,
SIGSTOP and SIGCONT.  Logs go to files under the working directory.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from proto import controller_pb2 as cpb
from services.controller.client import ControllerClient
from tests.support.container_process import ROOT, ContainerProcess, free_ports

BROKERS = ("broker-a", "broker-b")


def _spawn(args: list[str], log_path: Path, ready: bytes, timeout_s: float = 30.0,
           prefix: tuple[str, ...] = ()) -> subprocess.Popen:
    """``prefix``: run under it (``ip netns exec NS``, which execs: the pid is the process's)."""
    log = open(log_path, "ab")
    process = subprocess.Popen([*prefix, sys.executable, "-m", "container", *args], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if ready in line:
            return process
        if not line and process.poll() is not None:
            raise RuntimeError(f"{args[0]} exited with {process.returncode}: {log_path.read_text()[-3000:]}")
    process.kill()
    raise RuntimeError(f"{args[0]} not ready in {timeout_s}s: {log_path.read_text()[-3000:]}")


class Loopback:
    """Where the processes run: everything on 127.0.0.1 (bench/chaos_env.Sandbox: namespaces)."""
    host_ip = "127.0.0.1"

    def container_ip(self, index: int) -> str:
        return "127.0.0.1"

    def launch_prefix(self, index: int) -> tuple[str, ...]:
        return ()


class ControllerModeCluster:
    def __init__(self, workdir: Path, controllers: int = 1, heartbeat_timeout_ms: int = 1500,
                 broker_keys: dict | None = None, network=None, container_keys: list[dict] | None = None):
        """``network``: hosts and launch prefixes (``Loopback`` by default); ``container_keys``:
        container-level keys per container (index 0 and 1)."""
        self.network = network or Loopback()
        self.host = self.network.host_ip
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.controller_count = controllers
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.broker_keys = broker_keys or {}
        self.container_keys = container_keys or [{}, {}]
        self.namesrv_port, *self.controller_ports = free_ports(1 + (controllers if controllers > 1 else 0))
        if controllers == 1:
            self.controller_ports = [self.namesrv_port]
        # per container: broker-a's and broker-b's listenPort, ordered as conf/controller-mode orders
        # them: the intended master's endpoint sorts first, so clients connect to it directly
        low, second, third, high = sorted(free_ports(4), key=str)
        self.broker_ports = [[low, high], [second, third]]
        self.controller_processes: list[subprocess.Popen | None] = []
        self.namesrv_process: subprocess.Popen | None = None
        self.containers: list[ContainerProcess] = []
        self.secret_file = self._cluster_secret() if self.host != "127.0.0.1" else None

    def _cluster_secret(self) -> Path:
        """Beyond loopback (bench/chaos_env's namespaces) internal ports need the cluster
        credential (docs/security.md): one secret for every member, and for this process and
        the admin commands it runs (RELAYMQ_CLUSTER_SECRET_FILE)."""
        from services import cluster_auth

        path = self.workdir / "cluster.secret"
        path.write_text(os.urandom(24).hex() + "\n")
        os.environ[cluster_auth.SECRET_FILE_ENV] = str(path)
        cluster_auth.install_from_file(str(path))
        return path

    def _secret_line(self) -> str:
        return f'clusterAuthenticationSecretFile = "{self.secret_file}"\n' if self.secret_file else ""

    # --- processes -------------------------------------------------------------------------------
    @property
    def controller_addr(self) -> str:
        return ";".join(f"{self.host}:{p}" for p in self.controller_ports)

    def _peers(self) -> str:
        return ";".join(f"n{i}-{self.host}:{p}" for i, p in enumerate(self.controller_ports))

    def _controller_text(self, index: int) -> str:
        return (f'controllerDLegerGroup = "RelayMQController"\ncontrollerDLegerPeers = "{self._peers()}"\n'
                f'controllerDLegerSelfId = "n{index}"\ncontrollerStorePath = "{self.workdir / f"controller-n{index}"}"\n')

    def start_controllers(self) -> None:
        text = (f'listenPort = {self.namesrv_port}\nbindAddress = "{self.host}"\nscanNotActiveBrokerInterval = 1000\n'
                + self._secret_line())
        if self.controller_count == 1:
            text += "enableControllerInNamesrv = true\n" + self._controller_text(0)
        path = self.workdir / "namesrv.toml"
        path.write_text(text)
        self.namesrv_process = _spawn(["namesrv", "-c", str(path)], self.workdir / "namesrv.log", b"listening")
        if self.controller_count > 1:
            for index in range(self.controller_count):
                self.controller_processes.append(self.start_controller(index))

    def start_controller(self, index: int) -> subprocess.Popen:
        path = self.workdir / f"controller-n{index}.toml"
        path.write_text(self._controller_text(index) + self._secret_line())
        return _spawn(["controller", "-c", str(path)], self.workdir / f"controller-n{index}.log", b"ready")

    def _broker(self, container: int, name: str) -> dict:
        mine = (container == 0) == (name == "broker-a")
        return {"brokerName": name, "listenPort": self.broker_ports[container][BROKERS.index(name)],
                "enableControllerMode": True, "controllerAddr": self.controller_addr,
                "brokerElectionPriority": 1 if mine else 2,
                "controllerHeartBeatTimeoutMills": self.heartbeat_timeout_ms, "flushDiskType": "SYNC_FLUSH",
                "totalReplicas": 2, "allAckInSyncStateSet": True, "haMaxTimeSlaveNotCatchup": 1500,
                "haSendHeartbeatInterval": 500, "haHousekeepingInterval": 3000, "syncBrokerMetadataPeriod": 1000,
                **self.broker_keys}

    def start_containers(self) -> None:
        for index in range(2):
            container = ContainerProcess(self.workdir / f"container-{index + 1}",
                                         brokers=[self._broker(index, name) for name in BROKERS],
                                         embedded_namesrv=False, namesrv_port=self.namesrv_port,
                                         extra={"brokerHeartbeatInterval": 200, **self._secret_key(),
                                                **self.container_keys[index]},
                                         host=self.network.container_ip(index), namesrv_host=self.host)
            self.containers.append(container)
        for container in self.containers:  # started together: priorities pick the first masters
            container.write_config()
        for container in self.containers:  # each kept at once: a later one failing must not leak it
            container.process = self._launch(container)

    def _secret_key(self) -> dict:
        return {"clusterAuthenticationSecretFile": str(self.secret_file)} if self.secret_file else {}

    def _launch(self, container: ContainerProcess) -> subprocess.Popen:
        container.log_path = container.data_dir / "container.log"
        return _spawn(["container", "-c", str(container.data_dir / "container.toml")], container.log_path,
                      b"container ready", prefix=self.network.launch_prefix(self.containers.index(container)))

    def start(self) -> "ControllerModeCluster":
        """Everything up, or (a process refused to start, no masters in time) everything it
        started killed again: the caller holds no cluster to close, and a left container kept
        its ports and CPU for the rest of the run."""
        try:
            self.start_controllers()
            self.start_containers()
            self.wait_masters({"broker-a": 0, "broker-b": 1})
        except BaseException:
            self.close()
            raise
        return self

    def restart_container(self, index: int) -> None:
        self.containers[index].process = self._launch(self.containers[index])

    def kill(self, index: int) -> None:
        self.containers[index].kill()

    def pause(self, index: int) -> None:
        self.containers[index].process.send_signal(signal.SIGSTOP)

    def resume(self, index: int) -> None:
        self.containers[index].process.send_signal(signal.SIGCONT)

    def close(self) -> None:
        for container in self.containers:
            if container.process is not None and container.process.poll() is None:
                container.process.send_signal(signal.SIGCONT)
            container.kill()
        for process in [self.namesrv_process, *self.controller_processes]:
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()

    # --- the controller's view -----------------------------------------------------------------
    def endpoint(self, index: int) -> str:
        return self.containers[index].endpoint

    @property
    def namesrv(self) -> str:
        return f"{self.host}:{self.namesrv_port}"

    def view(self, broker: str) -> cpb.ReplicaGroupView | None:
        async def ask():
            client = ControllerClient(self.controller_addr.split(";"), call_timeout_s=2, attempts=6, deadline_s=5)
            try:
                reply = await client.call("GetReplicaInfo", cpb.GetReplicaInfoRequest(broker_name=broker))
            finally:
                await client.close()
            return reply.view if reply.status.code == cpb.ControllerStatus.SUCCESS else None
        try:
            return asyncio.run(ask())
        except Exception:  # noqa: BLE001 - no controller answered: no view
            return None

    def master_container(self, broker: str) -> int | None:
        """The container (0 or 1) whose internal address the controller names as the master."""
        view = self.view(broker)
        if view is None or view.master_broker_id <= 0:
            return None
        for index, container in enumerate(self.containers):
            if view.master_address.endswith(f":{container.admin_port}"):
                return index
        return None

    def wait_masters(self, expected: dict[str, int], timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(self.master_container(b) == i for b, i in expected.items()):
                return
            time.sleep(0.1)
        raise AssertionError(f"masters not {expected}: " + ", ".join(f"{b}: {self.view(b)}" for b in expected))

    def admin(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "container", "admin", *args, "-n", self.namesrv], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 or not check, (args, done.stdout, done.stderr)
        return done

    def create_load_topics(self, timeout_s: float = 30.0) -> None:
        """The topics and groups of the failover loads (tests/support/failover_load.py): ``normal``
        on both groups, ``fifo`` on broker-a only (a SimpleConsumer's receives alternate between
        a topic's brokers, and a long poll on one without messages lasts its full 5 s), and the
        groups ``normal-group`` and ``fifo-group`` (FIFO).  A change refused because the nameserver
        still names a replica that is no longer (or not yet) master is asked again: the controller
        has elected the masters (:meth:`start`), their registrations follow."""
        for args in (("update-topic", "--topic", "normal", "--type", "NORMAL", "--queues", "2"),
                     ("update-topic", "--topic", "fifo", "--type", "FIFO", "--queues", "2", "-b", "broker-a"),
                     ("update-group", "--group", "normal-group"),
                     ("update-group", "--group", "fifo-group", "--fifo")):
            self.admin_when_registered(*args, timeout_s=timeout_s)

    def admin_when_registered(self, *args: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess:
        """An admin change, asked again while the nameserver still names a replica that is no
        longer (or not yet) master: the controller elected the masters, registrations follow."""
        deadline = time.monotonic() + timeout_s
        while (done := self.admin(*args, check=False)).returncode != 0 and time.monotonic() < deadline:
            if "BROKER_IS_SLAVE" not in done.stderr and "no master registered" not in done.stderr:
                break
            time.sleep(0.2)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done
