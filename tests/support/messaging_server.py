"""A grpc.aio server mounting the messaging servicer over the fake broker.

In-process: ``async with running_server(...) as handle`` (tests).  As a process:
``python -m tests.support.messaging_server --topic NAME=TYPE ...`` prints
``READY <port>`` and serves until killed (conformance tests, while no container exists).
Group names decide the fake group settings: ``fifo*`` groups are FIFO, ``dlq*`` groups
allow 2 delivery attempts with a 1 s retry delay.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import sys
from dataclasses import dataclass

import grpc

from metadata.message import MessageType
from scheduler.clock import SystemClock
from services.broker.api import GroupSettings
from services.messaging.config import MessagingConfig
from services.messaging.server import add_messaging_services, server_options
from tests.support.fake_broker import FakeBroker, FakeDirectory


def group_rules(group: str) -> GroupSettings:
    if group.startswith("fifo"):
        return GroupSettings(fifo=True, max_delivery_attempts=2, retry_delays_ms=(500,))
    if group.startswith("dlq"):
        return GroupSettings(max_delivery_attempts=2, retry_delays_ms=(1_000,))
    return GroupSettings()


@dataclass
class Handle:
    server: grpc.aio.Server
    port: int
    broker: FakeBroker
    directory: FakeDirectory
    registry: object

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


@contextlib.asynccontextmanager
async def running_server(topics: dict[str, MessageType | None], config: MessagingConfig | None = None, clock=None,
                         broker_name: str = "broker-a", queue_nums: int = 4, accounts=None, access=None):
    config = config or MessagingConfig(grpc_server_port=0)
    clock = clock or SystemClock()
    broker = FakeBroker(broker_name, clock, topics, queue_nums=queue_nums, group_settings=group_rules)
    directory = FakeDirectory([broker])
    server = grpc.aio.server(options=server_options(config))
    registry = add_messaging_services(server, directory, config, clock, accounts=accounts, access=access)
    broker.sink = registry
    port = server.add_insecure_port("127.0.0.1:0")
    directory.endpoint = ("127.0.0.1", port)
    await server.start()
    try:
        yield Handle(server, port, broker, directory, registry)
    finally:
        await server.stop(None)


def _topic(text: str) -> tuple[str, MessageType | None]:
    name, _, kind = text.partition("=")
    return name, None if kind in ("", "MIXED") else MessageType(kind)


async def _serve(args) -> None:
    config = dataclasses.replace(MessagingConfig(grpc_server_port=0), min_long_polling_ms=args.min_poll_ms,
                                 min_invisible_time_ms=args.min_invisible_ms)
    async with running_server(dict(map(_topic, args.topic)), config) as handle:
        handle.broker.check_after_ms = args.check_after_ms
        print(f"READY {handle.port}", flush=True)
        while True:
            await asyncio.sleep(0.2)
            handle.broker.check_orphans()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--min-poll-ms", type=int, default=1_000)
    parser.add_argument("--min-invisible-ms", type=int, default=1_000)
    parser.add_argument("--check-after-ms", type=int, default=1_000)
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
