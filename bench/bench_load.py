"""The highest rate conf/controller-mode sustains with the official Python client, NORMAL and FIFO.

On the deployment exactly as shipped (bench/deployment.py: the nameserver with the embedded
controller, two containers, SYNC_FLUSH, allAckInSyncStateSet), for NORMAL messages (topic on
both broker groups), FIFO messages (8 message groups, each sent one at a time, topic on both
groups) and the two mixed as bench/chaos.py mixes them (two thirds NORMAL, one third FIFO,
one consumer each), it runs the official client's steady load (tests/support/official_client/
steady.py: a producer and ``--consumers`` SimpleConsumers acking each batch in parallel) at a
rate for ``--step-s`` seconds and calls the rate sustained when
- at least 95% of the target was acknowledged, and
- the consumers kept up: at the end of the step fewer than 2 s of traffic waited unconsumed,
  and no more than at the step's middle (a lag that grows is not sustained).
Rates double from ``--start`` until one is not sustained, then a bisection (``--refine``
steps) between the last sustained and the first not.  1 KiB messages.

    .venv/bin/python bench/bench_load.py                 # NORMAL, FIFO and mixed
    .venv/bin/python bench/bench_load.py --kinds normal --step-s 30

It prints every step (target, acknowledged/s, consumed/s, lag at mid and end, and each
container's event-loop lag over the step from ``relaymq_event_loop_lag_seconds``) and the
sustained rate per kind.  bench/chaos.py's default rates are a stated fraction of these.
Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.deployment import Deployment, lag_summary  # noqa: E402
from tests.support.failover_load import Backlog, Client, wait_started  # noqa: E402

FIFO_GROUPS = 8


def prepare(deployment: Deployment) -> None:
    deployment.admin_retrying("update-topic", "-t", "load-normal", "--type", "NORMAL", "--queues", "4")
    deployment.admin_retrying("update-topic", "-t", "load-fifo", "--type", "FIFO", "--queues", "4")
    deployment.admin_retrying("update-group", "-g", "load-normal-group")
    deployment.admin_retrying("update-group", "-g", "load-fifo-group", "--fifo")


def step(deployment: Deployment, kind: str, rate: int, args, logs: Path) -> dict:
    """One rate for ``args.step_s``: what was acknowledged and consumed, and the lag."""
    endpoint = deployment.endpoints[-1]
    normal = {"normal": rate, "fifo": 0, "mixed": round(rate * 2 / 3)}[kind]
    fifo = rate - normal
    sending, receiving = [], []
    if normal:
        sending += ["--topic", "load-normal", "--rate", str(normal)]
        receiving.append(["--topic", "load-normal", "--group", "load-normal-group"])
    if fifo:
        sending += ["--fifo-topic", "load-fifo", "--groups", str(FIFO_GROUPS), "--fifo-rate", str(fifo / FIFO_GROUPS)]
        receiving.append(["--fifo-topic", "load-fifo", "--group", "load-fifo-group"])
    consumers = [Client("consume", "--endpoint", endpoint, *receive, "--seconds", "100000",
                        log_path=logs / f"{kind}-{rate}-consumer-{i}-{j}.log")
                 for i in range(args.consumers) for j, receive in enumerate(receiving)]
    wait_started(*consumers, timeout_s=60)
    producer = Client("produce", "--endpoint", endpoint, *sending, "--seconds", str(args.step_s),
                      log_path=logs / f"{kind}-{rate}-producer.log")
    backlog = Backlog([producer], consumers)
    try:
        wait_started(producer, timeout_s=60)
        lag_before = deployment.loop_lag_buckets()
        began = time.monotonic()
        time.sleep(args.step_s / 2)
        middle = backlog.unconsumed()
        time.sleep(max(0.0, began + args.step_s - time.monotonic()))
        end = backlog.unconsumed()
        loop_lag = [lag_summary(b, a) for b, a in zip(lag_before, deployment.loop_lag_buckets())]
        acked_rate = backlog.acked / args.step_s
        consumed_rate = len(backlog.consumed) / args.step_s
    finally:
        producer.stop()
        for consumer in consumers:
            consumer.stop()
    sustained = acked_rate >= 0.95 * rate and end < 2 * rate and end <= middle + rate / 2
    return {"kind": kind, "target": rate, "acked_s": round(acked_rate), "consumed_s": round(consumed_rate),
            "lag_mid": middle, "lag_end": end, "sustained": sustained, "loop_lag": loop_lag}


def search(deployment: Deployment, kind: str, args, logs: Path) -> tuple[int, list[dict]]:
    steps, good, bad, rate = [], 0, None, args.start
    while bad is None and rate <= args.max_rate:
        steps.append(step(deployment, kind, rate, args, logs))
        print(json.dumps(steps[-1]), file=sys.stderr, flush=True)
        if steps[-1]["sustained"]:
            good, rate = rate, rate * 2
        else:
            bad = rate
    for _ in range(args.refine if bad is not None else 0):
        rate = (good + bad) // 2
        if bad - good < max(20, good // 20):
            break
        steps.append(step(deployment, kind, rate, args, logs))
        print(json.dumps(steps[-1]), file=sys.stderr, flush=True)
        good, bad = (rate, bad) if steps[-1]["sustained"] else (good, rate)
    return good, steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default="normal,fifo,mixed")
    parser.add_argument("--start", type=int, default=100, help="first rate tried (msg/s)")
    parser.add_argument("--max-rate", type=int, default=20_000)
    parser.add_argument("--step-s", type=float, default=20.0)
    parser.add_argument("--refine", type=int, default=3, help="bisection steps after the first rate not sustained")
    parser.add_argument("--consumers", type=int, default=1, help="SimpleConsumer processes per consumer group")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    if not kinds or set(kinds) - {"normal", "fifo", "mixed"}:
        parser.error("--kinds takes normal, fifo and/or mixed")
    if args.start < 1 or args.step_s < 4 or args.consumers < 1 or args.refine < 0:
        parser.error("--start and --consumers must be positive, --step-s at least 4, --refine at least 0")
    work = Path(tempfile.mkdtemp(prefix="bench-load-"))
    print(f"# bench_load: conf/controller-mode, official Python client, 1 KiB, {args.step_s:g} s steps, "
          f"{args.consumers} consumer(s); logs in {work}", file=sys.stderr)
    result = {}
    for kind in kinds:
        deployment = Deployment("controller-mode", work / kind).start()
        try:
            prepare(deployment)
            result[kind] = search(deployment, kind, args, work)
        finally:
            deployment.stop()
    if args.json:
        print(json.dumps({kind: {"sustained": good, "steps": steps} for kind, (good, steps) in result.items()}, indent=1))
    else:
        for kind, (good, steps) in result.items():
            print(f"{kind}: sustained {good} msg/s (steps: " + ", ".join(
                f"{s['target']}{'' if s['sustained'] else ' no'}" for s in steps) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
