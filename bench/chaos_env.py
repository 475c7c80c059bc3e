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
* Everything is named after this process's id and removed by :meth:`Sandbox.close`, also
  after a failure; what could not be set up is undone and reported.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CGROUP_BLKIO = Path("/sys/fs/cgroup/blkio")


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


def _run(*args: str) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


class Sandbox:
    def __init__(self, workdir: Path, containers: int = 2, disk_mb: int = 400):
        self.workdir = Path(workdir)
        self.count, self.disk_mb = containers, disk_mb
        tag = os.getpid() % 100_000
        self.subnet = 20 + os.getpid() % 230
        self.bridge = f"rmq{tag}b"
        self.host_ip = f"10.77.{self.subnet}.1"
        self.namespaces = [f"rmq{tag}n{i}" for i in range(containers)]
        self.links = [f"rmq{tag}h{i}" for i in range(containers)]   # the bridge side of each veth
        self.mounts = [self.workdir / f"container-{i + 1}" for i in range(containers)]
        self.images = [self.workdir / f"disk-{i + 1}.img" for i in range(containers)]
        self.loops: list[str | None] = [None] * containers
        self.cgroups = [CGROUP_BLKIO / f"rmq{tag}c{i}" for i in range(containers)]
        self._undo: list = []

    # --- what the cluster needs ------------------------------------------------------------------
    def container_ip(self, index: int) -> str:
        return f"10.77.{self.subnet}.{11 + index}"

    def launch_prefix(self, index: int) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.namespaces[index])

    # --- setup and teardown ----------------------------------------------------------------------
    def open(self) -> "Sandbox":
        try:
            self._bridge()
            for index in range(self.count):
                self._namespace(index)
                self._disk(index)
                self.cgroups[index].mkdir(exist_ok=True)
                self._undo.append(lambda path=self.cgroups[index]: path.rmdir())
        except Exception:
            self.close()
            raise
        return self

    def _bridge(self) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self._undo.append(lambda: _run("ip", "link", "del", self.bridge))
        _run("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")

    def _namespace(self, index: int) -> None:
        ns, host_side, inner = self.namespaces[index], self.links[index], f"{self.links[index][:-2]}i{index}"
        _run("ip", "netns", "add", ns)
        self._undo.append(lambda: _run("ip", "netns", "del", ns))
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
        self._undo.append(lambda: _run("losetup", "-d", loop))
        _run("mkfs.ext4", "-q", "-F", "-m", "0", loop)
        mount.mkdir(parents=True, exist_ok=True)
        _run("mount", loop, str(mount))
        self._undo.append(lambda: self._unmount(mount))

    def _unmount(self, mount: Path) -> None:
        for log in mount.glob("*.log"):  # the container's log outlives its disk
            (self.workdir.parent / f"{mount.name}-{log.name}").write_bytes(log.read_bytes())
        _run("umount", "-l", str(mount))

    def close(self) -> None:
        """Undo everything, newest first; every step is tried."""
        failures = []
        while self._undo:
            try:
                self._undo.pop()()
            except Exception as error:  # noqa: BLE001 - keep undoing the rest
                failures.append(str(error))
        if failures:
            raise RuntimeError("sandbox teardown: " + "; ".join(failures))

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
