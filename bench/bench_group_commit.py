"""SYNC_FLUSH single sends by the number of producers, with and without the group-commit window.

Starts one container per setting (bench_broker's, SYNC_FLUSH; ``--setting NAME:KEY=VALUE,...``
adds broker keys, by default ``window0`` with ``groupCommitWindowMicros=0`` and ``default``),
then for each ``--producers`` count drives every container in turn with bench_broker's client
(one 1 KiB message per SendMessage, that many in flight), ``--rounds`` times, alternating, so
each setting meets the same minutes of this VM.  Prints msg/s and the container's CPU per
1000 messages per round, then the medians.  The window pays when many sends are in flight
together and costs when few are (store/group_commit.py).

    .venv/bin/python bench/bench_group_commit.py
    .venv/bin/python bench/bench_group_commit.py --producers 2 16 --rounds 3 --seconds 3

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

import bench.bench_broker as bb  # noqa: E402


def _setting(text: str) -> tuple[str, dict[str, str]]:
    name, _, keys = text.partition(":")
    pairs = [pair for pair in keys.split(",") if pair]
    if not name or any("=" not in pair for pair in pairs):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME or NAME:KEY=VALUE[,KEY=VALUE]")
    return name, dict(pair.split("=", 1) for pair in pairs)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be at least 1")
    return value


async def drive(targets: dict[str, tuple[str, int, str]], producers: list[int], rounds: int, seconds: float) -> dict:
    channels = {name: grpc.aio.insecure_channel(endpoint) for name, (endpoint, _, _) in targets.items()}
    send = {name: bb.senders(channels[name], topic, 1) for name, (_, _, topic) in targets.items()}
    for name in targets:  # connections up, caches warm
        await bb.closed_loop(send[name], 4, 0.5)
    figures: dict = {}
    for count in producers:
        for index in range(rounds):
            for name, (_, pid, _) in targets.items():
                run = await bb.closed_loop(send[name], count, seconds, pid=pid)
                figures.setdefault((count, name), []).append(run)
                print(f"producers {count:>3} round {index + 1} {name:<10} {run['msg_s']:>8.0f} msg/s "
                      f"{run['cpu_ms_1k']:>7.0f} ms CPU/1k  p50 {run['p50_ms']:.2f} ms", flush=True)
    for channel in channels.values():
        await channel.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--producers", type=_positive, nargs="+", default=[1, 2, 4, 16], help="sends in flight")
    parser.add_argument("--setting", type=_setting, action="append", default=[],
                        help="NAME[:KEY=VALUE,...] broker keys of one container (default: window0 and default)")
    parser.add_argument("--rounds", type=_positive, default=2)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    if not args.seconds > 0:
        parser.error(f"--seconds {args.seconds}: must be positive")
    settings = dict(args.setting or [("window0", {"groupCommitWindowMicros": "0"}), ("default", {})])
    print(f"# bench_group_commit: SYNC_FLUSH, 1 KiB single sends, producers {args.producers}, "
          f"{args.rounds} round(s) of {args.seconds} s, settings {settings}")
    containers, targets = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for index, (name, keys) in enumerate(settings.items()):
                container, endpoint = bb.start_container(f"bench-gc-{index}", "SYNC_FLUSH", Path(tmp) / name, keys)
                containers.append(container)
                targets[name] = (endpoint, container.process.pid, f"bench-gc-{index}")
            figures = asyncio.run(drive(targets, args.producers, args.rounds, args.seconds))
        finally:
            for container in containers:
                container.stop()
    print(f"{'producers':>9} {'setting':<10} {'msg/s':>8} {'CPU ms/1k':>10}  (medians)")
    for (count, name), runs in figures.items():
        print(f"{count:>9} {name:<10} {statistics.median(r['msg_s'] for r in runs):>8.0f} "
              f"{statistics.median(r['cpu_ms_1k'] for r in runs):>10.0f}")


if __name__ == "__main__":
    main()
