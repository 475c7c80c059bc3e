"""What waiting consumers cost a broker: many long-polling receives, a paced producer.

A real container runs in process on a background loop (``tests/support/inprocess_container``,
uvloop); its client-protocol servicer is called directly.  ``--consumers`` consumers in
``--groups`` groups (spread evenly) receive (batch 32, long polls of 20 s) and ack topic
``t`` while one producer sends ``--messages`` single messages, ``--pace-ms`` apart: most of
the time every consumer waits, so each message meets a full set of long polls.  Printed: the
loop thread's CPU per message sent (its receives and acks by every group included) and the
delivery latency (send answered -> received by a consumer, each group's copy), p50 / p99 /
max.  The first row (one consumer) is the reference: waiting consumers should add little.
``--replicated``: broker-a is a SYNC_MASTER with a slave in a second in-process container
(SYNC_FLUSH, inSyncReplicas 2, as ``send_path.py --replicated``), so a message is readable
only once the slave has it; the figure is the master's loop.

    .venv/bin/python bench/bench_long_poll.py
    .venv/bin/python bench/bench_long_poll.py --consumers 1 10 50 100 --groups 2 --messages 1000
    .venv/bin/python bench/bench_long_poll.py --replicated --consumers 8 --groups 8

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.send_path import Context, _collected, _fresh, _service, _wait_replicating, requests  # noqa: E402
from proto import messaging_definition_pb2 as d  # noqa: E402
from proto import messaging_service_pb2 as s  # noqa: E402


async def _consume(service, context, group: str, sent: dict, latencies: list, stop: asyncio.Event) -> None:
    queue = d.MessageQueue(topic=d.Resource(name="t"), id=-1, broker=d.Broker(name="broker-a"))
    while not stop.is_set():
        request = s.ReceiveMessageRequest(group=d.Resource(name=group), message_queue=queue, batch_size=32,
                                          filter_expression=d.FilterExpression(type=d.TAG, expression="*"))
        request.invisible_duration.seconds = 60
        request.long_polling_timeout.seconds = 20
        got = [r.message for r in await _collected(service.ReceiveMessage, request, context) if r.HasField("message")]
        now = time.monotonic()
        if got:
            latencies += [now - sent.get(m.system_properties.message_id, now) for m in got]
            entries = [s.AckMessageEntry(message_id=m.system_properties.message_id,
                                         receipt_handle=m.system_properties.receipt_handle) for m in got]
            await service.AckMessage(s.AckMessageRequest(group=d.Resource(name=group), topic=d.Resource(name="t"),
                                                         entries=entries), context)


async def _run(service, context, consumers: int, groups: int, calls: list, pace_s: float) -> tuple[float, list]:
    stop, sent, latencies = asyncio.Event(), {}, []
    tasks = [asyncio.get_running_loop().create_task(_consume(service, context, f"g{number % groups}", sent, latencies, stop))
             for number in range(consumers)]
    await asyncio.sleep(0.5)  # every consumer waiting
    began = time.thread_time()
    for request in calls:
        await service.SendMessage(request, context)
        sent[request.messages[0].system_properties.message_id] = time.monotonic()
        await asyncio.sleep(pace_s)
    deadline = time.monotonic() + 30
    while len(latencies) < len(calls) * groups and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    spent = time.thread_time() - began
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return spent / len(calls) * 1e6, latencies


def _nodes(root: Path, replicated: bool) -> list:
    """broker-a's container, and with ``replicated`` its slave's (started after it)."""
    from tests.support.inprocess_container import InProcessContainer
    if not replicated:
        return [InProcessContainer(root, brokers=[{"brokerName": "broker-a"}], uvloop=True)]
    ha = {"flushDiskType": "SYNC_FLUSH", "totalReplicas": 2, "inSyncReplicas": 2, "minInSyncReplicas": 2}
    master = InProcessContainer(root / "master", brokers=[{"brokerName": "broker-a", "brokerRole": "SYNC_MASTER", **ha}],
                                uvloop=True)
    slave = InProcessContainer(root / "slave", brokers=[{"brokerName": "broker-a", "brokerId": 1, "brokerRole": "SLAVE", **ha}],
                               namesrv_port=master.spec.namesrv_port, uvloop=True)
    return [master, slave]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--consumers", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--groups", type=int, default=1)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--pace-ms", type=float, default=1.0)
    parser.add_argument("--replicated", action="store_true", help="a SYNC_MASTER with a slave (see above)")
    args = parser.parse_args()
    if args.groups < 1 or args.messages < 1 or any(c < args.groups for c in args.consumers):
        parser.error("at least one group, one message, and as many consumers as groups")
    print(f"# bench_long_poll: {' '.join(sys.argv[1:]) or '(defaults)'}; "
          f"{'a SYNC_MASTER and its slave' if args.replicated else 'one broker (ASYNC_FLUSH)'} in process, "
          f"{args.messages} single 1 KiB sends {args.pace_ms} ms apart, {args.groups} group(s)")
    print(f"{'consumers':>9} {'loop us/msg':>12} {'received':>9} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}")
    for consumers in args.consumers:
        with tempfile.TemporaryDirectory(prefix="bench-long-poll-") as data:
            nodes = _nodes(Path(data), args.replicated)
            try:
                service, context = _service(nodes[0]), Context()
                if args.replicated:
                    _wait_replicating(nodes[0], service, context)
                calls = _fresh(requests("t", args.messages, 1), consumers % 0xFFFF)
                spent, latencies = nodes[0].background.run(
                    _run(service, context, consumers, args.groups, calls, args.pace_ms / 1000), timeout_s=600)
            finally:
                for node in reversed(nodes):
                    node.stop()
        ms = sorted(latency * 1e3 for latency in latencies) or [float("nan")]
        print(f"{consumers:>9} {spent:>12.1f} {len(latencies):>9} {statistics.median(ms):>7.2f} "
              f"{ms[int(len(ms) * 0.99) - 1 if len(ms) > 1 else 0]:>7.2f} {ms[-1]:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
