"""bench/chaos.py's picture of a run: throughput with the faults, each round's gap, the consumers' lag."""
from __future__ import annotations

from pathlib import Path

from tests.support.failover_load import Client


def lag_series(producer: Client, consumers: list[Client], origin: float, width: float = 1.0) -> list[int]:
    """Acknowledged messages not consumed yet, at the end of each ``width`` bin from ``origin``."""
    first_seen: dict[str, tuple[float, float]] = {}  # body -> (acked at, first consumed at)
    for event in producer.snapshot():
        if event["event"] == "ack":
            first_seen[event["body"]] = (event["t"], float("inf"))
    for consumer in consumers:
        for event in consumer.snapshot():
            if event["event"] == "recv" and event["body"] in first_seen:
                acked, consumed = first_seen[event["body"]]
                first_seen[event["body"]] = (acked, min(consumed, event["t"]))
    if not first_seen:
        return []
    end = max(acked for acked, _ in first_seen.values())
    steps = [0] * (int((end - origin) / width) + 2)
    for acked, consumed in first_seen.values():
        steps[max(0, int((acked - origin) / width))] += 1
        if consumed != float("inf"):
            steps[min(len(steps) - 1, max(0, int((consumed - origin) / width)))] -= 1
    series, total = [], 0
    for step in steps:
        total += step
        series.append(total)
    return series


def plot(path: Path, producer: Client, consumers: list[Client], rounds: list[dict], origin: float) -> None:
    """Three panels: acknowledged sends per second with each fault shaded while held (bursts of
    retried sends after a gap are clipped, so the steady rate stays readable over hundreds of
    rounds); each round's longest gap with no acknowledged send, by fault kind; and the
    consumers' lag (acknowledged, not consumed yet) over the run, backlog rounds marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    times = sorted(e["t"] - origin for e in producer.snapshot() if e["event"] == "ack")
    if not times:
        return
    width = 1.0
    counts = [0] * (int(times[-1] / width) + 1)
    for t in times:
        counts[int(t / width)] += 1
    steady = sorted(counts)[int(len(counts) * 0.95)] or 1
    figure, (rate, gaps, lag) = plt.subplots(3, 1, figsize=(14, 10), sharex=True, height_ratios=[3, 2, 2])
    rate.fill_between([i * width for i in range(len(counts))], counts, step="post", color="tab:blue")
    rate.set_ylim(0, steady * 1.6)
    colors: dict[str, object] = {}
    palette = plt.get_cmap("tab20")
    for round_ in rounds:
        color = colors.setdefault(round_["kind"], palette(len(colors) % 20))
        rate.axvspan(round_["start"] - origin, round_["healed"] - origin, color=color, alpha=0.25, linewidth=0)
        if round_.get("held_at") is not None:  # the producer held on purpose: no outage
            rate.axvspan(round_["held_at"] - origin, round_["held_at"] + round_["held_s"] - origin, color="grey",
                         alpha=0.3, linewidth=0)
    for kind, color in colors.items():
        mine = [r for r in rounds if r["kind"] == kind and "longest_gap_s" in r]
        gaps.scatter([r["start"] - origin for r in mine], [r["longest_gap_s"] for r in mine], s=12, color=color,
                     label=f"{kind} (max {max((r['longest_gap_s'] for r in mine), default=0):.1f} s)")
    rate.set_ylabel("acknowledged sends / s")
    rate.set_title(f"RelayMQ chaos: {len(rounds)} rounds; throughput (1 s bins, clipped at 1.6x the 95th "
                   f"percentile) with each fault shaded while held, the producer's holds in grey")
    gaps.set_ylabel("longest gap in the round (s)")
    lags = lag_series(producer, consumers, origin)
    lag.fill_between(range(len(lags)), lags, step="post", color="tab:orange")
    for round_ in rounds:
        if round_.get("backlog") is not None:
            lag.axvline(round_["start"] - origin, color="tab:red", linewidth=0.6, alpha=0.6)
        if round_.get("held_at") is not None:
            lag.axvspan(round_["held_at"] - origin, round_["held_at"] + round_["held_s"] - origin, color="grey",
                        alpha=0.3, linewidth=0)
    lag.set_ylabel("unconsumed (acked,\nnot yet received)")
    lag.set_xlabel("seconds (red lines: backlog rounds start; grey: producer held until the consumers were level)")
    gaps.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
