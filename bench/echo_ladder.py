"""Where a single send's server CPU goes, by steps from the bare echo to the container (issue 27).

The same client (bench_broker's: one 1 KiB SendMessageRequest per call, 16 in flight, the
calls' metadata) drives, in one round and in this order, server processes that each add one
layer, and prints each one's server CPU per call (user + system, from /proc) and msg/s:

1. ``echo``: bench_broker's bare grpc.aio echo on uvloop (bytes in, the same bytes out);
2. ``const``: the client protocol's SendMessage registered as the container registers it
   (services.request_guard's GuardedServer: generic handlers, the request parsed by the
   guard), answering one constant SendMessageResponse: gRPC dispatch, parse and response;
3. ``fake``: RelayMQ's MessagingService over the in-memory fake broker
   (tests/support/messaging_server.py, on uvloop as the others): the servicer's Python,
   conversion, validation, metrics;
4. ``container``: one container, ASYNC_FLUSH (or ``--flush``): the broker and the store.

The difference between neighbours is what that layer costs per call.  ``--per-request N``
sends N messages per call (the const server answering N entries), to see which layer a
batch's cost per message sits in; figures stay per call.  ``--rounds`` repeats
the ladder; medians are printed (this VM's speed moves 2x between minutes, so compare within
a round).  A benchmark: it prints, it never fails on timing.

    .venv/bin/python bench/echo_ladder.py --seconds 4 --rounds 3
"""
from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

import bench.bench_broker as bb  # noqa: E402
from proto import messaging_definition_pb2 as d  # noqa: E402

CONST_SERVER = """
import asyncio, sys, grpc, uvloop
sys.path.insert(0, %(root)r)
from proto import messaging_definition_pb2 as d, messaging_service_pb2 as s, messaging_service_pb2_grpc as g
from services.messaging.server import bad_request_answers, _bad_command, server_options
from services.messaging.config import MessagingConfig
from services.request_guard import GuardedServer, RequestGuard

RESPONSE = s.SendMessageResponse(status=d.Status(code=d.OK, message="OK"), entries=[s.SendResultEntry(
    status=d.Status(code=d.OK, message="OK"), message_id="0" * 32, transaction_id="", offset=1)] * %(entries)d)

class Const(g.MessagingServiceServicer):
    async def SendMessage(self, request, context):
        return RESPONSE

async def main():
    server = grpc.aio.server(options=server_options(MessagingConfig()))
    g.add_MessagingServiceServicer_to_server(Const(), GuardedServer(server, RequestGuard(), bad_request_answers(), _bad_command))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print("READY", port, flush=True)
    await server.wait_for_termination()
uvloop.run(main())
"""


async def _drive(endpoint: str, pid: int, seconds: float, echo: bool, per_request: int) -> dict:
    requests = bb.SendRequests("t")
    async with grpc.aio.insecure_channel(endpoint) as channel:
        if echo:
            raw = channel.unary_unary("/bench.Echo/Call")

            async def one():
                await raw(requests.request(per_request), metadata=bb.META)
        else:
            send = bb.send_call(channel)

            async def one():
                response = await send(requests.request(per_request), metadata=bb.META)
                assert response.status.code == d.OK, response.status
        await bb.closed_loop(one, 16, 0.5)  # warm: connection, first calls
        return await bb.closed_loop(one, 16, seconds, per_request=per_request, pid=pid)


def _step(name: str, seconds: float, flush: str, per_request: int = 1) -> dict:
    if name == "container":
        with tempfile.TemporaryDirectory(prefix="ladder-") as data:
            container, endpoint = bb.start_container("t", flush, Path(data))
            try:
                return asyncio.run(_drive(endpoint, container.process.pid, seconds, False, per_request))
            finally:
                container.stop()
    if name == "fake":  # on uvloop, as the container (tests/support/messaging_server.py runs the default loop)
        code = ("import sys, uvloop; uvloop.install(); sys.path.insert(0, %r); from tests.support import messaging_server;"
                " messaging_server.main(['--topic', 't=NORMAL'])" % str(ROOT))
        process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
        endpoint = f"127.0.0.1:{bb._ready_port(process, name)}"
    else:
        code = bb.ECHO_SERVER if name == "echo" else CONST_SERVER % {"root": str(ROOT), "entries": per_request}
        process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE)
        endpoint = f"127.0.0.1:{bb._ready_port(process, name)}"
    try:
        return asyncio.run(_drive(endpoint, process.pid, seconds, name == "echo", per_request))
    finally:
        process.kill()
        process.wait()


STEPS = ("echo", "const", "fake", "container")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH")
    parser.add_argument("--per-request", type=int, default=1, help="messages per SendMessage call (1 to 1000)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.seconds <= 0 or args.rounds < 1:
        parser.error("--seconds must be positive and --rounds at least 1")
    if not 1 <= args.per_request <= 1000:
        parser.error("--per-request must be 1 to 1000")
    rounds = []
    for number in range(args.rounds):
        rounds.append({step: _step(step, args.seconds, args.flush, args.per_request) for step in STEPS})
        print(f"# round {number + 1}: " + ", ".join(f"{s} {r['cpu_ms_1k'] * args.per_request:.0f} us/call"
                                                     for s, r in rounds[-1].items()), file=sys.stderr, flush=True)
    table = {step: {"cpu_us_call": statistics.median(r[step]["cpu_ms_1k"] for r in rounds) * args.per_request,
                    "msg_s": statistics.median(r[step]["msg_s"] for r in rounds)} for step in STEPS}
    if args.json:
        print(json.dumps({"args": vars(args), "steps": table, "rounds": rounds}))
        return
    print(f"# echo_ladder: {' '.join(sys.argv)}; {platform.machine()}, python {platform.python_version()}, "
          f"grpcio {grpc.__version__}; {args.per_request} x 1 KiB per call, 16 in flight, {args.seconds} s per step, "
          f"{args.rounds} rounds (medians); container: {args.flush}")
    print(f"{'step':<11}{'server us/call':>16}{'added':>8}{'msg/s':>9}")
    previous = None
    for step in STEPS:
        row = table[step]
        added = "" if previous is None else f"{row['cpu_us_call'] - previous:+.0f}"
        print(f"{step:<11}{row['cpu_us_call']:>16.0f}{added:>8}{row['msg_s']:>9.0f}")
        previous = row["cpu_us_call"]


if __name__ == "__main__":
    main()
