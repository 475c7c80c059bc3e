"""How much of a container's CPU per message is RelayMQ's own Python, measured inside the container (issue 27).

``bench/send_path.py`` measures the servicer's Python in process, where every call runs back
to back with warm caches and a stand-in gRPC context.  This measures it where users run it:
the container is started under this script (``--serve``), which wraps the client protocol's
``SendMessage``, ``ReceiveMessage`` and ``AckMessage`` so that the CPU of every step of each
call's coroutine (``time.thread_time`` around each resumption, so time spent suspended, in
other tasks, is not counted) is added up: the *handler*, everything RelayMQ's servicer, broker
and store do on the event loop for that call.  The rest of the event loop's thread is gRPC's
and asyncio's work (and callbacks outside the calls: flush reports, timers), the other threads
are gRPC's poller and event engine and the store's flush thread.

bench_broker's client drives, in turn, its bare grpc.aio echo and the container (ASYNC_FLUSH or
``--flush``), in three of bench_broker's shapes: single sends and batches of 32 (16 in flight),
and receive (32) + ack (``--consumers`` loops over ``--count`` messages sent first).  Printed per
case and round: msg/s of each, and CPU per message: the echo's process and event-loop thread,
the container's process and event-loop thread, and of that thread the handler and the rest.

    .venv/bin/python bench/handler_cpu.py                      # ASYNC_FLUSH, 2 rounds
    .venv/bin/python bench/handler_cpu.py --flush SYNC_FLUSH --rounds 3

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STATS_ENV = "RELAYMQ_HANDLER_CPU_FILE"   # where --serve writes its figures on SIGUSR1
METHODS = ("SendMessage", "ReceiveMessage", "AckMessage")


# ------------------------------------------------------------------ inside the container (--serve)


class _Timed:
    """Awaits ``coroutine``, adding the CPU of each of its resumptions to ``slot[0]``."""

    def __init__(self, coroutine, slot: list) -> None:
        self.coroutine, self.slot = coroutine, slot

    def __await__(self):
        coroutine, slot, clock = self.coroutine, self.slot, time.thread_time
        value, error = None, None
        while True:
            began = clock()
            try:
                yielded = coroutine.throw(error) if error is not None else coroutine.send(value)
            except StopIteration as done:
                slot[0] += clock() - began
                return done.value
            except BaseException:
                slot[0] += clock() - began
                raise
            slot[0] += clock() - began
            try:
                value, error = (yield yielded), None
            except BaseException as raised:  # noqa: BLE001 - handed to the coroutine, as await does
                value, error = None, raised


def _wrap(cls, stats: dict[str, list]) -> None:
    for name in ("SendMessage", "AckMessage"):
        original, slot = getattr(cls, name), stats[name]

        async def unary(self, request, context, _original=original, _slot=slot):
            _slot[1] += 1
            return await _Timed(_original(self, request, context), _slot)
        setattr(cls, name, unary)
    original, slot = cls.ReceiveMessage, stats["ReceiveMessage"]

    async def stream(self, request, context, _original=original, _slot=slot):
        _slot[1] += 1
        responses = _original(self, request, context)
        while True:
            try:
                response = await _Timed(responses.__anext__(), _slot)
            except StopAsyncIteration:
                return
            yield response
    cls.ReceiveMessage = stream


def serve(argv: list[str]) -> int:
    """Run the container (``argv``: its command line) with its handlers timed."""
    from services.messaging.servicer import MessagingService

    stats = {name: [0.0, 0] for name in METHODS}   # CPU seconds, calls
    _wrap(MessagingService, stats)
    path = os.environ[STATS_ENV]

    def dump(*_) -> None:
        Path(path + ".tmp").write_text(json.dumps(stats))
        os.replace(path + ".tmp", path)

    def reset(*_) -> None:
        for slot in stats.values():
            slot[0], slot[1] = 0.0, 0
    signal.signal(signal.SIGUSR1, dump)
    signal.signal(signal.SIGUSR2, reset)
    from container.cli import main as container_main
    sys.argv = ["container", *argv]
    return container_main()


# ------------------------------------------------------------------ the driver


def _threads(pid: int) -> tuple[float, float]:
    """(the process's CPU seconds, its busiest thread's): the event loop's, in both servers."""
    from bench.thread_split import threads
    found = threads(pid)
    return sum(found.values()), max(found.values(), default=0.0)


class Handlers:
    """The --serve process's figures: reset, then read after a case."""

    def __init__(self, pid: int, path: Path) -> None:
        self.pid, self.path = pid, path

    def reset(self) -> None:
        os.kill(self.pid, signal.SIGUSR2)
        time.sleep(0.05)

    def read(self) -> dict[str, list]:
        before = self.path.stat().st_mtime_ns if self.path.exists() else 0
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if self.path.exists() and self.path.stat().st_mtime_ns != before:
                return json.loads(self.path.read_text())
            time.sleep(0.02)
        raise RuntimeError("the container did not write its handler figures")


async def _case(name: str, target, endpoint: str, pid: int, seconds: float, args, handlers: Handlers | None) -> dict:
    """One shape against one server: msg/s and CPU per message (process, loop thread, handler)."""
    import grpc

    import bench.bench_broker as bb
    from proto import messaging_service_pb2_grpc as g

    async with grpc.aio.insecure_channel(endpoint, options=[("grpc.max_receive_message_length", -1)]) as channel:
        if target == "echo":
            call, stream = channel.unary_unary("/bench.Echo/Call"), channel.unary_stream("/bench.Echo/Stream")
            from proto import messaging_service_pb2 as s
            one = s.SendMessageRequest(messages=[bb.message("t")]).SerializeToString()
            many = s.SendMessageRequest(messages=[bb.message("t") for _ in range(32)]).SerializeToString()

            async def receive_like():   # bench_broker's receive shape: 34 responses, then one unary call
                async for _ in stream(one, metadata=bb.META):
                    pass
                await call(one, metadata=bb.META)
            shapes = {"send": (lambda: call(one, metadata=bb.META), 16, 1),
                      "batch32": (lambda: call(many, metadata=bb.META), 16, 32),
                      "receive+ack": (receive_like, args.consumers, 32)}
        else:
            shapes = {"send": (bb.senders(channel, TOPIC, 1), 16, 1), "batch32": (bb.senders(channel, TOPIC, 32), 16, 32)}
        if name in shapes:
            work, concurrency, per_request = shapes[name]
            await bb.closed_loop(work, concurrency, min(0.5, seconds), per_request=per_request)
            if handlers is not None:
                handlers.reset()
            began = _threads(pid)
            result = await bb.closed_loop(work, concurrency, seconds, per_request=per_request)
            ended = _threads(pid)
            messages = result["requests"] * per_request
            msg_s = result["msg_s"]
        else:   # the container's receive + ack: bench_broker's end to end, measured over its consume phase
            stub = g.MessagingServiceStub(channel)
            send = bb.send_call(channel)
            await bb.end_to_end(stub, send, endpoint, TOPIC, min(2000, args.count), args.consumers)  # warm
            if handlers is not None:
                handlers.reset()
            began = _threads(pid)
            marks = {}
            result = await bb.end_to_end(stub, send, endpoint, TOPIC, args.count, args.consumers,
                                         pid=pid, on_consume=lambda: marks.setdefault("began", _threads(pid)))
            ended = _threads(pid)
            began = marks.get("began", began)
            messages, msg_s = result["acked"], result["receive_ack_msg_s"]
    figures = {"msg_s": msg_s, "process_us": 1e6 * (ended[0] - began[0]) / messages,
               "loop_us": 1e6 * (ended[1] - began[1]) / messages}
    if handlers is not None:
        found = handlers.read()
        methods = ("SendMessage",) if name != "receive+ack" else ("ReceiveMessage", "AckMessage")
        figures["handler_us"] = 1e6 * sum(found[m][0] for m in methods) / messages
    return figures


TOPIC = "handler-cpu"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        return serve(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each send case")
    parser.add_argument("--count", type=int, default=16000, help="messages sent, then received and acked")
    parser.add_argument("--consumers", type=int, default=4, help="receive-and-ack loops in flight")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print one JSON document last")
    args = parser.parse_args()
    if args.seconds <= 0 or args.rounds < 1 or args.count < 64 or args.consumers < 1:
        parser.error("--seconds and --rounds must be positive, --count at least 64, --consumers at least 1")
    import bench.bench_broker as bb
    from tests.support.container_process import ContainerProcess

    print(f"# handler_cpu: {' '.join(sys.argv)}; 1 KiB messages; container {args.flush}; us of CPU per message")
    cases = ("send", "batch32", "receive+ack")
    rows: dict[str, list[dict]] = {case: [] for case in cases}
    with tempfile.TemporaryDirectory(prefix="handler-cpu-") as work:
        stats = Path(work) / "handlers.json"
        os.environ[STATS_ENV] = str(stats)
        echo = subprocess.Popen([sys.executable, "-c", bb.ECHO_SERVER], stdout=subprocess.PIPE)
        container = ContainerProcess(Path(work) / "container", brokers=[{"brokerName": "broker-a", "flushDiskType": args.flush}],
                                     launcher=[sys.executable, str(Path(__file__).resolve()), "--serve"])
        try:
            echo_endpoint = f"127.0.0.1:{bb._ready_port(echo, 'echo server')}"
            container.start()
            deadline = time.monotonic() + 30
            while container.admin("update-topic", "--topic", TOPIC, "--type", "NORMAL", "--namesrv",
                                  container.namesrv).returncode != 0:
                if time.monotonic() > deadline:
                    raise RuntimeError("update-topic failed")
                time.sleep(0.2)
            handlers = Handlers(container.process.pid, stats)
            for number in range(1, args.rounds + 1):
                for case in cases:
                    e = asyncio.run(_case(case, "echo", echo_endpoint, echo.pid, args.seconds, args, None))
                    c = asyncio.run(_case(case, "container", container.endpoint, container.process.pid, args.seconds,
                                          args, handlers))
                    row = {"echo": e, "container": c, "ratio": c["msg_s"] / e["msg_s"]}
                    rows[case].append(row)
                    print(f"round {number} {case:<12} echo {e['msg_s']:8.0f} msg/s, {e['process_us']:6.1f} us "
                          f"(loop {e['loop_us']:6.1f}) | container {c['msg_s']:8.0f} msg/s ({row['ratio']:.2f}), "
                          f"{c['process_us']:6.1f} us (loop {c['loop_us']:6.1f}: handler {c['handler_us']:6.1f}, "
                          f"rest {c['loop_us'] - c['handler_us']:6.1f})", flush=True)
        finally:
            echo.kill()
            echo.wait()
            if container.process is not None:
                container.stop()
    summary = _summary(rows)
    if args.json:
        print(json.dumps({"args": vars(args), "rounds": rows, "medians": summary}, sort_keys=True))
    return 0


def _summary(rows: dict[str, list[dict]]) -> dict:
    """Print and return each case's medians."""
    print("\nmedians, us of CPU per message")
    print(f"{'case':<12} {'ratio':>5} {'echo':>7} {'echo loop':>9} {'container':>9} {'loop':>7} {'handler':>7} "
          f"{'rest':>7} {'handler/gap':>11}")
    summary = {}
    for case, found in rows.items():
        def med(key: str, side: str = "container") -> float:
            return statistics.median(r[side][key] for r in found)
        gap = med("process_us") - med("process_us", "echo")
        summary[case] = {"ratio": statistics.median(r["ratio"] for r in found), "echo_us": med("process_us", "echo"),
                         "echo_loop_us": med("loop_us", "echo"), "container_us": med("process_us"),
                         "loop_us": med("loop_us"), "handler_us": med("handler_us")}
        m = summary[case]
        print(f"{case:<12} {m['ratio']:5.2f} {m['echo_us']:7.1f} {m['echo_loop_us']:9.1f} {m['container_us']:9.1f} "
              f"{m['loop_us']:7.1f} {m['handler_us']:7.1f} {m['loop_us'] - m['handler_us']:7.1f} "
              f"{m['handler_us'] / gap if gap > 0 else float('nan'):11.2f}")
    print("handler: RelayMQ's servicer, broker and store on the event loop (every resumption of each call's "
          "coroutine); rest: the loop thread's other work (gRPC, asyncio); handler/gap: the handler's share of "
          "the container's CPU per message above the echo's")
    return summary


if __name__ == "__main__":
    sys.exit(main())
