"""Chaos harness: a real controller-mode cluster, the official client, one fault per round.

``python bench/chaos.py --runs N --seed S [--kinds k1,k2] [--json] [--out DIR]``

Starts three standalone controllers, a nameserver and two containers (each hosting a replica
of broker-a and broker-b: SYNC_FLUSH, allAckInSyncStateSet; tests/support/controller_cluster),
the official Python client producing NORMAL messages at ``--rate`` and FIFO messages at
``--fifo-rate`` over ``--fifo-groups`` message groups, and two consumers, in subprocesses
(tests/support/failover_load).  Then ``N`` rounds of each fault kind (bench/chaos_faults.py)
in an order drawn from the seed: inject, hold, heal, wait until both groups have a master and
a SyncStateSet of two again, then until the consumers are level (acknowledged minus consumed
under 2 s of traffic; each round reports how far behind they were and how long leveling
took).  Every ``--backlog-every``-th round is a backlog round: the consumers pause until
``--backlog`` messages are queued, then resume as the fault is injected, so a backlog drains
through the fault.  At the end it drains and checks:

* every acknowledged message consumed at least once (lost), duplicates, FIFO order per
  message group (reordered), the longest time without an acknowledged send per round;
* consumer offsets never roll back (consumer-progress after every round, per queue);
* at most one master per group per epoch (the controller's view after every round, and
  every replica's epoch file at the end: one epoch, one start offset);
* ``relaymq admin consumer-progress`` shows lag 0 for both groups (what is not consumed
  by then counts as lost).

Why the defaults (200 NORMAL and 100 FIFO a second): bench/bench_load.py measures what the
controller-mode deployment sustains with the official client; the harness runs at a stated
fraction of it, leaving room for the faults and the backlogs to be caught up.  The FIFO topic
lives on broker-a only: a FIFO producer whose route lost broker-a's master for a moment moves
message groups to broker-b's queues, a reorder that issue 24 (defect 1) is about.

It prints a table per fault kind and writes ``DIR/chaos.png`` (acknowledged sends per second,
faults shaded; each round's longest gap; the consumers' lag over the run) and ``DIR/chaos.json``.  Exit status 1 when anything acknowledged was lost or
an offset rolled back.  The full disk, the slow disk and the network partition need the
sandbox of bench/chaos_env.py (root: network namespaces, loop-device filesystems, blkio
cgroups); without it the cluster runs on 127.0.0.1 and those kinds are skipped.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import signal
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import chaos_env, chaos_faults  # noqa: E402
from bench.chaos_plot import plot  # noqa: E402
from tests.support.controller_cluster import BROKERS, ControllerModeCluster  # noqa: E402
from tests.support.failover_load import Backlog, Client, drain, longest_gap, stop_together, wait_started  # noqa: E402


def start_load(cluster: ControllerModeCluster, logs: Path, args: argparse.Namespace) -> tuple[Client, list[Client]]:
    """NORMAL at ``--rate``; FIFO at ``--fifo-rate`` in all, spread over ``--fifo-groups`` message
    groups (each sent one at a time, as a FIFO application does)."""
    endpoint = cluster.endpoint(1)
    producer = Client("produce", "--endpoint", endpoint, "--topic", "normal", "--fifo-topic", "fifo", "--rate",
                      str(args.rate), "--fifo-rate", str(args.fifo_rate / args.fifo_groups), "--groups",
                      str(args.fifo_groups), "--seconds", "100000", log_path=logs / "producer.log")
    consumers = [Client("consume", "--endpoint", endpoint, "--topic", "normal", "--group", "normal-group",
                        "--seconds", "100000", log_path=logs / "consumer-normal.log"),
                 Client("consume", "--endpoint", endpoint, "--fifo-topic", "fifo", "--group", "fifo-group",
                        "--seconds", "100000", log_path=logs / "consumer-fifo.log")]
    wait_started(producer, *consumers, timeout_s=60)
    return producer, consumers


def healthy(cluster: ControllerModeCluster) -> bool:
    for broker in BROKERS:
        view = cluster.view(broker)
        if view is None or view.master_broker_id <= 0 or len(view.sync_state_set) < 2:
            return False
    return True


def wait_healthy(cluster: ControllerModeCluster, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if healthy(cluster):
            return True
        time.sleep(0.2)
    return False


RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ")   # a log record's first line
ELECTION = re.compile(r"applied election at index \d+: (?P<broker>\S+) master (?P<master>\d+) epoch (?P<epoch>\d+)")


class Checks:
    """What is checked between rounds: masters per epoch, consumer offsets per queue."""

    def __init__(self) -> None:
        self.masters: dict[tuple[str, int], str] = {}
        self.offsets: dict[tuple, int] = {}
        self.violations: list[str] = []
        self.rollbacks = 0
        self.epoch_entries = 0
        self.elections_logged = 0
        self.tracebacks: dict[str, int] = {}

    def views(self, cluster: ControllerModeCluster) -> None:
        for broker in BROKERS:
            view = cluster.view(broker)
            if view is None or view.master_broker_id <= 0:
                continue
            key = (broker, view.master_epoch)
            known = self.masters.setdefault(key, view.master_address)
            if known != view.master_address:
                self.violations.append(f"{broker} epoch {view.master_epoch}: masters {known} and {view.master_address}")

    def consumer_offsets(self, cluster: ControllerModeCluster, after: str = "") -> None:
        for group, topic in (("normal-group", "normal"), ("fifo-group", "fifo")):
            try:
                done = cluster.admin("consumer-progress", "-g", group, "-t", topic, "--json")
            except AssertionError:
                continue  # not answerable now (a container is down): the next round reads it
            for row in _rows(json.loads(done.stdout)):
                key = (group, row.get("topic"), row.get("brokerName"), row.get("queueId"))
                offset = row.get("consumerOffset")
                # what consumers are served from: a master's table.  A slave's row (the group's
                # master not registered at that moment) is its copy as of its last snapshot
                # (flushConsumerOffsetInterval), behind by design, not a rollback
                if not isinstance(offset, int) or offset < 0 or row.get("source") != "master":
                    continue
                if offset < self.offsets.get(key, -1):
                    self.rollbacks += 1
                    self.violations.append(f"consumer offset {key} rolled back {self.offsets[key]} -> {offset}{after}")
                self.offsets[key] = max(offset, self.offsets.get(key, -1))

    def lag_left(self, cluster: ControllerModeCluster, timeout_s: float = 30.0) -> int | None:
        """The consumer groups' lag on the masters once drained (consumer-progress); its last acks
        may still be on their way, so it is read until 0 or ``timeout_s``.  None: not answerable."""
        deadline, lag = time.monotonic() + timeout_s, None
        while True:
            try:
                lag = sum(max(0, row.get("lag", 0)) for group, topic in (("normal-group", "normal"), ("fifo-group", "fifo"))
                          for row in _rows(json.loads(cluster.admin("consumer-progress", "-g", group, "-t", topic,
                                                                    "--json").stdout))
                          if row.get("source") == "master")
            except (AssertionError, ValueError):
                lag = None
            if lag == 0 or time.monotonic() > deadline:
                if lag:
                    self.violations.append(f"consumer-progress shows lag {lag} after the drain")
                return lag
            time.sleep(1.0)

    def controller_logs(self, logs: list[Path]) -> None:
        """Every election each controller member applied (its log, replays after restarts
        included): one master per (group, epoch) across all of them."""
        masters: dict[tuple[str, int], set[int]] = defaultdict(set)
        for path in (p for p in logs if p.exists()):
            for found in ELECTION.finditer(path.read_text(errors="replace")):
                masters[(found["broker"], int(found["epoch"]))].add(int(found["master"]))
        self.elections_logged = len(masters)
        for (broker, epoch), ids in sorted(masters.items()):
            if len(ids) > 1:
                self.violations.append(f"{broker} epoch {epoch}: the controllers' logs elect masters {sorted(ids)}")

    def log_tracebacks(self, logs: list[Path]) -> None:
        """Tracebacks the processes logged, by the line that introduced them (an operator reads a
        traceback as a bug: a fault the cluster handles on purpose should log a sentence)."""
        for path in (p for p in logs if p.exists()):
            head, counted = "", True
            for line in path.read_text(errors="replace").splitlines():
                if RECORD.match(line):
                    head, counted = RECORD.sub("", line)[:160], False
                elif line.startswith("Traceback (most recent call last)") and not counted:
                    self.tracebacks[head] = self.tracebacks.get(head, 0) + 1
                    counted = True   # a chained exception is one record

    def epoch_files(self, cluster: ControllerModeCluster) -> None:
        for broker in BROKERS:
            try:
                document = json.loads(cluster.admin("get-broker-epoch", "--broker", broker, "--json").stdout)
            except (AssertionError, ValueError):
                self.violations.append(f"{broker}: get-broker-epoch failed")
                continue
            starts: dict[int, set[int]] = defaultdict(set)
            for row in _rows(document, "epoch"):
                starts[row["epoch"]].add(row.get("startOffset"))
                self.epoch_entries += 1
            for epoch, found in starts.items():
                if len(found) > 1:
                    self.violations.append(f"{broker} epoch {epoch} starts at {sorted(found)} on different replicas")


def _rows(document, key: str = "consumerOffset"):
    """Every dict in ``document`` that has ``key`` (the admin JSON nests them per broker)."""
    if isinstance(document, dict):
        if key in document:
            yield document
        for value in document.values():
            yield from _rows(value, key)
    elif isinstance(document, list):
        for value in document:
            yield from _rows(value, key)


def wait_acks(producer: Client, since: float, timeout_s: float) -> bool:
    """Sends are acknowledged again (so a slow recovery is charged to its own round)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(e["event"] == "ack" and e["t"] > since for e in producer.snapshot()):
            return True
        time.sleep(0.1)
    return False


class Stop:
    """A stop asked for by a signal: the first SIGTERM, SIGHUP or Ctrl-C ends the rounds after
    the one under way (its fault healed at once), so the run still drains and checks; a second
    one raises KeyboardInterrupt where the harness is (the cluster and the sandbox are still
    removed; no verdict).  The first one raises nothing: raised wherever the harness was (in
    the middle of its in-process gRPC calls too), it once killed the harness with glibc's
    "corrupted double-linked list" before it could report."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.why = ""

    def __call__(self, signum, _frame) -> None:
        name = signal.Signals(signum).name
        if self.event.is_set():
            raise KeyboardInterrupt(name)
        self.why = name
        self.event.set()


STOP = Stop()


PREFERRED = {"broker-a": 0, "broker-b": 1}  # the container whose replica starts as each group's master


def rebalance(cluster: ControllerModeCluster) -> list[str]:
    """Move each group's master back to its preferred container when the replica there is in
    the SyncStateSet (``relaymq admin elect-master``, as an operator would).  Why: after a
    failover one container serves both groups, and one container (one event loop) carries
    about half of what two do (bench/bench_load.py --one-container), less than the harness's
    load; its consumers then fall behind for good.  Returns the moves made."""
    moved = []
    for broker, index in PREFERRED.items():
        view = cluster.view(broker)
        if view is None or cluster.master_container(broker) in (None, index):
            continue
        suffix = f":{cluster.containers[index].admin_port}"
        target = next((bid for bid, address in view.members.items() if address.endswith(suffix)), None)
        if target is None or target not in view.sync_state_set:
            continue
        done = cluster.containers[index].admin("elect-master", "--controller", cluster.controller_addr, "--broker",
                                               broker, "--broker-id", str(target))
        if done.returncode == 0:
            moved.append(f"{broker} -> container {index + 1}")
    return moved


def recover(cluster: ControllerModeCluster, producer: Client) -> tuple[bool, list[str]]:
    """After a heal: both groups healthy, sends acknowledged, masters back where they started."""
    recovered = wait_healthy(cluster, 60) and wait_acks(producer, time.monotonic(), 30)
    moved = rebalance(cluster) if recovered else []
    if moved:
        recovered = wait_healthy(cluster, 60) and wait_acks(producer, time.monotonic(), 30)
    return recovered, moved


def pause_consumers(consumers: list[Client], paused: bool) -> None:
    for consumer in consumers:
        if consumer.process.poll() is None:
            consumer.process.send_signal(signal.SIGUSR1 if paused else signal.SIGUSR2)


def build_backlog(consumers: list[Client], backlog: Backlog, size: int, timeout_s: float = 120) -> int:
    """Pause the consumers until ``size`` acknowledged messages wait (at most ``timeout_s``);
    the consumers are resumed by the caller.  Returns how many wait."""
    pause_consumers(consumers, True)
    deadline = time.monotonic() + timeout_s
    while (waiting := backlog.unconsumed()) < size and time.monotonic() < deadline and not STOP.event.is_set():
        time.sleep(0.2)
    return waiting


def wait_level(backlog: Backlog, level: int, timeout_s: float, producer: Client, hold_after_s: float) -> dict:
    """Until fewer than ``level`` acknowledged messages wait unconsumed (at most ``timeout_s``).
    Not level after ``hold_after_s``: the producer is held (SIGUSR1) until they are.  Why: at
    the harness's load this 2-core machine has little CPU to spare (bench/bench_load.py), so a
    backlog of thousands drains at tens of messages a second while the producer runs; held,
    the consumers drain at their own pace.  Returns the lag when it ended, the seconds it
    took, and when the hold began (None: no hold) -- the gap figures leave the hold out."""
    began, held_at = time.monotonic(), None
    try:
        while (waiting := backlog.unconsumed()) >= level and time.monotonic() - began < timeout_s \
                and not STOP.event.is_set():
            if held_at is None and time.monotonic() - began >= hold_after_s and producer.process.poll() is None:
                producer.process.send_signal(signal.SIGUSR1)
                held_at = time.monotonic()
            time.sleep(0.2)
    finally:
        if held_at is not None and producer.process.poll() is None:
            producer.process.send_signal(signal.SIGUSR2)
    return {"lag": waiting, "level_s": round(time.monotonic() - began, 2), "held_at": held_at,
            "held_s": round(time.monotonic() - held_at, 2) if held_at is not None else 0.0}


def run_rounds(cluster, producer: Client, consumers: list[Client], schedule: list[str], checks: Checks,
               args: argparse.Namespace, rounds: list[dict]) -> None:
    """Appends each finished round to ``rounds`` until the schedule or a :data:`STOP` ends them."""
    backlog = Backlog([producer], consumers)
    level = 2 * (args.rate + args.fifo_rate)  # 2 s of traffic
    for number, kind in enumerate(schedule, 1):
        if STOP.event.is_set():
            return
        started = time.monotonic()
        queued = None
        if args.backlog_every and number % args.backlog_every == 0:
            queued = build_backlog(consumers, backlog, args.backlog)
            pause_consumers(consumers, False)  # they drain the backlog through the fault
        what, heal = chaos_faults.inject(cluster, kind)
        STOP.event.wait(chaos_faults.HOLD_S[kind.split("-")[0]] * args.hold)
        healed = time.monotonic()
        heal()
        recovered, moved = recover(cluster, producer)
        leveled = wait_level(backlog, level, args.level_timeout, producer, args.hold_producer_after)
        checks.views(cluster)
        checks.consumer_offsets(cluster, f" (seen after round {number}, {kind})")
        rounds.append({"round": number, "kind": kind, "what": what, "start": started, "healed": healed,
                       "end": time.monotonic(), "recovered": recovered, "moved": moved, "backlog": queued,
                       "level": leveled["lag"] < level, **leveled})
        print(f"round {number}/{len(schedule)} {kind}{f' with {queued} queued' if queued is not None else ''}: {what}; "
              f"healthy again: {recovered} ({time.monotonic() - healed:.1f} s after heal)"
              f"{'; ' + ', '.join(moved) if moved else ''}; consumers {'level' if rounds[-1]['level'] else 'NOT level'} "
              f"({leveled['lag']} unconsumed, {leveled['level_s']:.1f} s, producer held {leveled['held_s']:.1f} s)",
              file=sys.stderr, flush=True)


def drain_while_consuming(consumers: list[Client], producer: Client, idle_s: float = 90, limit_s: float = 1800,
                          interrupted: Callable[[], bool] = lambda: False):
    """Drain until everything acknowledged is consumed, or the consumers consumed nothing new
    for ``idle_s`` (what is still missing then is lost), or ``limit_s`` in all, or
    ``interrupted()``.  A FIFO consumer behind by minutes after a long run is slow, not losing:
    it gets the time it keeps using."""
    now = time.monotonic()
    deadline, missing, progress_at = now + limit_s, None, now
    while True:
        counts = drain(consumers, [producer], timeout_s=2)
        now = time.monotonic()
        if missing is None or len(counts.lost) < missing:
            missing, progress_at = len(counts.lost), now
        if not counts.lost or now > deadline or now - progress_at > idle_s or interrupted():
            return counts


def late_fifo(consumed: list[str]) -> set[str]:
    """FIFO bodies consumed after a later message of their group (first deliveries only)."""
    highest: dict[str, int] = defaultdict(int)
    seen, late = set(), set()
    for body in consumed:
        kind, group, seq = body.split(":")
        if kind != "fifo" or body in seen:
            continue
        seen.add(body)
        if int(seq) < highest[group]:
            late.add(body)
        highest[group] = max(highest[group], int(seq))
    return late


def account(rounds: list[dict], producer: Client, counts) -> dict[str, dict]:
    """Per fault kind: rounds, acknowledged, lost, duplicated, reordered, longest gap (s)."""
    ack_time = {e["body"]: e["t"] for e in producer.snapshot() if e["event"] == "ack"}
    consumed_times: dict[str, int] = defaultdict(int)
    for body in counts.consumed:
        consumed_times[body] += 1
    late = late_fifo(counts.consumed)
    table: dict[str, dict] = {}
    for index, round_ in enumerate(rounds):
        end = rounds[index + 1]["start"] if index + 1 < len(rounds) else round_["end"]
        bodies = [b for b, t in ack_time.items() if round_["start"] <= t < end]
        row = table.setdefault(round_["kind"], {"runs": 0, "backlog_rounds": 0, "acknowledged": 0, "lost": 0,
                                                "duplicated": 0, "reordered": 0, "longest_gap_s": 0.0,
                                                "not_recovered": 0, "not_level": 0, "longest_level_s": 0.0,
                                                "held": 0})
        row["runs"] += 1
        row["backlog_rounds"] += round_.get("backlog") is not None
        row["not_level"] += not round_.get("level", True)
        row["longest_level_s"] = max(row["longest_level_s"], round_.get("level_s", 0.0))
        row["held"] += round_.get("held_at") is not None
        row["acknowledged"] += len(bodies)
        row["lost"] += sum(1 for b in bodies if consumed_times[b] == 0)
        row["duplicated"] += sum(max(0, consumed_times[b] - 1) for b in bodies)
        row["reordered"] += sum(1 for b in bodies if b in late)
        # up to the producer's hold, if there was one (a held producer sends nothing on purpose)
        round_["longest_gap_s"] = longest_gap([producer], None, round_["start"], round_.get("held_at") or end)[0]
        row["longest_gap_s"] = max(row["longest_gap_s"], round_["longest_gap_s"])
        row["not_recovered"] += 0 if round_["recovered"] else 1
    return table


def print_table(table: dict[str, dict], checks: Checks) -> None:
    header = (f"{'fault':36} {'runs':>5} {'backlog':>7} {'acked':>8} {'lost':>5} {'dup':>6} {'reord':>6} {'gap s':>6} "
              f"{'unrec':>6} {'unlevel':>7} {'level s':>7} {'held':>5}")
    print(header)
    print("-" * len(header))
    for kind, row in table.items():
        print(f"{kind:36} {row['runs']:5d} {row['backlog_rounds']:7d} {row['acknowledged']:8d} {row['lost']:5d} "
              f"{row['duplicated']:6d} {row['reordered']:6d} {row['longest_gap_s']:6.2f} {row['not_recovered']:6d} "
              f"{row['not_level']:7d} {row['longest_level_s']:7.1f} {row['held']:5d}")
    print(f"consumer offset rollbacks: {checks.rollbacks} ({len(checks.offsets)} queues followed); epochs: "
          f"{len(checks.masters)} (group, epoch) masters from the controller, {checks.elections_logged} elections in "
          f"the controllers' logs, {checks.epoch_entries} epoch-file entries; "
          f"other violations: "
          f"{[v for v in checks.violations if 'rolled back' not in v] or 'none'}")
    print(f"tracebacks in the cluster's logs: {sum(checks.tracebacks.values())}"
          + "".join(f"\n  {n} x {head}" for head, n in sorted(checks.tracebacks.items(), key=lambda kv: -kv[1])))


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="rounds of each fault kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kinds", default=",".join(chaos_faults.KINDS))
    parser.add_argument("--rate", type=int, default=200, help="NORMAL sends per second")
    parser.add_argument("--fifo-rate", type=int, default=100, help="FIFO sends per second, all groups together")
    parser.add_argument("--backlog-every", type=int, default=3,
                        help="every Nth round is a backlog round: the consumers pause first (0: none)")
    parser.add_argument("--backlog", type=int, default=3000, help="messages queued before a backlog round's fault")
    parser.add_argument("--level-timeout", type=float, default=180.0,
                        help="seconds a round waits for the consumers to be level before the next one")
    parser.add_argument("--hold-producer-after", type=float, default=10.0,
                        help="not level this many seconds after a round: the producer is held until they are")
    parser.add_argument("--fifo-groups", type=int, default=8, help="FIFO message groups")
    parser.add_argument("--hold", type=float, default=1.0, help="scale of how long a fault is held")
    parser.add_argument("--out", default="", help="directory for logs, chaos.json and chaos.png")
    parser.add_argument("--disk-mb", type=int, default=0,
                        help="filesystem size per container in the sandbox (default: 2 MiB a round, at least 400; "
                             "a container writes about 1 MiB a round and a full filesystem stops every round after)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    for name, least in (("runs", 1), ("rate", 1), ("fifo_rate", 1), ("fifo_groups", 1), ("hold", 0.1),
                        ("backlog_every", 0), ("backlog", 1), ("level_timeout", 1), ("hold_producer_after", 0)):
        if getattr(args, name) < least:
            parser.error(f"--{name.replace('_', '-')} must be at least {least}")
    if args.disk_mb and args.disk_mb < 64:
        parser.error("--disk-mb must be at least 64")
    return args


def schedule_of(args: argparse.Namespace, missing: str | None) -> list[str]:
    """``--runs`` rounds of each kind asked for, shuffled by ``--seed`` (sandbox kinds dropped,
    with one line saying why, when there is no sandbox)."""
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(kinds) - set(chaos_faults.KINDS)
    if unknown:
        raise SystemExit(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(chaos_faults.KINDS)}")
    if missing:
        skipped = [k for k in kinds if k in chaos_faults.SANDBOX_KINDS]
        kinds = [k for k in kinds if k not in chaos_faults.SANDBOX_KINDS]
        if skipped:
            print(f"{', '.join(skipped)}: skipped (the sandbox {missing})", file=sys.stderr)
    schedule = [k for k in kinds for _ in range(args.runs)]
    random.Random(args.seed).shuffle(schedule)
    return schedule


class Run:
    """One harness run: the cluster, the clients, the rounds so far and what was checked."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.checks, self.rounds = Checks(), []
        self.producer, self.consumers, self.counts = None, [], None
        self.origin = time.monotonic()
        self.stopped = ""   # why the rounds ended early (SIGTERM, SIGINT), "" when they all ran
        self.lag_left: int | None = None  # consumer-progress lag once drained

    def exercise(self, cluster: ControllerModeCluster, schedule: list[str], args: argparse.Namespace) -> None:
        """Start the load, run the rounds, drain, read the epoch files.  Stopped (:data:`STOP`)
        during the rounds, the run still drains (shortly) and checks the rounds it did."""
        cluster.create_load_topics()
        wait_healthy(cluster, 60)
        if STOP.event.is_set():  # stopped while the cluster started: nothing to check yet
            raise KeyboardInterrupt(STOP.why)
        self.producer, self.consumers = start_load(cluster, self.out, args)
        self.origin = time.monotonic()
        STOP.event.wait(2.0)
        run_rounds(cluster, self.producer, self.consumers, schedule, self.checks, args, self.rounds)
        if STOP.event.is_set():
            self.stopped = f"{STOP.why} after round {len(self.rounds)} of {len(schedule)}"
            print(f"chaos: stopped ({self.stopped}); draining for at most 120 s, then checking (a second "
                  f"signal ends it at once)", file=sys.stderr, flush=True)
        self.producer.stop()
        if self.stopped:  # the short drain of a stopped run (a second signal ends the run at once)
            self.counts = drain_while_consuming(self.consumers, self.producer, 30, 120)
        else:             # the full drain, which a signal ends there
            self.counts = drain_while_consuming(self.consumers, self.producer, interrupted=STOP.event.is_set)
        if STOP.event.is_set() and not self.stopped:
            self.stopped = f"{STOP.why} during the drain, after all {len(schedule)} rounds"
        self.lag_left = self.checks.lag_left(cluster) if not self.stopped else None
        self.checks.epoch_files(cluster)
        self.checks.controller_logs([*cluster.workdir.glob("controller-n*.log"), cluster.workdir / "namesrv.log"])
        self.checks.log_tracebacks([*cluster.workdir.glob("*.log"), *cluster.workdir.glob("container-*/*.log")])

    def summary(self, args: argparse.Namespace) -> dict:
        counts, checks = self.counts, self.checks
        return {"seed": args.seed, "runs": args.runs, "rate": args.rate, "fifo_rate": args.fifo_rate,
                "fifo_groups": args.fifo_groups, "disk_mb": args.disk_mb, "stopped": self.stopped or None,
                "backlog_every": args.backlog_every, "backlog": args.backlog,
                "rounds_done": len(self.rounds), "acknowledged": len(counts.acked), "lost": len(counts.lost),
                "lag_left": self.lag_left, "not_level": sum(1 for r in self.rounds if not r.get("level", True)),
                "duplicated": counts.duplicates, "reordered": counts.reorders(), "rollbacks": checks.rollbacks,
                "violations": checks.violations, "queues_checked": len(checks.offsets),
                "epochs_checked": checks.epoch_entries, "masters_per_epoch_checked": len(checks.masters),
                "elections_logged": checks.elections_logged, "log_tracebacks": checks.tracebacks,
                "faults": account(self.rounds, self.producer, counts), "rounds": self.rounds,
                "plot": str(self.out / "chaos.png")}


def main() -> int:
    args = parse()
    missing = chaos_env.available()
    schedule = schedule_of(args, missing)
    out = Path(args.out or tempfile.mkdtemp(prefix="relaymq-chaos-"))
    out.mkdir(parents=True, exist_ok=True)
    args.disk_mb = args.disk_mb or max(400, 2 * len(schedule))
    print(f"chaos: {len(schedule)} rounds ({args.runs} of each of {len(set(schedule))} kinds), seed {args.seed}, "
          f"NORMAL {args.rate}/s, FIFO {args.fifo_rate}/s over {args.fifo_groups} groups, "
          + (f"on 127.0.0.1 (no sandbox: {missing})" if missing else f"sandbox disks of {args.disk_mb} MiB")
          + f"; out {out}", file=sys.stderr, flush=True)
    run, sandbox, cluster = Run(out), None, None
    try:
        sandbox = None if missing else chaos_env.Sandbox(out / "cluster", disk_mb=args.disk_mb).open()
        cluster = ControllerModeCluster(out / "cluster", controllers=3, network=sandbox)
        cluster.start()
        run.exercise(cluster, schedule, args)
    finally:
        for stop_signal in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):  # a cleanup cut short leaves a sandbox
            signal.signal(stop_signal, signal.SIG_IGN)
        stop_together(run.producer, *run.consumers)
        if cluster is not None:
            cluster.close()
        if sandbox is not None:
            sandbox.close()
    summary = run.summary(args)
    plot(out / "chaos.png", run.producer, run.consumers, run.rounds, run.origin)
    (out / "chaos.json").write_text(json.dumps(summary, indent=1, default=str))
    if args.json:
        print(json.dumps({k: v for k, v in summary.items() if k != "rounds"}, default=str))
    else:
        print_table(summary["faults"], run.checks)
        print(f"all: {summary['acknowledged']} acknowledged, {summary['lost']} lost, {summary['duplicated']} "
              f"duplicated, {summary['reordered']} reordered; {summary['not_level']} rounds ended with the consumers "
              f"not level; consumer-progress lag after the drain: {summary['lag_left']}; plot {out / 'chaos.png'}")
    if run.stopped:
        print(f"chaos: STOPPED {run.stopped}: the checks cover the rounds done; 'lost' counts what was not "
              f"consumed by the end of a shortened drain", file=sys.stderr)
        return 130
    return 1 if summary["lost"] or run.checks.rollbacks or run.checks.violations else 0


if __name__ == "__main__":
    for stop_signal in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):  # SIGINT also when started in the background
        signal.signal(stop_signal, STOP)
    try:
        sys.exit(main())
    except KeyboardInterrupt as stop:  # a second signal: the cluster and the sandbox were removed, no verdict
        print(f"chaos: interrupted ({str(stop) or 'SIGINT'}); the cluster and the sandbox were removed", file=sys.stderr)
        sys.exit(130)
