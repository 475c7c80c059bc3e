"""Where bench/chaos.py's cluster runs when it can (root, ``ip``, loop devices, cgroup v1 blkio):
each container in its own network namespace and on its own small filesystem, so that three
faults are real rather than simulated in the broker.

* **Network**: a bridge in the root namespace (the controllers, the nameserver and the
  clients listen or connect there, on the bridge's address); each container gets a network
  namespace with a veth pair to the bridge and its own address, and binds every endpoint
  (client, broker endpoints, admin, replication) to it.  A *partition* sets the container's
  link down: its packets vanish both ways, nobody gets a reset (like a cut cable or a dead
  switch port), until the link is up again.
* **Disks**: each container's data directory is an ext4 filesystem (no reserved blocks) on a
  loop device over a sparse file.  A *full disk* is a filler file taking the free space
  (bench/chaos_faults.py); a *slow disk* is a blkio throttle on the loop device for the
  container's process (its cgroup): every write I/O waits (``write_iops``), so every
  fdatasync takes hundreds of milliseconds.  (device-mapper's delay target is not in this
  kernel, netem neither; the throttle is the kernel's own, on the real write path.)
* Everything is named ``rmq<pid>...`` after this process's id and removed by
  :meth:`Sandbox.close`, also after a failure or Ctrl-C (what could not be set up is undone
  and reported).  Only a SIGKILL of the harness leaves things behind: each sandbox keeps a
  lease (``/run/relaymq-chaos/<pid>.json``) naming what it holds, and :func:`clean_stale`
  removes what the leases of processes that no longer run name (the next sandbox calls it;
  also ``python bench/chaos_env.py --clean``), never anything else.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

CGROUP_BLKIO = Path("/sys/fs/cgroup/blkio")
LEASES = Path("/run/relaymq-chaos")   # what each live sandbox holds (clean_stale)


def available() -> str | None:
    """None when a sandbox can be made here; otherwise why not."""
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("ip", "losetup", "mkfs.ext4", "mount"):
        if shutil.which(tool) is None:
            return f"no {tool}"
    if not (CGROUP_BLKIO / "cgroup.procs").exists():
        return "no cgroup v1 blkio controller"
    return None


def _run(*args: str, check: bool = True) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True)
    if done.returncode and check:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def _started(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot, /proc/PID/stat), None unless it runs (zombies do not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _kill_namespace_processes(namespace: str) -> None:
    """SIGKILL what still runs in ``namespace`` (only our containers run there) and wait."""
    listed = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout.split()
    for pid in map(int, listed):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while any(_started(int(pid)) for pid in listed) and time.monotonic() < deadline:
        time.sleep(0.05)


def _detach(loop: str, image: Path, timeout_s: float = 10.0) -> None:
    """Detach ``loop`` and wait until it is gone (the kernel may finish after losetup returns)."""
    _run("losetup", "-d", loop)
    deadline = time.monotonic() + timeout_s
    while str(image) in _run("losetup", "-a", check=False):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{loop} ({image}) still attached {timeout_s:.0f} s after losetup -d")
        time.sleep(0.1)


def clean_stale() -> list[str]:
    """Remove what sandboxes of harnesses that no longer run left behind; returns what.

    Only what a lease (``LEASES/<pid>.json``, written by :class:`Sandbox` as it creates
    things) names, and only when that process (pid and start time) is gone: another run's
    sandbox, or anything made by other tools, is never touched."""
    removed = []
    for lease in sorted(LEASES.glob("*.json")) if LEASES.exists() else ():
        try:
            held = json.loads(lease.read_text())
        except (OSError, ValueError):
            continue
        if _started(held["pid"]) == held["started"]:
            continue
        attached = _run("losetup", "-a", check=False)
        for namespace in held["namespaces"]:
            _kill_namespace_processes(namespace)
        for mount in held["mounts"]:
            if _run("findmnt", "-n", mount, check=False):
                _run("umount", "-l", mount, check=False)
                removed.append(mount)
        for loop, image in held["loops"]:
            if f"{loop}:" in attached and image in attached.split(f"{loop}:", 1)[1].split("\n", 1)[0]:
                _run("losetup", "-d", loop, check=False)
                removed.append(loop)
        for name in held["namespaces"]:
            if subprocess.run(["ip", "netns", "del", name], capture_output=True).returncode == 0:
                removed.append(name)
        for name in [*held["links"], held["bridge"]]:
            if subprocess.run(["ip", "link", "del", name], capture_output=True).returncode == 0:
                removed.append(name)
        for path in map(Path, held["cgroups"] + held["images"]):
            try:
                path.rmdir() if path.is_dir() else path.unlink()
                removed.append(str(path))
            except OSError:
                pass
        lease.unlink(missing_ok=True)
    return removed


def _free_subnet() -> int:
    """A 10.77.X.0/24 no interface here uses yet."""
    used = _run("ip", "-o", "-4", "addr", "show")
    for subnet in range(20, 250):
        if f" 10.77.{subnet}." not in used:
            return subnet
    raise RuntimeError("no free 10.77.X.0/24 subnet for the sandbox")


class Sandbox:
    def __init__(self, workdir: Path, containers: int = 2, disk_mb: int = 400):
        self.workdir = Path(workdir)
        self.count, self.disk_mb = containers, disk_mb
        tag = os.getpid()
        self.subnet = 0   # chosen by open()
        self.bridge = f"rmq{tag}b"
        self.namespaces = [f"rmq{tag}n{i}" for i in range(containers)]
        self.links = [f"rmq{tag}h{i}" for i in range(containers)]   # the bridge side of each veth
        self.mounts = [self.workdir / f"container-{i + 1}" for i in range(containers)]
        self.images = [self.workdir / f"rmq{tag}-disk-{i + 1}.img" for i in range(containers)]
        self.loops: list[str | None] = [None] * containers
        self.cgroups = [CGROUP_BLKIO / f"rmq{tag}c{i}" for i in range(containers)]
        self._undo: list = []

    # --- what the cluster needs ------------------------------------------------------------------
    @property
    def host_ip(self) -> str:
        """The bridge's address: controllers, nameserver and clients (the root namespace)."""
        return f"10.77.{self.subnet}.1"

    def container_ip(self, index: int) -> str:
        return f"10.77.{self.subnet}.{11 + index}"

    def launch_prefix(self, index: int) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.namespaces[index])

    # --- setup and teardown ----------------------------------------------------------------------
    def open(self) -> "Sandbox":
        for name in clean_stale():
            print(f"sandbox: removed {name}, left by a harness that no longer runs", file=sys.stderr)
        try:
            self._write_lease()  # first: a SIGKILL from here on leaves a record for clean_stale
            self._shared_workdir()
            LEASES.mkdir(parents=True, exist_ok=True)
            with open(LEASES / "subnet.lock", "w") as lock:  # two harnesses starting at once pick different subnets
                fcntl.flock(lock, fcntl.LOCK_EX)
                self.subnet = _free_subnet()
                self._bridge()
            for index in range(self.count):
                self._namespace(index)
                self._disk(index)
                self._write_lease()
                self.cgroups[index].mkdir(exist_ok=True)
                self._undo.append(lambda path=self.cgroups[index]: path.rmdir())
        except BaseException:  # Ctrl-C included: nothing stays behind
            self.close()
            raise
        return self

    @property
    def _lease(self) -> Path:
        return LEASES / f"{os.getpid()}.json"

    def _write_lease(self) -> None:
        LEASES.mkdir(parents=True, exist_ok=True)
        held = {"pid": os.getpid(), "started": _started(os.getpid()), "bridge": self.bridge,
                "namespaces": self.namespaces, "links": self.links,
                "mounts": [str(m) for m in self.mounts] + [str(self.workdir)],
                "loops": [[loop, str(image)] for loop, image in zip(self.loops, self.images) if loop],
                "cgroups": [str(c) for c in self.cgroups], "images": [str(i) for i in self.images]}
        self._lease.write_text(json.dumps(held))

    def _shared_workdir(self) -> None:
        """The work directory becomes a mount of its own with shared propagation.  ``ip netns
        exec`` gives every process it starts a copy of the mount table (a slave of ours): ours,
        and every other sandbox's started later.  Where ``/`` is private, a copy keeps our disks
        mounted (their loop devices busy) until that process ends; under a shared mount our
        unmounts reach every copy."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        _run("mount", "--bind", str(self.workdir), str(self.workdir))
        self._undo.append(lambda: _run("umount", "-l", str(self.workdir)))
        _run("mount", "--make-shared", str(self.workdir))

    def _bridge(self) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self._undo.append(lambda: _run("ip", "link", "del", self.bridge))
        _run("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")

    def _namespace(self, index: int) -> None:
        ns, host_side, inner = self.namespaces[index], self.links[index], f"{self.links[index][:-2]}i{index}"
        _run("ip", "netns", "add", ns)
        self._undo.append(lambda: (_kill_namespace_processes(ns), _run("ip", "netns", "del", ns)))
        _run("ip", "link", "add", host_side, "type", "veth", "peer", "name", inner)
        self._undo.append(lambda: subprocess.run(["ip", "link", "del", host_side], capture_output=True))
        _run("ip", "link", "set", host_side, "master", self.bridge)
        _run("ip", "link", "set", host_side, "up")
        _run("ip", "link", "set", inner, "netns", ns)
        for command in (("ip", "addr", "add", f"{self.container_ip(index)}/24", "dev", inner),
                        ("ip", "link", "set", inner, "up"), ("ip", "link", "set", "lo", "up"),
                        ("ip", "route", "add", "default", "via", self.host_ip)):
            _run("ip", "netns", "exec", ns, *command)

    def _disk(self, index: int) -> None:
        image, mount = self.images[index], self.mounts[index]
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(image, "wb") as out:
            out.truncate(self.disk_mb << 20)
        self._undo.append(lambda: image.unlink(missing_ok=True))
        loop = _run("losetup", "-f", "--show", str(image))
        self.loops[index] = loop
        self._undo.append(lambda: _detach(loop, image))
        _run("mkfs.ext4", "-q", "-F", "-m", "0", loop)
        mount.mkdir(parents=True, exist_ok=True)
        _run("mount", loop, str(mount))
        self._undo.append(lambda: self._unmount(mount))

    def _unmount(self, mount: Path) -> None:
        for log in mount.glob("*.log"):  # the container's log outlives its disk
            (self.workdir.parent / f"{mount.name}-{log.name}").write_bytes(log.read_bytes())
        deadline = time.monotonic() + 5
        while subprocess.run(["umount", str(mount)], capture_output=True).returncode:
            if time.monotonic() > deadline:  # still busy: lazily, and the loop device goes when it is free
                _run("umount", "-l", str(mount))
                return
            time.sleep(0.1)

    def close(self) -> None:
        """Undo everything, newest first; every step is tried."""
        failures = []
        for namespace in self.namespaces:  # first: a live process keeps its cgroup and its mount busy
            try:
                _kill_namespace_processes(namespace)
            except BaseException as error:  # noqa: BLE001 - keep going
                failures.append(str(error))
        while self._undo:
            try:
                self._undo.pop()()
            except BaseException as error:  # noqa: BLE001 - keep undoing the rest, even after Ctrl-C
                failures.append(str(error))
        if failures:  # the lease stays: clean_stale tries again once this process is gone
            raise RuntimeError("sandbox teardown: " + "; ".join(failures))
        self._lease.unlink(missing_ok=True)

    # --- faults ----------------------------------------------------------------------------------
    def partition(self, index: int) -> None:
        _run("ip", "link", "set", self.links[index], "down")

    def heal_partition(self, index: int) -> None:
        _run("ip", "link", "set", self.links[index], "up")

    def slow_disk(self, index: int, pid: int, write_iops: int) -> None:
        """Throttle the container's process (``pid``, all its threads) on its disk."""
        cgroup = self.cgroups[index]
        (cgroup / "cgroup.procs").write_text(str(pid))
        (cgroup / "blkio.throttle.write_iops_device").write_text(f"{self._device(index)} {write_iops}")

    def heal_slow_disk(self, index: int) -> None:
        (self.cgroups[index] / "blkio.throttle.write_iops_device").write_text(f"{self._device(index)} 0")

    def _device(self, index: int) -> str:
        stat = os.stat(self.loops[index])
        return f"{os.major(stat.st_rdev)}:{os.minor(stat.st_rdev)}"


if __name__ == "__main__":
    if sys.argv[1:] != ["--clean"]:
        raise SystemExit("usage: python bench/chaos_env.py --clean   (remove what dead chaos runs left behind)")
    if os.geteuid() != 0:
        raise SystemExit("--clean needs root")
    print("\n".join(clean_stale()) or "nothing to clean")
