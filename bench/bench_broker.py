"""Client-protocol figures: send throughput and latency, batches, end to end, vs a bare echo.

For 1 KiB messages, measured with a raw grpc.aio client over our generated stubs, in this
process, against a server in another process:
- send: one message per SendMessage (as the official clients send) with 1, 16 and 64
  requests in flight: messages/s, p50 and p99 latency;
- batch: SendMessage requests of 32 messages (16 in flight): messages/s;
- end to end: send N, then receive (batch 32) and ack them all: messages/s, and the
  receive-and-ack phase alone (one receive then one ack of its batch at a time);
each under ASYNC_FLUSH and SYNC_FLUSH. The same client drives a bare grpc.aio echo server
(another process, on uvloop as the container; same payload and concurrency) and the broker/echo
ratio is printed, with the server process's CPU time (user + system, /proc) per 1000 messages,
which moves much less with the machine's load than messages/s do; from the echo's CPU per
streamed message it prints the receive+ack ceiling one core allows before any broker work.
``--rounds`` repeats (echo, ASYNC_FLUSH, SYNC_FLUSH) back to back and prints medians, each
ratio taken within its round: on a shared VM one case's msg/s moved by up to 2x between
minutes. Message ids are a per-run random prefix plus a counter (a uuid4 per message
cost the client ~12 us of its share of the CPUs).

The client sends SendMessage requests as bytes, each message's fresh id spliced into one
serialized template (:class:`SendRequests`, checked against protobuf's own encoding at
start), as it sends the echo server bytes: client and server share the two cores, and
building protobuf messages cost the client about 20 us per message that the echo's client
never paid, which starved the server being measured.  The echo's calls carry the same
metadata headers as the broker's (client id, language), as every official client sends them.

    .venv/bin/python bench/bench_broker.py                   # the real container
    .venv/bin/python bench/bench_broker.py --target fake     # servicer over the in-memory fake
    .venv/bin/python bench/bench_broker.py --json > figures.json   # machine-readable, to diff
Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import itertools
import math
import statistics
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from proto import messaging_definition_pb2 as d  # noqa: E402
from proto import messaging_service_pb2 as s  # noqa: E402
from proto import messaging_service_pb2_grpc as g  # noqa: E402

BODY = b"x" * 1024
META = (("x-mq-client-id", f"bench@{os.getpid()}"), ("x-mq-language", "PYTHON"))
ECHO_SERVER = """
import asyncio, sys, grpc, uvloop
async def echo(request, context):
    return request
async def stream(request, context):  # a receive's shape: status, 32 messages, delivery timestamp
    for _ in range(34):
        yield request
async def main():
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 << 20)])
    handlers = {"Call": grpc.unary_unary_rpc_method_handler(echo), "Stream": grpc.unary_stream_rpc_method_handler(stream)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print("READY", port, flush=True)
    await server.wait_for_termination()
uvloop.run(main())  # the container's event loop: on the default loop the echo costs ~10% more CPU
"""


ID_PREFIX = uuid.uuid4().hex[:16].upper()
_ids = itertools.count()


def message(topic: str) -> d.Message:
    system = d.SystemProperties(message_id=f"{ID_PREFIX}{next(_ids):016X}", message_type=d.NORMAL, body_encoding=d.IDENTITY)
    return d.Message(topic=d.Resource(name=topic), body=BODY, system_properties=system)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


class SendRequests:
    """Serialized SendMessageRequests of fresh 1 KiB messages, made by splicing each message's
    id into one serialized template message: a few hundred ns per message instead of building
    and serializing a protobuf message."""

    def __init__(self, topic: str):
        placeholder = "0" * 32  # the length of every id message() makes
        system = d.SystemProperties(message_id=placeholder, message_type=d.NORMAL, body_encoding=d.IDENTITY)
        wire = d.Message(topic=d.Resource(name=topic), body=BODY, system_properties=system).SerializeToString()
        at = wire.index(placeholder.encode())
        self.head = b"\x0a" + _varint(len(wire)) + wire[:at]  # SendMessageRequest.messages is field 1
        self.tail = wire[at + len(placeholder):]
        self.topic = topic
        probe = self.request(2)
        parsed = s.SendMessageRequest.FromString(probe)
        rebuilt = s.SendMessageRequest(messages=[d.Message(topic=d.Resource(name=topic), body=BODY, system_properties=d.SystemProperties(
            message_id=m.system_properties.message_id, message_type=d.NORMAL, body_encoding=d.IDENTITY)) for m in parsed.messages])
        assert rebuilt.SerializeToString() == probe, "spliced requests must be protobuf's own bytes"

    def request(self, count: int) -> bytes:
        parts = []
        head, tail = self.head, self.tail
        for _ in range(count):
            parts += (head, f"{ID_PREFIX}{next(_ids):016X}".encode(), tail)
        return b"".join(parts)


def send_call(channel: grpc.aio.Channel):
    """SendMessage taking the request as bytes (see :class:`SendRequests`)."""
    return channel.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage",
                               response_deserializer=s.SendMessageResponse.FromString)


def senders(channel: grpc.aio.Channel, topic: str, batch: int):
    """A call sending one SendMessage of ``batch`` fresh messages to ``topic``, checked OK."""
    send, requests = send_call(channel), SendRequests(topic)

    async def one():
        response = await send(requests.request(batch), metadata=META)
        assert response.status.code == d.OK, response.status
    return one


def _ready_port(process: subprocess.Popen, what: str) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline().decode()
        if line.startswith("READY"):
            return int(line.split()[1])
        if not line and process.poll() is not None:
            break
    raise RuntimeError(f"{what} did not start")


def start_fake(topic: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-m", "tests.support.messaging_server", "--topic", f"{topic}=NORMAL"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return process, f"127.0.0.1:{_ready_port(process, 'fake server')}"


def start_container(topic: str, flush: str, data: Path, keys: dict[str, str] | None = None):
    from tests.support.container_process import ContainerProcess

    broker = {"brokerName": "broker-a", "flushDiskType": flush, **(keys or {})}
    container = ContainerProcess(data, brokers=[broker]).start()
    deadline = time.monotonic() + 30
    while True:  # the broker registers at the nameserver shortly after start
        done = container.admin("update-topic", "--topic", topic, "--type", "NORMAL", "--namesrv", container.namesrv)
        if done.returncode == 0:
            return container, container.endpoint
        if time.monotonic() > deadline:
            container.stop()
            raise RuntimeError(f"update-topic failed: {done.stderr[-500:]}")
        time.sleep(0.2)


def cpu_seconds(pid: int | tuple[int, ...] | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 without /proc); of a tuple of
    processes, their sum (a deployment's containers)."""
    if isinstance(pid, tuple):
        return sum(cpu_seconds(one) for one in pid)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def closed_loop(call, concurrency: int, seconds: float, per_request: int = 1, pid: int | None = None) -> dict:
    latencies: list[float] = []
    stop = time.perf_counter() + seconds
    cpu_began = cpu_seconds(pid)

    async def worker():
        while time.perf_counter() < stop:
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    ordered = sorted(latencies)
    messages = len(latencies) * per_request
    return {"msg_s": messages / elapsed, "p50_ms": 1000 * ordered[len(ordered) // 2],
            "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], "requests": len(latencies),
            "cpu_ms_1k": 1e6 * (cpu_seconds(pid) - cpu_began) / messages if pid and messages else float("nan")}


async def bench_broker(endpoint: str, topic: str, seconds: float, e2e_count: int, consumers: int, pid: int | None) -> dict:
    results = {}
    async with grpc.aio.insecure_channel(endpoint, options=[("grpc.max_receive_message_length", -1)]) as channel:
        stub = g.MessagingServiceStub(channel)
        send = send_call(channel)
        send_one, send_batch = senders(channel, topic, 1), senders(channel, topic, 32)

        for concurrency in (1, 16, 64):
            results[f"send c={concurrency}"] = await closed_loop(send_one, concurrency, seconds, pid=pid)
        results["batch32 c=16"] = await closed_loop(send_batch, 16, seconds, per_request=32, pid=pid)
        results["end-to-end"] = await end_to_end(stub, send, endpoint, topic, e2e_count, consumers, pid)
        results["receive+ack"] = {"msg_s": results["end-to-end"].pop("receive_ack_msg_s"),
                                  "cpu_ms_1k": results["end-to-end"].pop("receive_ack_cpu_ms_1k")}
    return results


async def end_to_end(stub, send, endpoint: str, topic: str, count: int, consumers: int, pid: int | None = None,
                     on_consume=None) -> dict:
    """Send ``count`` messages, then receive and ack them all; ``on_consume`` is called when the
    receiving begins (bench/handler_cpu.py reads the server's threads there)."""
    group = f"bench-{uuid.uuid4().hex[:8]}"
    host, port = endpoint.rsplit(":", 1)
    queue = d.MessageQueue(topic=d.Resource(name=topic), id=-1, broker=d.Broker(
        name="broker-a", endpoints=d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host=host, port=int(port))])))
    began = time.perf_counter()
    sem = asyncio.Semaphore(64)
    requests = SendRequests(topic)

    async def send_one():
        async with sem:
            response = await send(requests.request(1), metadata=META)
            assert response.status.code == d.OK, response.status

    await asyncio.gather(*(send_one() for _ in range(count)))
    if on_consume is not None:
        on_consume()
    consume_began, consume_cpu_began = time.perf_counter(), cpu_seconds(pid)
    acked = 0

    async def consumer():  # receive a batch, ack it, again; several in flight as the push consumers keep
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
            response = await stub.AckMessage(s.AckMessageRequest(group=d.Resource(name=group), topic=d.Resource(name=topic),
                                                                 entries=entries), metadata=META)
            assert response.status.code == d.OK, response.status
            acked += len(got)
            if acked >= count:
                done_at.append(time.perf_counter())  # the others may still be in an empty long poll

    done_at: list[float] = []
    await asyncio.gather(*(consumer() for _ in range(consumers)))
    finished = done_at[0] if done_at else time.perf_counter()
    consume_cpu = cpu_seconds(pid) - consume_cpu_began  # includes the others' last empty long polls: idle
    return {"msg_s": acked / (finished - began), "acked": acked, "sent": count,
            "receive_ack_msg_s": acked / (finished - consume_began),
            "receive_ack_cpu_ms_1k": 1e6 * consume_cpu / acked if pid and acked else float("nan")}


async def bench_echo(seconds: float, consumers: int) -> dict:
    process = subprocess.Popen([sys.executable, "-c", ECHO_SERVER], stdout=subprocess.PIPE)
    try:
        port = _ready_port(process, "echo server")
        payload = s.SendMessageRequest(messages=[message("t")]).SerializeToString()
        batch = s.SendMessageRequest(messages=[message("t") for _ in range(32)]).SerializeToString()
        results = {}
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary("/bench.Echo/Call")
            for concurrency in (1, 16, 64):
                results[f"send c={concurrency}"] = await closed_loop(lambda: call(payload, metadata=META), concurrency, seconds, pid=process.pid)
            results["batch32 c=16"] = await closed_loop(lambda: call(batch, metadata=META), 16, seconds, per_request=32, pid=process.pid)
            stream = channel.unary_stream("/bench.Echo/Stream")

            async def receive_like():  # 34 responses of one message each, then a unary call (the ack)
                async for _ in stream(payload, metadata=META):
                    pass
                await call(payload, metadata=META)
            results["receive+ack"] = await closed_loop(receive_like, consumers, seconds, per_request=32, pid=process.pid)
        return results
    finally:
        process.kill()
        process.wait()


def report(title: str, broker: dict, echo: dict) -> None:
    print(f"\n== {title}")
    print(f"{'case':<14}{'msg/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'echo msg/s':>12}{'broker/echo':>13}"
          f"{'cpu ms/1k':>11}{'echo cpu':>10}")
    nan = float("nan")
    for case, figures in broker.items():
        base = echo.get(case)
        ratio = f"{figures['ratio']:.2f}" if "ratio" in figures else "-"
        print(f"{case:<14}{figures['msg_s']:>10.0f}{figures.get('p50_ms', nan):>9.2f}"
              f"{figures.get('p99_ms', nan):>9.2f}{(base or {}).get('msg_s', nan):>12.0f}{ratio:>13}"
              f"{figures.get('cpu_ms_1k', nan):>11.0f}{(base or {}).get('cpu_ms_1k', nan):>10.0f}")
    print("cpu ms/1k: server process CPU (user + system) per 1000 messages; echo cpu: the echo server's")
    streamed = (echo.get("receive+ack") or {}).get("cpu_ms_1k", nan)
    if streamed == streamed:  # a receive streams one response per message; the echo's CPU bounds any server
        print(f"receive+ack ceiling: the bare echo server alone spent {streamed:.0f} ms of CPU per 1000 messages in a "
              f"receive's shape, so one core streams at most {1e6 / streamed:.0f} msg/s before any broker work")


def _run_target(args, flush: str) -> dict:
    topic = f"bench-{flush.lower().replace('_', '-')}"
    with tempfile.TemporaryDirectory() as tmp:
        if args.target == "fake":
            server, endpoint = start_fake(topic)
            stop, pid = (lambda: (server.kill(), server.wait())), server.pid  # noqa: E731
        else:
            server, endpoint = start_container(topic, flush, Path(tmp), dict(args.broker_key))
            stop, pid = server.stop, server.process.pid
        try:
            return asyncio.run(bench_broker(endpoint, topic, args.seconds, args.e2e_count, args.consumers, pid))
        finally:
            stop()


def median_figures(rounds: list[dict]) -> dict:
    """case -> figure -> the median over rounds (NaN-free figures only)."""
    merged: dict = {}
    for figures in rounds:
        for case, values in figures.items():
            for key, value in values.items():
                merged.setdefault(case, {}).setdefault(key, []).append(value)
    return {case: {key: statistics.median(v) for key, v in values.items() if not any(math.isnan(x) for x in v)}
            for case, values in merged.items()}


def _ratios(runs: list[dict], echoes: list[dict]) -> dict:
    """case -> [broker msg/s / echo msg/s of the same round]."""
    return {case: [run[case]["msg_s"] / echo[case]["msg_s"] for run, echo in zip(runs, echoes)]
            for case in runs[0] if case in echoes[0]}


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    return key, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=["container", "fake"], default="container")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each closed-loop case")
    parser.add_argument("--e2e-count", type=int, default=8000,
                        help="messages sent then received and acked (the receive phase should last seconds)")
    parser.add_argument("--consumers", type=int, default=4, help="receive-and-ack loops in flight (end to end)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of (echo, each flush type); medians are printed, ratios are per round")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document of the medians and per-round figures last (stable keys)")
    parser.add_argument("--broker-key", action="append", default=[], type=_key_value, metavar="KEY=VALUE",
                        help="a broker config key for the container, e.g. groupCommitWindowMicros=0 (repeatable)")
    args = parser.parse_args()
    if args.rounds < 1 or args.seconds <= 0 or args.e2e_count < 1 or args.consumers < 1:
        parser.error("--rounds, --seconds, --e2e-count and --consumers must be positive")
    progress = sys.stderr if args.json else sys.stdout   # with --json, stdout is the document alone
    print(f"python {sys.version.split()[0]}, grpcio {grpc.__version__}, {os.cpu_count()} cpus, target={args.target}, "
          f"{len(BODY)} B bodies, {args.seconds}s per case; client and server in separate processes"
          + "".join(f"; {k}={v}" for k, v in args.broker_key), file=progress)
    flushes = ("ASYNC_FLUSH",) if args.target == "fake" else ("ASYNC_FLUSH", "SYNC_FLUSH")
    echoes, runs = [], {flush: [] for flush in flushes}
    for round_no in range(1, args.rounds + 1):  # interleaved, so a drift of the machine hits all alike
        echoes.append(asyncio.run(bench_echo(args.seconds, args.consumers)))
        for flush in flushes:
            runs[flush].append(_run_target(args, flush))
            print(f"round {round_no}/{args.rounds} {flush}: " + ", ".join(
                f"{case} {figures['msg_s']:.0f}" for case, figures in runs[flush][-1].items()), flush=True, file=progress)
    echo = median_figures(echoes)
    document = {"python": sys.version.split()[0], "grpcio": grpc.__version__, "cpus": os.cpu_count(),
                "target": args.target, "bodyBytes": len(BODY), "secondsPerCase": args.seconds, "rounds": args.rounds,
                "echo": echo, "echoRounds": echoes, "flush": {}}
    for flush in flushes:
        figures = median_figures(runs[flush])
        for case, ratios in _ratios(runs[flush], echoes).items():
            figures[case]["ratio"] = statistics.median(ratios)
        title = f"{flush} ({'fake broker: no disk' if args.target == 'fake' else 'container'})"
        if not args.json:
            report(f"{title}, median of {args.rounds} round(s)", figures, echo)
        document["flush"][flush] = {"median": figures, "rounds": runs[flush]}
    if args.json:
        print(json.dumps(_finite(document), sort_keys=True))
    return 0


def _finite(value):
    """NaN (no CPU figure without /proc) as null: strict JSON."""
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 3)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


if __name__ == "__main__":
    sys.exit(main())
