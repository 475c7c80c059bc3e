"""Benchmark the Spark offset diff: synthetic offsets, R replicas x N keys per replica.

Usage::

    .venv/bin/python bench/bench_offset_diff.py --replicas 2 3 --keys 100000 1000000 [10000000]
        [--master 'local[*]'] [--driver-memory 4g (default)] [--output] [--workdir /tmp/relaymq-bench-offsets]

For each (R, N) it writes flat parquet in the fetch step's layout (not timed), then runs the
job in a fresh process (a cold SparkSession each time) and prints wall seconds including
session start, CPU seconds (driver + JVM), peak memory (driver RSS + JVM VmHWM) and input
rows per second.  Figures only: nothing here passes or fails on timing.

Synthetic data: 16 broker groups; 8 queues per (topic, consumer group); replica 0 is the
master; about 1% of keys are ahead on the last slave (an acting master that took commits,
with the newest DataVersion), 0.1% of keys are missing on it.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
BROKER_GROUPS = 16
QUEUES = 8


def generate(folder: str, replicas: int, keys: int, seed: int = 7) -> None:
    import numpy
    import pyarrow
    import pyarrow.parquet

    from services.offset_fetch import OFFSETS_SCHEMA, REPLICAS_SCHEMA

    rng = numpy.random.default_rng(seed)
    index = numpy.arange(keys, dtype=numpy.int64)
    group_index = index % BROKER_GROUPS
    rest = index // BROKER_GROUPS
    entry = rest // QUEUES
    groups = pyarrow.array([f"broker-{g:02d}" for g in range(BROKER_GROUPS)])
    topics = pyarrow.array([f"Topic{t}" for t in range(1000)])
    consumers = pyarrow.array([f"GID_{c}" for c in range(int(entry.max() // 1000) + 1)])
    base = rng.integers(0, 10_000_000, keys)
    os.makedirs(os.path.join(folder, "offsets"), exist_ok=True)
    os.makedirs(os.path.join(folder, "replicas"), exist_ok=True)
    for replica in range(replicas):
        offsets = base + (rng.random(keys) < 0.01) * rng.integers(1, 5000, keys) * (replica == replicas - 1)
        keep = numpy.ones(keys, dtype=bool) if replica < replicas - 1 or replica == 0 else rng.random(keys) >= 0.001
        table = pyarrow.table({
            "broker_group": groups.take(pyarrow.array(group_index[keep])),
            "broker_id": pyarrow.array(numpy.full(int(keep.sum()), replica, dtype=numpy.int32)),
            "topic": topics.take(pyarrow.array(entry[keep] % 1000)),
            "group": consumers.take(pyarrow.array(entry[keep] // 1000)),
            "queue_id": pyarrow.array((rest[keep] % QUEUES).astype(numpy.int32)),
            "offset": pyarrow.array(offsets[keep]),
        }, schema=OFFSETS_SCHEMA)
        pyarrow.parquet.write_table(table, os.path.join(folder, "offsets", f"part-{replica}.parquet"))
    rows = [(f"broker-{g:02d}", r, "master" if r == 0 else "slave", 0, 10 + r, 1_700_000_000_000, "", f"10.0.{g}.{r}:10911", 0)
            for g in range(BROKER_GROUPS) for r in range(replicas)]
    columns = {name: [row[i] for row in rows] for i, name in enumerate(REPLICAS_SCHEMA.names)}
    pyarrow.parquet.write_table(pyarrow.table(columns, schema=REPLICAS_SCHEMA), os.path.join(folder, "replicas", "part-0.parquet"))


def _jvm_usage(spark) -> tuple[float, int]:
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/status") as handle:
        peak_kib = next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:"))
    return cpu, peak_kib * 1024


def run_once(folder: str, master: str, output: str | None, driver_memory: str | None = None) -> dict:
    """In a fresh process: time the job including session start."""
    from spark_tools import offset_diff_job as job

    started, cpu_started = time.perf_counter(), time.process_time()
    extra = (("spark.driver.memory", driver_memory),) if driver_memory else ()
    config = job.DiffConfig(input_parquet=folder, master=master, output=output, extra_conf=extra)
    session = job.build_session(config)
    with open(os.devnull, "w") as sink:
        code = job.run(config, spark=session, out=sink)
    wall = time.perf_counter() - started
    jvm_cpu, jvm_peak = _jvm_usage(session)
    session.stop()
    driver_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"exit_code": code, "wall_s": wall, "cpu_s": time.process_time() - cpu_started + jvm_cpu,
            "peak_bytes": driver_peak + jvm_peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--keys", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--output", action="store_true", help="also write --output files (detail, plan, plots)")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory for the local session (default 4g, as relaymq offset-diff)")
    parser.add_argument("--workdir", default="/tmp/relaymq-bench-offsets")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        output = os.path.join(args.child, "out") if args.output else None
        print(json.dumps(run_once(args.child, args.master, output, args.driver_memory)))
        return
    print(f"{'R':>2} {'N/replica':>11} {'rows':>11} {'wall_s':>8} {'cpu_s':>8} {'peak_MiB':>9} {'rows/s':>11} exit")
    for keys in args.keys:
        for replicas in args.replicas:
            folder = os.path.join(args.workdir, f"r{replicas}-n{keys}")
            if not os.path.exists(os.path.join(folder, "replicas")):
                generate(folder, replicas, keys)
            command = [sys.executable, __file__, "--child", folder, "--master", args.master] + (["--output"] if args.output else [])
            command += ["--driver-memory", args.driver_memory] if args.driver_memory else []
            env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
            result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout.strip().splitlines()[-1])
            rows = keys * replicas
            print(f"{replicas:>2} {keys:>11,} {rows:>11,} {result['wall_s']:>8.1f} {result['cpu_s']:>8.1f} "
                  f"{result['peak_bytes'] / 2**20:>9.0f} {rows / result['wall_s']:>11,.0f} {result['exit_code']}", flush=True)


if __name__ == "__main__":
    main()
