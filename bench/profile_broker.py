"""Where a container's CPU goes per message: bench_broker's cases under a sampling profiler.

For each case of bench/bench_broker.py -- single sends with 16 in flight (what the official
clients do), batches of 32 with 16 in flight, and the end-to-end run's receive (batch 32) +
ack phase -- this starts one container (ASYNC_FLUSH or SYNC_FLUSH, one broker), attaches
py-spy to it for exactly the case's run (``py-spy record --format raw``, idle threads
excluded) and turns the samples into a budget: each sample's CPU goes to the category of the
innermost frame that has one (the table below), ``other`` when none does, and divided by the
messages the case moved gives microseconds of server CPU per message per category.  The raw
stacks stay in ``--out`` for a closer look (flamegraph.pl reads them).

    .venv/bin/python bench/profile_broker.py --flush ASYNC_FLUSH --seconds 8
    .venv/bin/python bench/profile_broker.py --flush SYNC_FLUSH --json

The categories are by module, innermost first, so "protobuf" called from the converters is
protobuf's, and the converters' own Python is "conversion".  Samples are CPU of every thread
(the loop, the flush thread, grpc's threads); a 2-core VM's speed moves, so compare a
category's share, and rerun before and after a change in the same minutes.
Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

import bench.bench_broker as bb  # noqa: E402
from proto import messaging_definition_pb2 as d  # noqa: E402
from proto import messaging_service_pb2_grpc as g  # noqa: E402

RATE = 250   # samples a second
NATIVE: list[str] = []   # ["--native"] with --native: C frames too (it pauses the process to sample)
# (category, substrings of a frame's "function (file:line)" text): the first category whose
# pattern the innermost frame matches, walking outwards from the leaf
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("logging", ("logging/__init__.py", "/logging/")),
    ("metrics", ("services/metrics.py", "prometheus_client", "status_metrics.py")),
    ("protobuf", ("google/protobuf", "_pb2.py", "fastjson")),
    ("grpc", ("grpc/", "grpc_")),
    ("validation", ("request_guard.py", "validate", "metadata/message.py", "services/messaging/access.py")),
    ("conversion", ("services/messaging/converters.py", "services/messaging/responses.py",
                    "services/messaging/servicer.py", "services/messaging/broker_port.py")),
    ("replication", ("services/ha/", "ha/replication/", "store/replica_index.py")),
    ("pop records", ("scheduler/pop/", "pop_service.py", "pop_planner.py", "pop_log_writer.py", "long_poll.py")),
    ("flush wait", ("store/flush.py", "wait_flushed")),
    ("consume queue", ("store/consume_queue.py", "store/cq_entry.py", "store/queue_table.py", "store/reader.py")),
    ("store append", ("store/", "services/broker/send_service.py", "services/broker/internal_put.py")),
    ("broker", ("services/broker/", "container/")),
    ("event loop", ("asyncio/", "uvloop", "selectors.py", "threading.py", "concurrent/futures")),
)
# "native": a sample whose innermost Python frame is the loop's run (or a thread's run) spends
# its CPU in C under it: grpc's core (HTTP/2, completion queue, the cython servicer glue),
# protobuf's upb parse and serialize, uvloop.  --native names them (it stops the process to
# sample, so its per-message figures are inflated; read its shares).


NATIVE_LEAVES = ("Runner.run (", "run (uvloop", "Thread.run (threading.py", "_worker (concurrent/futures")


def category(frames: list[str]) -> str:
    if frames and frames[-1].startswith(NATIVE_LEAVES):
        return "native"   # Python is at the loop's (or a thread's) top: grpc's C core, upb, uvloop run under it
    for frame in reversed(frames):
        for name, patterns in CATEGORIES:
            if any(pattern in frame for pattern in patterns):
                return name
    return "other"


def budget(raw_path: Path, messages: int) -> dict:
    """category -> microseconds of server CPU per message (samples / RATE / messages)."""
    samples: collections.Counter = collections.Counter()
    for line in raw_path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            samples[category(stack.split(";"))] += int(count)
    total = sum(samples.values())
    per = {name: 1e6 * n / RATE / messages for name, n in samples.most_common()} if messages else {}
    return {"messages": messages, "samples": total, "us_per_message": round(sum(per.values()), 1),
            "by_category_us": {name: round(value, 1) for name, value in per.items()}}


class Profiler:
    def __init__(self, pid: int, out: Path):
        self.pid, self.out = pid, out

    def __enter__(self):
        self.process = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(self.pid),
                                         "-r", str(RATE), "-f", "raw", "-o", str(self.out), *(NATIVE or ["--nonblocking"])],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)   # attached
        return self

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGINT)   # py-spy writes its file on Ctrl-C
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        if not self.out.exists():
            raise RuntimeError(f"py-spy wrote nothing: {self.process.stderr.read().decode()[-400:]}")


async def cases(endpoint: str, pid: int, topic: str, args, out: Path) -> dict:
    results = {}
    async with grpc.aio.insecure_channel(endpoint, options=[("grpc.max_receive_message_length", -1)]) as channel:
        stub = g.MessagingServiceStub(channel)
        send, requests = bb.send_call(channel), bb.SendRequests(topic)

        async def send_many(count: int):
            response = await send(requests.request(count), metadata=bb.META)
            assert response.status.code == d.OK, response.status

        for name, per_request in (("send c=16", 1), ("batch32 c=16", 32)):
            with Profiler(pid, out / f"{name.replace(' ', '_')}.txt") as profiler:
                figures = await bb.closed_loop(lambda: send_many(per_request), 16, args.seconds, per_request, pid)
            results[name] = {"msg_s": round(figures["msg_s"]), **budget(profiler.out, figures["requests"] * per_request)}
        await asyncio.gather(*(send_many(32) for _ in range(args.receive_count // 32)))  # the backlog to receive
        with Profiler(pid, out / "receive_ack.txt") as profiler:
            figures = await receive_and_ack(stub, endpoint, topic, args.receive_count, args.consumers)
        results["receive+ack"] = {"msg_s": round(figures), **budget(profiler.out, args.receive_count // 32 * 32)}
    return results


async def receive_and_ack(stub, endpoint: str, topic: str, count: int, consumers: int) -> float:
    """bench_broker's end-to-end receive phase alone, the messages already sent."""
    from proto import messaging_service_pb2 as s

    group = f"profile-{os.getpid()}-{time.monotonic_ns()}"
    host, port = endpoint.rsplit(":", 1)
    queue = d.MessageQueue(topic=d.Resource(name=topic), id=-1, broker=d.Broker(
        name="broker-a", endpoints=d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host=host, port=int(port))])))
    acked, began = 0, time.perf_counter()
    target = count // 32 * 32

    async def loop():
        nonlocal acked
        while acked < target:
            request = s.ReceiveMessageRequest(group=d.Resource(name=group), message_queue=queue, batch_size=32,
                                              filter_expression=d.FilterExpression(type=d.TAG, expression="*"))
            request.invisible_duration.seconds = 60
            request.long_polling_timeout.seconds = 1
            got = [r.message async for r in stub.ReceiveMessage(request, metadata=bb.META, timeout=10)
                   if r.HasField("message")]
            if not got:
                return
            response = await stub.AckMessage(s.AckMessageRequest(
                group=d.Resource(name=group), topic=d.Resource(name=topic),
                entries=[s.AckMessageEntry(message_id=m.system_properties.message_id,
                                           receipt_handle=m.system_properties.receipt_handle) for m in got]),
                metadata=bb.META)
            assert response.status.code == d.OK, response.status
            acked += len(got)

    await asyncio.gather(*(loop() for _ in range(consumers)))
    return acked / (time.perf_counter() - began)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each send case")
    parser.add_argument("--receive-count", type=int, default=16000, help="messages received and acked")
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--out", type=Path, help="keep the raw stacks here (default: a temporary folder)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--native", action="store_true", help="sample C frames too (grpc core, protobuf's upb)")
    args = parser.parse_args()
    if args.native:
        NATIVE.append("--native")
    if args.seconds <= 0 or args.receive_count < 32 or args.consumers < 1:
        parser.error("--seconds and --consumers positive, --receive-count at least 32")
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "stacks"
        out.mkdir(parents=True, exist_ok=True)
        topic = "profile"
        container, endpoint = bb.start_container(topic, args.flush, Path(tmp) / "data")
        try:
            results = asyncio.run(cases(endpoint, container.process.pid, topic, args, out))
        finally:
            container.stop()
    if args.json:
        print(json.dumps({"flush": args.flush, "rateHz": RATE, "cases": results}, sort_keys=True))
        return 0
    print(f"# profile_broker: {args.flush}, py-spy at {RATE} Hz on the container, server CPU per message (us)")
    names = ["native"] + [name for name, _ in CATEGORIES] + ["other"]
    print(f"{'category':<15}" + "".join(f"{case:>15}" for case in results))
    for name in names:
        print(f"{name:<15}" + "".join(f"{results[case]['by_category_us'].get(name, 0.0):>15.1f}" for case in results))
    print(f"{'total':<15}" + "".join(f"{results[case]['us_per_message']:>15.1f}" for case in results))
    print(f"{'msg/s':<15}" + "".join(f"{results[case]['msg_s']:>15}" for case in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
