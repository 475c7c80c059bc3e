"""What a new client costs the client registry when it is full (``maxClientNum``).

Fills a :class:`services.messaging.client_registry.ClientRegistry` with ``--clients`` clients
heard from one after the other, then times ``--new`` more arriving (each evicts the client
heard from longest ago without a stream): the thread's CPU per new client.  A reconnect
storm at capacity pays this once per client.

    .venv/bin/python bench/bench_client_registry.py
    .venv/bin/python bench/bench_client_registry.py --clients 1000 100000

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.messaging.client_registry import ClientRegistry  # noqa: E402
from services.messaging.config import MessagingConfig  # noqa: E402


class _Clock:
    def __init__(self) -> None:
        self.ms = 0

    def monotonic_ms(self) -> int:
        return self.ms


def per_new_client_us(clients: int, new: int) -> float:
    clock = _Clock()
    registry = ClientRegistry(dataclasses.replace(MessagingConfig(), max_clients=clients), clock)
    for number in range(clients):
        clock.ms = number
        registry.heartbeat(f"client-{number}", "PRODUCER", "")
    began = time.thread_time()
    for number in range(new):
        clock.ms += 1
        registry.heartbeat(f"new-{number}", "PRODUCER", "")
    spent = time.thread_time() - began
    if len(registry) != clients:
        raise RuntimeError(f"{len(registry)} clients remembered, expected {clients}")
    return spent / new * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1_000, 100_000], help="maxClientNum, all present")
    parser.add_argument("--new", type=int, default=200, help="clients arriving at capacity")
    args = parser.parse_args()
    if args.new < 1 or min(args.clients) < 1:
        parser.error("--clients and --new must be positive")
    print(f"# bench_client_registry: {' '.join(sys.argv[1:]) or '(defaults)'}; the thread's CPU per new client at capacity")
    for clients in args.clients:
        print(f"{clients:>9,} clients: {per_new_client_us(clients, args.new):10.1f} us per new client", flush=True)


if __name__ == "__main__":
    main()
