"""``relaymq offset-diff``: whose consumer offsets win when a master rejoins.

Rules:
- spark_tools is imported only inside the handler (importlib): nothing else in RelayMQ
  imports it, and the broker must not need PySpark to start.
- The options are the job's (spark_tools/offset_diff_job.add_arguments declares the same;
  a test keeps them equal).  ``--snapshot GROUP:BROKER_ID=PATH``, ``--output DIR`` and
  ``--tolerance N`` are a stable interface that scripts rely on.
- The job runs in-process; with no ``--master`` it uses ``local[*]``.
- ``--replica`` fetches live replicas first (services/offset_fetch.py, plain Python with
  timeouts), then runs the job on the fetched parquet; the admin calls are signed as
  ``relaymq admin`` signs them (``--access-key/--secret-key`` or ``RELAYMQ_ACCESS_KEY``/
  ``RELAYMQ_SECRET_KEY``, and ``--cluster-secret-file``/``RELAYMQ_CLUSTER_SECRET_FILE``), which
  a container with ``authorizationEnabled`` requires (a user allowed ``Get`` on the cluster,
  ``Update`` on the groups and topics for ``--apply``); a replica that cannot be fetched
  is an error naming it, never a smaller diff.  ``--snapshot``/``--manifest`` files given
  with it are written into the same parquet (a dead master's files next to its live slaves:
  the diff a pre-online gate needs before the master is restarted).
- ``--apply DIR`` writes a plan: one made from live ``--replica`` fetches through the admin
  API's compare-and-set ``WriteConsumerOffsets`` on each master (services/offset_apply.py,
  no Spark), one made from files by spark_tools/offset_apply.py.
- Exit codes: 0 in sync, 1 tool or input error (a CliError), 2 diverged but safe,
  3 needs a human; ``--gate pre-online``: 0 a rejoin rolls no consumer back, 4 it would.  ``--apply``: 0 applied, 1 unusable plan, 3 needs a human (re-plan).
- Progress goes to stderr, one line per stage with the seconds since start (fetching,
  reading, starting Spark, diffing, writing); ``--quiet`` keeps it silent.  The report
  stays alone on stdout.
- Spark binds to loopback by default with a local master (``SPARK_LOCAL_IP`` and
  ``spark.driver.bindAddress``/``spark.driver.host``, so the driver's ports are not
  reachable from the network and Spark does not warn about the address it picked);
  ``--bind-address`` or an exported ``SPARK_LOCAL_IP`` overrides it.  A cluster master
  (``--master spark://...``) binds where ``--bind-address`` says, else where Spark decides.
"""
from __future__ import annotations

import argparse
import os
import dataclasses
import importlib

DEFAULT_MASTER = "local[*]"
LOOPBACK = "127.0.0.1"
DEFAULT_DRIVER_MEMORY = "4g"  # 10M keys x 3 replicas: 94 s wall with 4g, 221 s with Spark's 1g (bench/)
EXIT_ERROR = 1


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--snapshot", action="append", default=[], metavar="GROUP:BROKER_ID=PATH",
                        help="a consumerOffset.json of one replica (repeatable; broker id 0 is the master; GROUP:ID:ROLE=PATH sets the role)")
    parser.add_argument("--manifest", help="JSON file listing replicas: {\"replicas\": [{brokerGroup, brokerId, role?, path}]}")
    parser.add_argument("--input-parquet", metavar="DIR", help="flat parquet written by the live fetch step")
    parser.add_argument("--output", metavar="DIR", help="write summary.json, detail parquet, plan.csv, plan files and plots")
    parser.add_argument("--tolerance", type=int, default=0, metavar="N", help="a spread of at most N messages counts as in sync")
    parser.add_argument("--top-k", type=int, default=20, metavar="K", help="rows in the top rollbacks table (default 20)")
    parser.add_argument("--master", help=f"Spark master URL (default {DEFAULT_MASTER})")
    parser.add_argument("--shuffle-partitions", type=int, metavar="N", help="spark.sql.shuffle.partitions")
    parser.add_argument("--apply", metavar="PLAN_DIR", help="write a plan made with --output, after re-checking DataVersions")
    parser.add_argument("--gate", choices=("pre-online",), help="pre-online: per consumer group, what a rejoining master "
                        "adopts and what would roll back; exit 4 when a rejoin would roll any consumer back, 0 when none")


def _add_fetch_arguments(parser: argparse.ArgumentParser) -> None:
    """Live replicas: fetched here, before Spark, into --input-parquet's layout."""
    parser.add_argument("--replica", action="append", default=[], metavar="BROKER_GROUP@HOST:PORT",
                        help="fetch one live replica through the broker admin API of its container (repeatable)")
    parser.add_argument("--fetch-dir", metavar="DIR", help="where fetched parquet goes (default: OUTPUT/fetch, or a temporary folder)")
    parser.add_argument("--fetch-timeout-ms", type=int, default=10_000, metavar="MS", help="per replica (default 10000)")
    parser.add_argument("--fetch-concurrency", type=int, default=8, metavar="N", help="replicas fetched at once (default 8)")
    parser.add_argument("--apply-timeout-ms", type=int, default=10_000, metavar="MS",
                        help="--apply of a live plan: deadline of each call to a master (default 10000)")
    parser.add_argument("--bind-address", metavar="ADDRESS", type=_address,
                        help="address the Spark driver binds (default: $SPARK_LOCAL_IP, else 127.0.0.1 with a local master)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    from container.cli import add_credential_arguments
    add_credential_arguments(parser)  # the same keys and environment as relaymq admin
    parser.add_argument("--driver-memory", default=DEFAULT_DRIVER_MEMORY, metavar="SIZE",
                        help=f"JVM heap of the in-process Spark driver (default {DEFAULT_DRIVER_MEMORY}; Spark's own 1g spills at 10M keys)")


def _address(text: str) -> str:
    import ipaddress

    try:
        return str(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IP address") from None


class Progress:
    """``offset-diff [3.2 s]: diffing 3 replicas`` on stderr, one line per stage."""

    def __init__(self, quiet: bool):
        import time

        self.quiet, self.started, self._clock = quiet, time.monotonic(), time.monotonic

    def __call__(self, stage: str) -> None:
        if not self.quiet:
            import sys

            print(f"offset-diff [{self._clock() - self.started:.1f} s]: {stage}", file=sys.stderr, flush=True)


def spark_binding(bind_address: str | None, master: str, environ) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """(SPARK_LOCAL_IP to export or None, Spark conf) for the driver's address: the flag, else an
    exported SPARK_LOCAL_IP, else loopback for a local master; a cluster master without either
    keeps Spark's own choice."""
    address = bind_address or environ.get("SPARK_LOCAL_IP") or (LOOPBACK if master.startswith("local") else None)
    if address is None:
        return None, ()
    return address, (("spark.driver.bindAddress", address), ("spark.driver.host", address))


def _fetch(args: argparse.Namespace) -> str:
    """Fetch --replica targets into flat parquet; return the folder for --input-parquet."""
    import tempfile
    import time

    from container.cli import CliError
    from services.offset_fetch import AdminReplicaSource, FetchConfig, FetchError, ReplicaTarget, fetch_all, write_parquet

    if args.input_parquet:
        raise CliError("offset-diff: --replica cannot be combined with --input-parquet", EXIT_ERROR)
    try:
        config = FetchConfig(concurrency=args.fetch_concurrency, timeout_ms=args.fetch_timeout_ms).validate()
        targets = [ReplicaTarget.parse(text) for text in args.replica]
        files = _snapshot_files(args)
        args.progress(f"fetching {len(targets)} live replicas" + (f", reading {len(files)} files" if files else ""))
        result = fetch_all(targets, AdminReplicaSource(config), config)
        folder = args.fetch_dir or (os.path.join(args.output, "fetch") if args.output else tempfile.mkdtemp(prefix="relaymq-offset-fetch-"))
        return write_parquet(result, folder, int(time.time() * 1000), files)
    except FetchError as exc:
        raise CliError(f"offset-diff: {exc}{_credentials_hint(str(exc))}", EXIT_ERROR) from None


def _credentials_hint(text: str) -> str:
    from services.admin.client import CALLER_CREDENTIALS

    if "UNAUTHENTICATED" in text and CALLER_CREDENTIALS.get() is None:
        return (" (the container has authorization on: sign with --access-key K --secret-key S, or RELAYMQ_ACCESS_KEY "
                "and RELAYMQ_SECRET_KEY)")
    return ""


def _snapshot_files(args: argparse.Namespace) -> list:
    """Files given next to --replica, as FileReplica rows for the fetch folder (then read from there)."""
    from services.offset_fetch import FileReplica

    inputs = importlib.import_module("spark_tools.offset_inputs")
    specs = [inputs.parse_snapshot_spec(text) for text in args.snapshot or ()]
    if args.manifest:
        specs += inputs.read_manifest(args.manifest)
    files = []
    for spec in specs:
        replica, table = inputs.read_snapshot(spec, 1 << 30)
        files.append(FileReplica(replica.broker_group, replica.broker_id, replica.role, table, replica.source,
                                 replica.fetched_at_ms))
    args.snapshot, args.manifest = [], None
    return files


def _apply_live(args: argparse.Namespace) -> int | None:
    """--apply of a plan made from live replicas (no Spark); None for a plan made from files."""
    import sys

    from container.cli import CliError
    from services.offset_apply import AdminOffsetApi, LiveApplyError, apply_live_plan, read_live_plan

    if args.apply_timeout_ms < 1:
        raise CliError(f"offset-diff: --apply-timeout-ms {args.apply_timeout_ms}: must be at least 1", EXIT_ERROR)
    try:
        plan = read_live_plan(args.apply)
        return None if plan is None else apply_live_plan(plan, AdminOffsetApi(), args.apply_timeout_ms, out=sys.stdout)
    except LiveApplyError as exc:
        raise CliError(f"offset-diff: {exc}{_credentials_hint(str(exc))}", EXIT_ERROR) from None


def _sign_admin_calls(args: argparse.Namespace) -> None:
    """The live fetch and apply call the masters' admin ports: sign them as ``relaymq admin``
    does (--access-key/--secret-key or RELAYMQ_ACCESS_KEY/RELAYMQ_SECRET_KEY, and the cluster
    secret); a bad combination is an input error, exit 1 (2 means "diverged" here)."""
    from container.cli import CliError
    from container.cli_admin import set_caller_credentials

    try:
        set_caller_credentials(args)
    except CliError as exc:
        raise CliError(f"offset-diff: {exc}", EXIT_ERROR) from None


def _handle(args: argparse.Namespace) -> int:
    from container.cli import CliError

    args.progress = Progress(args.quiet)
    _sign_admin_calls(args)
    if args.apply and args.gate:
        raise CliError("offset-diff: --gate checks a rejoin before it happens; it does not combine with --apply", EXIT_ERROR)
    if args.apply:
        applied = _apply_live(args)
        if applied is not None:
            return applied
    try:
        job = importlib.import_module("spark_tools.offset_diff_job")
        model = importlib.import_module("spark_tools.offset_diff_model")
    except ImportError as exc:
        raise CliError(f"offset-diff needs the spark extra (pip install 'relaymq[spark]'): {exc}", EXIT_ERROR) from None
    try:
        if args.apply:
            import sys

            return importlib.import_module("spark_tools.offset_apply").apply_plan(args.apply, out=sys.stdout)
        if args.replica:
            args.input_parquet = _fetch(args)
        config = job.config_from_args(args, default_master=DEFAULT_MASTER)
        if args.driver_memory:
            config = dataclasses.replace(config, extra_conf=config.extra_conf + (("spark.driver.memory", args.driver_memory),))
        return _run_bound(job, config, args)
    except model.OffsetDiffInputError as exc:
        raise CliError(f"offset-diff: {exc}", EXIT_ERROR) from None


def _run_bound(job, config, args: argparse.Namespace) -> int:
    """Run with the driver's address in the config and SPARK_LOCAL_IP exported for the JVM the
    session launches (the environment is restored afterwards)."""
    address, conf = spark_binding(args.bind_address, config.master or DEFAULT_MASTER, os.environ)
    before = os.environ.get("SPARK_LOCAL_IP")
    if address is not None:
        os.environ["SPARK_LOCAL_IP"] = address
    try:
        return job.run(dataclasses.replace(config, extra_conf=config.extra_conf + conf), progress=args.progress)
    finally:
        if before is None:
            os.environ.pop("SPARK_LOCAL_IP", None)
        else:
            os.environ["SPARK_LOCAL_IP"] = before


def register(subparsers, admin_subparsers) -> None:
    parser = subparsers.add_parser(
        "offset-diff",
        help="compare replicas' consumer offsets before a master rejoins (Spark)",
        description="Per broker group and per (consumer group, topic, queue): how far replicas' committed offsets "
                    "disagree, what RocketMQ's pre-online reverse sync would pick, the rollback each choice causes, "
                    "and a safe merged plan. Exit 0 in sync, 1 error, 2 diverged but safe, 3 needs a human; with "
                    "--gate pre-online: 0 when a rejoin rolls no consumer back, 4 when it would.",
    )
    _add_arguments(parser)
    _add_fetch_arguments(parser)
    parser.set_defaults(handler=_handle)
