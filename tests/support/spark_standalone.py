"""A Spark standalone cluster on loopback -- one master, N workers -- started from the installed
pyspark's own launcher (``bin/spark-class`` with Spark's ``Master`` and ``Worker`` classes),
the way docs/offset-diff.md shows it; and ``spark-submit`` of the offset diff job to it.

Every process is ours (its pid recorded) and is killed on ``close``; logs go to files under the
working directory.  Readiness is waited for from the master's log (each worker registered),
with a deadline, never a fixed sleep.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.container_process import ROOT, free_ports


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def cluster_environment(workdir: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOG_DIR": str(workdir / "logs"), "SPARK_WORKER_DIR": str(workdir / "work")}


class StandaloneCluster:
    def __init__(self, workdir: Path, workers: int = 2, worker_cores: int = 1, worker_memory: str = "512m"):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workers, self.worker_cores, self.worker_memory = workers, worker_cores, worker_memory
        self.port, self.master_ui, *self.worker_ui = free_ports(2 + workers)
        self.env = cluster_environment(self.workdir)
        self.processes: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _launch(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")
        process = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], stdout=log, stderr=subprocess.STDOUT,
                                   env=self.env, cwd=self.workdir)
        self.processes.append(process)
        return process

    def start(self, timeout_s: float = 60) -> "StandaloneCluster":
        self._launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                     "--webui-port", str(self.master_ui))
        for index, ui in enumerate(self.worker_ui):
            work = self.workdir / f"worker-{index}"
            work.mkdir(exist_ok=True)
            self._launch(f"worker-{index}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                         "--cores", str(self.worker_cores), "--memory", self.worker_memory, "--webui-port", str(ui),
                         "--work-dir", str(work), self.url)
        try:
            self.wait_for(lambda: self.log("master").count("Registering worker") >= self.workers, timeout_s,
                          f"{self.workers} workers registered with the master")
        except BaseException:  # a cluster that did not come up is not left running (its JVMs outlived the test)
            self.close()
            raise
        return self

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_for(self, condition, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            for process in self.processes:
                assert process.poll() is None, f"a Spark process exited ({process.args[1:3]}): {what}"
            assert time.monotonic() < deadline, f"not within {timeout_s}s: {what}"
            time.sleep(0.2)

    def submit(self, job_args: list[str], timeout_s: float = 240) -> subprocess.CompletedProcess:
        """``spark-submit`` the offset diff job file, unchanged, to this cluster (client mode)."""
        command = [str(spark_home() / "bin" / "spark-submit"), "--master", self.url,
                   "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
                   "--conf", f"spark.pyspark.python={sys.executable}", "--conf", "spark.ui.enabled=false",
                   "--total-executor-cores", str(self.workers * self.worker_cores), "--executor-cores",
                   str(self.worker_cores), "--executor-memory", self.worker_memory, "--driver-memory", "1g",
                   str(ROOT / "spark_tools" / "offset_diff_job.py"), *job_args]
        return subprocess.run(command, env=self.env, cwd=self.workdir, capture_output=True, text=True, timeout=timeout_s)

    def close(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.kill()
            process.wait()
        self.processes.clear()
