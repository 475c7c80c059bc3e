"""Run the official client's steady load (official_client/steady.py) and count what happened.

``Load`` starts producer and consumer subprocesses, reads their ``@@`` events on threads, and
answers what a failover test asserts and a benchmark prints: what was acknowledged, what was
consumed, what is lost (acknowledged, never consumed), duplicated, reordered within a FIFO
message group, and the longest time without an acknowledged send (overall, per kind).
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

STEADY = Path(__file__).resolve().parent / "official_client" / "steady.py"
ACTING = Path(__file__).resolve().parent / "official_client" / "acting.py"


class Client:
    """One steady.py process; its events accumulate in ``events``.  ``Client.running`` holds
    those not stopped yet, so a test that fails midway leaves none behind (tests/conftest.py)."""

    running: set["Client"] = set()

    def __init__(self, *args: str, log_path: Path, script: Path = STEADY):
        """stderr goes to ``log_path``, the events also to ``log_path`` + ``.events`` (post-mortems);
        ``script``: the official-client script (steady.py, or official_client/acting.py)."""
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._tee = open(str(log_path) + ".events", "a")
        self.process = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE,
                                        stderr=open(log_path, "ab"), text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        Client.running.add(self)

    def _read(self) -> None:
        for line in self.process.stdout:
            self._tee.write(line)
            if line.startswith("@@"):
                event = json.loads(line[2:])
                with self._lock:
                    self.events.append(event)

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.events)

    def since(self, index: int) -> list[dict]:
        """The events from ``index`` on (a long run's checks read only what is new)."""
        with self._lock:
            return self.events[index:]

    def started(self) -> bool:
        return any(e["event"] == "started" for e in self.snapshot())

    def ask_to_stop(self) -> None:
        """SIGTERM: the script ends its call under way (a consumer's long poll: up to its
        --await-s), shuts the official client down and exits; :meth:`stop` waits for that."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout_s: float = 20.0) -> None:
        self.ask_to_stop()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=5)
        self._tee.close()
        Client.running.discard(self)

    @classmethod
    def stop_all(cls) -> None:
        stop_together(*cls.running, timeout_s=5)


def stop_together(*clients: Client | None, timeout_s: float = 20.0) -> None:
    """Stop ``clients`` at once: each is asked first, then each is waited for.  One after the
    other, every consumer first finished its long poll (up to 5 s) while the rest waited."""
    present = [client for client in clients if client is not None]
    for client in present:
        client.ask_to_stop()
    for client in present:
        client.stop(timeout_s)


def steady_load(endpoint: str, logs: Path, rate: int = 200) -> tuple[Client, list[Client]]:
    """The failover tests' load through ``endpoint``, started: ``rate`` NORMAL sends a second to
    topic ``normal`` and 8 FIFO message groups of 12.5 a second each to ``fifo``, consumed by
    ``normal-group`` and ``fifo-group`` (the topics and groups must exist)."""
    producer = Client("produce", "--endpoint", endpoint, "--topic", "normal", "--fifo-topic", "fifo", "--rate", str(rate),
                      "--fifo-rate", "12.5", "--groups", "8", "--seconds", "600", log_path=logs / "producer.log")
    consumers = [Client("consume", "--endpoint", endpoint, "--topic", "normal", "--group", "normal-group",
                        "--seconds", "600", log_path=logs / "consumer-normal.log"),
                 Client("consume", "--endpoint", endpoint, "--fifo-topic", "fifo", "--group", "fifo-group",
                        "--seconds", "600", log_path=logs / "consumer-fifo.log")]
    wait_started(producer, *consumers)
    return producer, consumers


def acked_after(producer: Client, since: float) -> int:
    """Sends ``producer`` saw acknowledged after ``since`` (time.monotonic())."""
    return sum(1 for e in producer.snapshot() if e["event"] == "ack" and e["t"] > since)


def wait_started(*clients: Client, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(c.started() for c in clients):
        if time.monotonic() > deadline:
            raise AssertionError("clients did not start")
        time.sleep(0.05)


@dataclass
class Counts:
    acked: set[str] = field(default_factory=set)
    consumed: list[str] = field(default_factory=list)
    fails: int = 0

    @property
    def lost(self) -> set[str]:
        return self.acked - set(self.consumed)

    @property
    def duplicates(self) -> int:
        return len(self.consumed) - len(set(self.consumed))

    def reorders(self) -> int:
        """FIFO messages consumed after a later message of their group had been consumed."""
        highest: dict[str, int] = defaultdict(int)
        seen, late = set(), 0
        for body in self.consumed:
            kind, group, seq = body.split(":")
            if kind != "fifo" or body in seen:
                continue
            seen.add(body)
            if int(seq) < highest[group]:
                late += 1
            highest[group] = max(highest[group], int(seq))
        return late


class Backlog:
    """Acknowledged messages not consumed yet, followed event by event (O(1) each), so a long
    run can ask every fraction of a second how far its consumers are behind."""

    def __init__(self, producers: list[Client], consumers: list[Client]):
        self._sources = [(client, "ack") for client in producers] + [(client, "recv") for client in consumers]
        self._read = [0] * len(self._sources)
        self.pending: set[str] = set()
        self.consumed: set[str] = set()
        self.acked = 0

    def unconsumed(self) -> int:
        for index, (client, kind) in enumerate(self._sources):
            new = client.since(self._read[index])
            self._read[index] += len(new)
            for event in new:
                if event["event"] != kind:
                    continue
                body = event["body"]
                if kind == "ack":
                    self.acked += 1
                    if body not in self.consumed:
                        self.pending.add(body)
                else:
                    self.consumed.add(body)
                    self.pending.discard(body)
        return len(self.pending)


def count(producers: list[Client], consumers: list[Client]) -> Counts:
    counts = Counts()
    for producer in producers:
        for event in producer.snapshot():
            if event["event"] == "ack":
                counts.acked.add(event["body"])
            elif event["event"] == "fail":
                counts.fails += 1
    for consumer in consumers:
        counts.consumed += [e["body"] for e in consumer.snapshot() if e["event"] == "recv"]
    return counts


def longest_gap(producers: list[Client], kind: str | None, start: float, end: float) -> tuple[float, float]:
    """(seconds, when it began) of the longest time in [start, end] without an acknowledged send."""
    times = sorted(e["t"] for p in producers for e in p.snapshot()
                   if e["event"] == "ack" and (kind is None or e["kind"] == kind) and start <= e["t"] <= end)
    edges = [start] + times + [end]
    gaps = [(b - a, a) for a, b in zip(edges, edges[1:])]
    return max(gaps) if gaps else (end - start, start)


def drain(consumers: list[Client], producers: list[Client], timeout_s: float) -> Counts:
    """Wait until every acknowledged message was consumed (or the timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        counts = count(producers, consumers)
        if not counts.lost or time.monotonic() > deadline:
            return counts
        time.sleep(0.2)
