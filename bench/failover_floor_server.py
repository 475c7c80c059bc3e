"""A stand-in broker that "restarts instantly": the floor the official client sets on failover.

``python bench/failover_floor_server.py --port A --peers A,B --topic normal=NORMAL --topic fifo=FIFO``
serves the client protocol over the in-memory fake broker (tests/support/fake_broker.py) and
answers every route with the broker endpoints ``A`` and ``B``, as a group's route names all its
replicas.  Two of them, A and B, are the same broker that a failover moves from A to B in no
time at all: whatever gap a client shows when A dies is the client's and gRPC's own
(reconnect, retry, request timeout), which no broker can go below.  Prints ``READY <port>``.
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from metadata.message import MessageType  # noqa: E402
from scheduler.clock import SystemClock  # noqa: E402
from services.messaging.config import MessagingConfig  # noqa: E402
from services.messaging.server import add_messaging_services, server_options  # noqa: E402
from tests.support.fake_broker import FakeBroker, FakeDirectory  # noqa: E402
from tests.support.messaging_server import group_rules  # noqa: E402


class PeersDirectory(FakeDirectory):
    """Routes whose queues name every peer's endpoint (the replicas of one group)."""

    def __init__(self, brokers, peers: tuple[tuple[str, int], ...]):
        super().__init__(brokers, peers[0])
        self.peers = peers

    async def route(self, topic: str):
        return [dataclasses.replace(r, broker_endpoints=self.peers) for b in self.brokers for r in b.routes(topic, self.endpoint)]


async def serve(port: int, peers: tuple[tuple[str, int], ...], topics: dict) -> None:
    config = dataclasses.replace(MessagingConfig(grpc_server_port=0), min_long_polling_ms=1_000)
    clock = SystemClock()
    broker = FakeBroker("broker-a", clock, topics, queue_nums=2, group_settings=group_rules)
    directory = PeersDirectory([broker], peers)
    server = grpc.aio.server(options=server_options(config))
    broker.sink = add_messaging_services(server, directory, config, clock)
    if server.add_insecure_port(f"127.0.0.1:{port}") != port:
        raise SystemExit(f"cannot listen on 127.0.0.1:{port}")
    await server.start()
    print(f"READY {port}", flush=True)
    await server.wait_for_termination()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--peers", required=True, help="ports of every stand-in, comma-separated")
    parser.add_argument("--topic", action="append", default=[], help="NAME=TYPE")
    args = parser.parse_args()
    peers = tuple(("127.0.0.1", int(p)) for p in args.peers.split(","))
    topics = {}
    for text in args.topic:
        name, _, kind = text.partition("=")
        topics[name] = None if kind in ("", "MIXED") else MessageType(kind)
    asyncio.run(serve(args.port, peers, topics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
