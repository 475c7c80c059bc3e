"""The offset diff job: ``spark-submit spark_tools/offset_diff_job.py ...`` or ``relaymq offset-diff``.

Rules:
- The master is never hard-coded: ``spark-submit --master`` decides; only ``--master`` (or
  ``relaymq offset-diff``'s default, ``local[*]``) sets one.  Driver memory belongs on the
  launcher.
- Exit codes: 0 in sync (within ``--tolerance``), 1 tool or input error (a crash never looks
  in sync), 2 diverged but the safe plan is conflict-free, 3 needs a human.  With
  ``--gate pre-online``: 0 when a rejoin rolls no consumer back, 4 when it would, 1 error.
- Inputs are validated before the session starts; errors name the file or flag.
- Only the driver imports RelayMQ code: executors run built-in Spark functions only, so a
  cluster needs our packages on the driver alone (``--py-files`` in cluster deploy mode).
- Time is read once, here (``now_ms``), for the merged DataVersion and the summary stamp.
- ``progress(stage)`` (optional) is told each stage as it starts: reading the inputs,
  starting Spark, diffing, writing; ``relaymq offset-diff`` prints them on stderr, so the
  ~20 s a JVM takes to start are not silent.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spark_tools.offset_diff_model import EXIT_ERROR, GATES, OffsetDiffInputError  # noqa: E402
from spark_tools.offset_inputs import SnapshotSpec, parse_snapshot_spec, read_manifest  # noqa: E402


SPARK_DEFAULT_SHUFFLE_PARTITIONS = "200"


@dataclass(frozen=True)
class DiffConfig:
    """Every limit of the job, with its unit; defaults documented in docs/offset-diff.md."""

    snapshots: tuple[SnapshotSpec, ...] = ()
    input_parquet: str | None = None
    output: str | None = None
    tolerance: int = 0  # messages: a spread up to this counts as in sync
    top_k: int = 20  # rows in the top rollbacks table
    one_sided_limit: int = 20  # one-sided keys listed on the console
    master: str | None = None  # Spark master URL; None lets spark-submit decide
    file_bytes_max: int = 1 << 30  # bytes per consumerOffset.json
    shuffle_partitions: int | None = None  # None: 2 per core unless spark.sql.shuffle.partitions was set
    app_name: str = "relaymq-offset-diff"
    extra_conf: tuple[tuple[str, str], ...] = field(default=())
    gate: str | None = None  # "pre-online": exit 4 when a rejoin would roll any consumer back


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options; container/cli_offset_diff.py declares the same ones (a test checks)."""
    parser.add_argument("--snapshot", action="append", default=[], metavar="GROUP:BROKER_ID=PATH",
                        help="a consumerOffset.json of one replica (repeatable; broker id 0 is the master; GROUP:ID:ROLE=PATH sets the role)")
    parser.add_argument("--manifest", help="JSON file listing replicas: {\"replicas\": [{brokerGroup, brokerId, role?, path}]}")
    parser.add_argument("--input-parquet", metavar="DIR", help="flat parquet written by the live fetch step")
    parser.add_argument("--output", metavar="DIR", help="write summary.json, detail parquet, plan.csv, plan files and plots")
    parser.add_argument("--tolerance", type=int, default=0, metavar="N", help="a spread of at most N messages counts as in sync")
    parser.add_argument("--top-k", type=int, default=20, metavar="K", help="rows in the top rollbacks table (default 20)")
    parser.add_argument("--master", help="Spark master URL (default: spark-submit's, or local[*] from relaymq)")
    parser.add_argument("--shuffle-partitions", type=int, metavar="N", help="spark.sql.shuffle.partitions")
    parser.add_argument("--apply", metavar="PLAN_DIR", help="write a plan made with --output, after re-checking DataVersions")
    parser.add_argument("--gate", choices=GATES, help="pre-online: per consumer group, what a rejoining master adopts and "
                        "what would roll back; exit 4 when a rejoin would roll any consumer back, 0 when none")


def config_from_args(args: argparse.Namespace, default_master: str | None = None) -> DiffConfig:
    specs = [parse_snapshot_spec(text) for text in args.snapshot or ()]
    if args.manifest:
        specs += read_manifest(args.manifest)
    if bool(specs) == bool(args.input_parquet):
        raise OffsetDiffInputError("give replicas either with --snapshot/--manifest or with --input-parquet (exactly one of them)")
    for name, value, low in (("--tolerance", args.tolerance, 0), ("--top-k", args.top_k, 1), ("--shuffle-partitions", args.shuffle_partitions, 1)):
        if value is not None and value < low:
            raise OffsetDiffInputError(f"{name} {value}: must be at least {low}")
    if args.input_parquet and not os.path.isdir(args.input_parquet):
        raise OffsetDiffInputError(f"--input-parquet {args.input_parquet}: not a directory")
    return DiffConfig(snapshots=tuple(specs), input_parquet=args.input_parquet, output=args.output, tolerance=args.tolerance,
                      top_k=args.top_k, master=args.master or default_master, shuffle_partitions=args.shuffle_partitions,
                      gate=args.gate)


def build_session(config: DiffConfig):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(config.app_name)
    if config.master:
        builder = builder.master(config.master)
    builder = (builder.config("spark.sql.adaptive.enabled", "true").config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.ui.showConsoleProgress", "false"))
    if config.shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
    for key, value in config.extra_conf:
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if not config.shuffle_partitions and session.conf.get("spark.sql.shuffle.partitions") == SPARK_DEFAULT_SHUFFLE_PARTITIONS:
        # 200 tiny partitions cost 4x the wall time at 100k keys on 2 cores (bench/); a couple per core is enough
        session.conf.set("spark.sql.shuffle.partitions", str(max(2, 2 * session.sparkContext.defaultParallelism)))
    if session.conf.get("spark.sql.files.minPartitionNum", None) is None:
        # one input file per replica made one scan task per replica: 3 tasks on 2 cores left a
        # core idle for a third of the scan; splitting at row groups evens the waves
        session.conf.set("spark.sql.files.minPartitionNum", str(8 * session.sparkContext.defaultParallelism))
    return session


def _describe_start(config: DiffConfig) -> str:
    bind = dict(config.extra_conf).get("spark.driver.bindAddress") or os.environ.get("SPARK_LOCAL_IP")
    where = f", driver bound to {bind}" if bind else ""
    master = config.master or "the launcher's master"
    return f"starting Spark ({master}{where})"


def run(config: DiffConfig, spark=None, now_ms: int | None = None, out=None, progress=None) -> int:
    """Load, diff, report, write; return the exit code.  Uses ``spark`` when given."""
    from spark_tools.offset_diff_run import execute, read_snapshots

    progress = progress or (lambda stage: None)
    if config.snapshots:
        progress(f"reading {len(config.snapshots)} snapshot files")
    snapshots = read_snapshots(config) if config.snapshots else None  # bad files fail before the JVM starts
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    try:
        if spark is None:
            progress(_describe_start(config))
        session = spark or build_session(config)
    except Exception as exc:  # no Java, a bad master URL, a port clash: one line, exit 1
        lines = str(exc).strip().splitlines()
        raise OffsetDiffInputError(f"cannot start Spark: {lines[0] if lines else type(exc).__name__}") from None
    return execute(session, config, now_ms, out or sys.stdout, snapshots, progress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="offset_diff_job.py", description="Spark offset diff across replicas of RelayMQ / RocketMQ broker groups")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        if args.apply and args.gate:
            raise OffsetDiffInputError("--gate checks a rejoin before it happens; it does not combine with --apply")
        if args.apply:
            from spark_tools.offset_apply import apply_plan

            return apply_plan(args.apply, out=sys.stdout)
        return run(config_from_args(args))
    except OffsetDiffInputError as exc:
        print(f"offset-diff: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
