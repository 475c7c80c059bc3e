"""Receive + ack on a replicated group, against the same on a single broker, in the same round.

Each round runs bench_broker's end-to-end case (send ``--count`` 1 KiB messages, then
``--consumers`` loops each receiving a batch of 32 and acking it in one AckMessage) twice:
- against one container with one broker, SYNC_FLUSH (tests/support/container_process.py);
- against broker-a of ``conf/controller-mode`` exactly as shipped (bench/deployment.py):
  SYNC_FLUSH on both replicas, allAckInSyncStateSet, so every receive's pop record and every
  ack's records are fdatasynced on the slave too before the call is answered;
and prints the receive+ack msg/s of each and their ratio (goal of issue 23: at least 0.7).
``--sequential-acks`` acks each message in its own AckMessage, one at a time, as a consumer
that acks after processing each message does.

    .venv/bin/python bench/bench_replicated_consume.py --rounds 3

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from bench.bench_broker import META, SendRequests, send_call  # noqa: E402
from bench.deployment import Deployment  # noqa: E402
from proto import messaging_definition_pb2 as d  # noqa: E402
from proto import messaging_service_pb2 as s  # noqa: E402
from proto import messaging_service_pb2_grpc as g  # noqa: E402

TOPIC = "bench-consume"


async def send_all(channel, count: int) -> None:
    send, requests, slots = send_call(channel), SendRequests(TOPIC), asyncio.Semaphore(32)

    async def one():
        async with slots:
            response = await send(requests.request(1), metadata=META)
            assert response.status.code == d.OK, response.status

    await asyncio.gather(*(one() for _ in range(count)))


async def consume(channel, endpoint: str, broker: str, count: int, consumers: int, sequential_acks: bool) -> float:
    """msg/s of receive + ack until ``count`` are acked."""
    stub = g.MessagingServiceStub(channel)
    group = f"bench-{time.monotonic_ns()}"
    host, port = endpoint.rsplit(":", 1)
    queue = d.MessageQueue(topic=d.Resource(name=TOPIC), id=-1, broker=d.Broker(
        name=broker, endpoints=d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host=host, port=int(port))])))
    acked, done_at = 0, []

    async def ack(entries):
        response = await stub.AckMessage(s.AckMessageRequest(group=d.Resource(name=group), topic=d.Resource(name=TOPIC),
                                                             entries=entries), metadata=META)
        assert response.status.code == d.OK, response.status

    async def loop():
        nonlocal acked
        while acked < count:
            request = s.ReceiveMessageRequest(group=d.Resource(name=group), message_queue=queue, batch_size=32,
                                              filter_expression=d.FilterExpression(type=d.TAG, expression="*"))
            request.invisible_duration.seconds = 60
            request.long_polling_timeout.seconds = 1
            got = [r.message async for r in stub.ReceiveMessage(request, metadata=META, timeout=10) if r.HasField("message")]
            if not got:
                return
            entries = [s.AckMessageEntry(message_id=m.system_properties.message_id,
                                         receipt_handle=m.system_properties.receipt_handle) for m in got]
            if sequential_acks:
                for entry in entries:
                    await ack([entry])
            else:
                await ack(entries)
            acked += len(got)
            if acked >= count:
                done_at.append(time.perf_counter())

    began = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(consumers)))
    return acked / ((done_at[0] if done_at else time.perf_counter()) - began)


async def measure(endpoint: str, broker: str, args, before_consuming=lambda: None) -> float:
    async with grpc.aio.insecure_channel(endpoint) as channel:
        await send_all(channel, args.count)
        await asyncio.to_thread(before_consuming)
        return await consume(channel, endpoint, broker, args.count, args.consumers, args.sequential_acks)


def single(args, tmp: Path) -> float:
    from tests.support.container_process import ContainerProcess

    container = ContainerProcess(tmp / "single", brokers=[{"brokerName": "broker-a", "flushDiskType": "SYNC_FLUSH"}]).start()
    try:
        deadline = time.monotonic() + 30
        while container.admin("update-topic", "-t", TOPIC, "--queues", "4", "-n", container.namesrv).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("update-topic failed")
            time.sleep(0.3)
        return asyncio.run(measure(container.endpoint, "broker-a", args))
    finally:
        container.stop()


def replicated(args, tmp: Path) -> float:
    deployment = Deployment("controller-mode", tmp / "controller-mode").start()
    try:
        deployment.admin_retrying("update-topic", "-t", TOPIC, "--queues", "4", "-b", "broker-a")
        wait_in_sync(deployment)  # an empty slave joins at once: every send below is replicated
        return asyncio.run(measure("127.0.0.1:8091", "broker-a", args))  # broker-a's master endpoint
    finally:
        deployment.stop()


def wait_in_sync(deployment: Deployment, timeout_s: float = 30.0) -> None:
    """Until broker-a's SyncStateSet holds both replicas (the figure is of a replicated group)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = deployment.admin("get-sync-state-set", "--broker", "broker-a", "--json", check=False)
        if done.returncode == 0 and len(json.loads(done.stdout)["brokers"][0]["syncStateSet"]) >= 2:
            return
        time.sleep(0.5)
    print("warning: broker-a's SyncStateSet did not reach two replicas", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=8000)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--sequential-acks", action="store_true")
    args = parser.parse_args()
    if args.rounds < 1 or args.count < 32 or args.consumers < 1:
        parser.error("--rounds and --consumers must be positive, --count at least 32")
    print(f"# bench_replicated_consume: {args.count} messages, {args.consumers} consumers, batch 32, "
          f"{'one ack per message' if args.sequential_acks else 'one AckMessage per batch'}, {args.rounds} rounds")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for round_no in range(args.rounds):
            alone = single(args, Path(tmp) / f"r{round_no}")
            both = replicated(args, Path(tmp) / f"r{round_no}")
            ratios.append(both / alone)
            print(f"round {round_no + 1}: single broker {alone:.0f} msg/s, controller-mode {both:.0f} msg/s, "
                  f"ratio {both / alone:.2f}", flush=True)
    print(f"receive+ack, controller-mode / single broker: median {statistics.median(ratios):.2f}, "
          f"min {min(ratios):.2f}, max {max(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
