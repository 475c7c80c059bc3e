"""The Python CPU of one send through RelayMQ's servicer, in process, without gRPC (issue 27).

A real container (``tests/support/inprocess_container.py``: embedded nameserver, broker-a,
``--flush``) runs on a background loop; on that loop a MessagingService over the container's
directory is called directly with parsed SendMessageRequests (one 1 KiB message, or
``--batch`` messages) and a stand-in gRPC context carrying the official client's metadata.
Measured: the loop thread's CPU time per call (``time.thread_time``), so a busy machine
slows the run but hardly moves the figure; medians of ``--rounds``.  ``--case receive``
measures instead, after each round's sends, a consumer's ReceiveMessage (batch 32) and one
AckMessage of what it got, until every message of the round is acked: CPU per message.  What it leaves out is
gRPC's own work (dispatch, parse, serialize: bench/echo_ladder.py measures those), so the
figure is the part of a send that RelayMQ's Python decides.

    .venv/bin/python bench/send_path.py --calls 20000 --rounds 5
    .venv/bin/python bench/send_path.py --calls 5000 --rounds 2 --profile 40   # where it goes (cProfile)
    .venv/bin/python bench/send_path.py --case receive --calls 8000 --rounds 3
    .venv/bin/python bench/send_path.py --replicated --in-flight 16 --calls 5000 --rounds 3
    .venv/bin/python bench/send_path.py --replicated --in-flight 16 --idle-polls 200   # consumers waiting elsewhere
    .venv/bin/python bench/send_path.py --batch 32 --broker-key sendDedupeMaxEntries=0   # without the memory
    .venv/bin/python bench/send_path.py --calls 3000 --rounds 3 --pollute 16384   # caches as in the container

``--pollute KIB`` reproduces what a call meets in the container: before every call (one send
at a time; for ``--case receive``, before every receive and every ack) it writes one byte in
every cache line of a KIB-KiB buffer, which evicts what the previous call left in the CPU's
caches, and it counts only the calls' own CPU.  In the container a single send's Python costs
about what it costs here with ``--pollute 16384`` (bench/handler_cpu.py measures it there):
gRPC's and the kernel's work between two calls leaves the next one's code and data cold.

``--broker-key KEY=VALUE`` sets a broker config key (on both brokers with ``--replicated``):
the same run with and without a feature shows what it costs.

``--idle-polls N`` (with ``--replicated``): N consumers of their own groups long-poll a topic
nobody sends to, on the master, while the sends run: what waiting consumers cost a master.

``--replicated``: a second in-process container holds broker-a's slave (brokerId 1, SLAVE),
the master is a SYNC_MASTER, both SYNC_FLUSH with inSyncReplicas 2, so every send waits for
the slave's fdatasync over the real replication link on loopback.  Each container runs on
its own loop thread (one process, one GIL), and the figures are per call: the master's loop,
the slave's loop, and every other thread of the process (the flush threads, the slave's
writer) together.  ``--in-flight N`` keeps N sends outstanding (the replication batches and
group commits depend on it).  ``--profile`` then profiles both loops.
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_broker import BODY, ID_PREFIX, _key_value  # noqa: E402
from proto import messaging_definition_pb2 as d  # noqa: E402
from proto import messaging_service_pb2 as s  # noqa: E402

META = (("x-mq-client-id", "bench@1"), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "v2"),
        ("x-mq-client-version", "5.0.0"), ("x-mq-request-id", "0" * 36))


class Context:
    """What the servicer asks of a grpc.aio context on the send path."""

    def invocation_metadata(self):
        return META

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"

    def time_remaining(self) -> float:
        return 30.0  # a receive's long poll needs its deadline past minLongPolling + the reserve


class Polluter:
    """Evicts the CPU caches: one byte written in every 64-byte line of a ``kib`` KiB buffer."""

    def __init__(self, kib: int) -> None:
        import numpy
        self.buffer = numpy.zeros(kib << 10, dtype=numpy.uint8)

    def __call__(self) -> None:
        self.buffer[::64] += 1


async def _timed(pollute: Polluter | None, call, *args):
    """``await call(*args)`` and the CPU it took on this thread, after an eviction when ``pollute``."""
    if pollute is not None:
        pollute()
    began = time.thread_time()
    result = await call(*args)
    return result, time.thread_time() - began


async def _collected(stream, *args) -> list:
    """Every response of the server stream ``stream(*args)``."""
    return [item async for item in stream(*args)]


async def _start_idle_polls(service, count: int, context) -> list[asyncio.Task]:
    """``count`` consumers, each of its own group, long-polling topic ``idle`` (nobody sends
    to it) again and again, on this loop, until their tasks are cancelled."""
    async def poll(number: int) -> None:
        group = d.Resource(name=f"idle-{number}")
        queue = d.MessageQueue(topic=d.Resource(name="idle"), id=-1, broker=d.Broker(name="broker-a"))
        while True:
            request = s.ReceiveMessageRequest(group=group, message_queue=queue, batch_size=32,
                                              filter_expression=d.FilterExpression(type=d.TAG, expression="*"))
            request.invisible_duration.seconds = 60
            request.long_polling_timeout.seconds = 20
            await _collected(service.ReceiveMessage, request, context)
    return [asyncio.get_running_loop().create_task(poll(number)) for number in range(count)]


async def _stop(tasks: list[asyncio.Task]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _receive_round(service, topic: str, count: int, number: int, context, profile=None,
                         pollute: Polluter | None = None) -> float:
    """Receive (batch 32) and ack until ``count`` messages are acked: the loop thread's CPU per
    message (with ``pollute``: the receives' and acks' own CPU, each after an eviction)."""
    group = d.Resource(name=f"g{number}")
    queue = d.MessageQueue(topic=d.Resource(name=topic), id=-1, broker=d.Broker(name="broker-a"))
    acked, own = 0, 0.0
    if profile is not None:
        profile.enable()
    began = time.thread_time()
    while acked < count:
        request = s.ReceiveMessageRequest(group=group, message_queue=queue, batch_size=32,
                                          filter_expression=d.FilterExpression(type=d.TAG, expression="*"))
        request.invisible_duration.seconds = 60
        request.long_polling_timeout.seconds = 1
        answers, spent = await _timed(pollute, _collected, service.ReceiveMessage, request, context)
        own += spent
        got = [r.message for r in answers if r.HasField("message")]
        if not got:
            raise RuntimeError(f"nothing more to receive after {acked} of {count}: {answers[0].status}")
        entries = [s.AckMessageEntry(message_id=m.system_properties.message_id,
                                     receipt_handle=m.system_properties.receipt_handle) for m in got]
        ack = s.AckMessageRequest(group=group, topic=d.Resource(name=topic), entries=entries)
        response, spent = await _timed(pollute, service.AckMessage, ack, context)
        own += spent
        if response.status.code != d.OK:
            raise RuntimeError(response.status)
        acked += len(got)
    spent = (own if pollute is not None else time.thread_time() - began) / acked
    if profile is not None:
        profile.disable()
    return spent


def requests(topic: str, count: int, batch: int) -> list:
    made = []
    for number in range(count):
        messages = [d.Message(topic=d.Resource(name=topic), body=BODY, system_properties=d.SystemProperties(
            message_id=f"{ID_PREFIX}{number * batch + i:016X}", message_type=d.NORMAL, body_encoding=d.IDENTITY))
            for i in range(batch)]
        made.append(s.SendMessageRequest(messages=messages))
    return made


async def _round(service, calls: list, context, profile=None, in_flight: int = 1, pollute: Polluter | None = None) -> float:
    if profile is not None:
        profile.enable()
    if pollute is not None:  # one at a time, each after an eviction; only the calls' own CPU
        own = 0.0
        for request in calls:
            response, spent = await _timed(pollute, service.SendMessage, request, context)
            own += spent
            if response.status.code != d.OK:
                raise RuntimeError(response.status)
        if profile is not None:
            profile.disable()
        return own / len(calls)
    began = time.thread_time()
    pending = iter(calls)

    async def sender():
        for request in pending:
            response = await service.SendMessage(request, context)
            if response.status.code != d.OK:
                raise RuntimeError(response.status)
    await asyncio.gather(*(sender() for _ in range(in_flight)))
    spent = (time.thread_time() - began) / len(calls)
    if profile is not None:
        profile.disable()
    return spent


def thread_cpu(thread: threading.Thread) -> float:
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def replicated(args) -> tuple[list[dict], list]:
    """--replicated: per call, the master's loop, the slave's loop and the other threads (us)."""
    from tests.support.inprocess_container import InProcessContainer

    ha = {"flushDiskType": "SYNC_FLUSH", "totalReplicas": 2, "inSyncReplicas": 2, "minInSyncReplicas": 2,
          **_broker_keys(args)}
    figures, profiles = [], []
    with tempfile.TemporaryDirectory(prefix="send-path-") as data:
        master = InProcessContainer(Path(data) / "master",
                                    brokers=[{"brokerName": "broker-a", "brokerRole": "SYNC_MASTER", **ha}], uvloop=True)
        slave = InProcessContainer(Path(data) / "slave", brokers=[{"brokerName": "broker-a", "brokerId": 1,
                                                                   "brokerRole": "SLAVE", **ha}],
                                   namesrv_port=master.spec.namesrv_port, uvloop=True)
        idle: list[asyncio.Task] = []
        try:
            service, context = _service(master), Context()
            _wait_replicating(master, service, context)
            if args.idle_polls:
                master.background.run(_create_topic(master.container, "idle"))
                idle = master.background.run(_start_idle_polls(service, args.idle_polls, context))
                time.sleep(1.0)  # every poll registered and waiting
            loops = (master.background.thread, slave.background.thread)
            for number in range(args.rounds):
                calls = _fresh(requests("t", args.calls, args.batch), number)
                profile = args.profile and number == args.rounds - 1
                if profile:
                    profiles = [cProfile.Profile(time.thread_time), cProfile.Profile(time.thread_time)]
                    slave.background.run(_enable(profiles[1]))
                process, own = time.process_time(), [thread_cpu(t) for t in loops]
                master.background.run(_round(service, calls, context, profiles[0] if profile else None, args.in_flight),
                                      timeout_s=600)
                if profile:
                    slave.background.run(_disable(profiles[1]))
                spent = [thread_cpu(t) - before for t, before in zip(loops, own)]
                total = time.process_time() - process
                figures.append({"master loop": spent[0] / args.calls * 1e6, "slave loop": spent[1] / args.calls * 1e6,
                                "other threads": (total - sum(spent)) / args.calls * 1e6})
        finally:
            if idle:
                master.background.run(_stop(idle))
            slave.stop()
            master.stop()
    return figures, profiles


def _broker_keys(args) -> dict:
    """--broker-key values, integers as integers (the config file is TOML)."""
    return {key: int(value) if value.lstrip("-").isdigit() else value for key, value in args.broker_key}


def _fresh(calls: list, number: int) -> list:
    for request in calls:  # fresh ids each round: no deduplication
        for m in request.messages:
            m.system_properties.message_id = f"{number:04X}{m.system_properties.message_id[4:]}"
    return calls


def _wait_replicating(master, service, context, timeout_s: float = 30.0) -> None:
    """Until a send is acknowledged: the slave connected and joined (inSyncReplicas 2)."""
    deadline = time.monotonic() + timeout_s
    probe = requests("t", 1, 1)[0]
    probe.messages[0].system_properties.message_id = "F" * 32
    while True:
        response = master.background.run(service.SendMessage(probe, context))
        if response.status.code == d.OK:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the slave never joined: {response.status}")
        time.sleep(0.2)


async def _enable(profile) -> None:
    profile.enable()


async def _disable(profile) -> None:
    profile.disable()


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--case", choices=("send", "receive"), default="send",
                        help="send: per SendMessage call; receive: per message received (batch 32) and acked")
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH")
    parser.add_argument("--replicated", action="store_true",
                        help="broker-a with a slave in a second in-process container (SYNC_MASTER, SYNC_FLUSH)")
    parser.add_argument("--in-flight", type=int, default=1, help="sends outstanding at once")
    parser.add_argument("--broker-key", action="append", default=[], type=_key_value, metavar="KEY=VALUE",
                        help="a broker config key for broker-a (repeatable), e.g. sendDedupeMaxEntries=0 to see "
                             "what the de-duplication memory costs")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also profile the last round (cProfile, on the loop thread) and print its N costliest "
                             "functions by own time, per call (the profiler's overhead inflates every figure)")
    parser.add_argument("--idle-polls", type=int, default=0, metavar="N",
                        help="with --replicated: N consumers (each its own group) long-polling a topic nobody sends "
                             "to, on the master, while the sends run")
    parser.add_argument("--pollute", type=int, default=0, metavar="KIB",
                        help="evict the caches before every call by writing a KIB-KiB buffer (one send at a time); "
                             "16384 reproduces the container's single sends")
    args = parser.parse_args()
    if args.calls < 1 or args.rounds < 1 or not 1 <= args.batch <= 32 or not 1 <= args.in_flight <= 256:
        parser.error("--calls and --rounds at least 1, --batch 1..32, --in-flight 1..256")
    if args.pollute < 0 or args.pollute > (1 << 20) or (args.pollute and (args.in_flight != 1 or args.replicated)):
        parser.error("--pollute 0..1048576 KiB, with one send in flight and without --replicated")
    if args.replicated and args.case != "send":
        parser.error("--replicated measures sends only")
    if not 0 <= args.idle_polls <= 10_000 or (args.idle_polls and not args.replicated):
        parser.error("--idle-polls 0..10000, with --replicated")
    return args


def main() -> None:
    args = _arguments()
    polluter = Polluter(args.pollute) if args.pollute else None
    if args.replicated:
        figures, profiles = replicated(args)
        print(f"# send_path: {' '.join(sys.argv)}; broker-a SYNC_MASTER + slave, SYNC_FLUSH, {args.batch} message(s) "
              f"of 1 KiB per send, {args.in_flight} in flight, {args.calls} sends x {args.rounds} rounds, CPU per call (us)")
        for part in figures[0]:
            print(f"{part:<14} rounds: {', '.join(f'{f[part]:.1f}' for f in figures)}; "
                  f"median {statistics.median(f[part] for f in figures):.1f}")
        print(f"{'total':<14} median {statistics.median(sum(f.values()) for f in figures):.1f}")
        for name, profile in zip(("master", "slave"), profiles):
            print(f"--- {name} loop")
            _print_profile(profile, args.calls, args.profile)
        return
    from tests.support.inprocess_container import InProcessContainer

    with tempfile.TemporaryDirectory(prefix="send-path-") as data:
        broker = {"brokerName": "broker-a", "flushDiskType": args.flush, **_broker_keys(args)}
        node = InProcessContainer(Path(data), brokers=[broker], uvloop=True)
        try:
            service, context = _service(node), Context()
            figures = []
            for number in range(args.rounds):
                calls = requests("t", args.calls, args.batch)
                calls = _fresh(calls, number)
                profile = cProfile.Profile(time.thread_time) if args.profile and number == args.rounds - 1 else None
                if args.case == "send":
                    figures.append(node.background.run(_round(service, calls, context, profile, args.in_flight,
                                                              polluter), timeout_s=600) * 1e6)
                    continue
                node.background.run(_round(service, calls, context), timeout_s=600)
                figures.append(node.background.run(_receive_round(service, "t", args.calls * args.batch, number, context,
                                                                  profile, polluter), timeout_s=600) * 1e6)
        finally:
            node.stop()
    unit = "call" if args.case == "send" else "message received and acked"
    whose = (f"caches evicted before every call ({args.pollute} KiB), the calls' own" if args.pollute
             else "the loop thread's")
    print(f"# send_path: {' '.join(sys.argv)}; {args.flush}{''.join(f', {k}={v}' for k, v in args.broker_key)}, {args.batch} message(s) of 1 KiB per send, "
          f"{args.calls} sends x {args.rounds} rounds, {whose} CPU per {unit} (us)")
    print(f"rounds: {', '.join(f'{f:.1f}' for f in figures)}")
    if args.case == "send":
        print(f"median: {statistics.median(figures):.1f} us per call, {statistics.median(figures) / args.batch:.1f} us per message")
    else:
        print(f"median: {statistics.median(figures):.1f} us per message received and acked")
    if args.profile:
        _print_profile(profile, args.calls, args.profile)


def _print_profile(profile, calls: int, top: int) -> None:
    stats = pstats.Stats(profile)
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:top]  # (file, line, name) -> (cc, nc, tt, ct, callers)
    print("profile of the last round (cProfile; own and cumulative time per call, us; calls per send):")
    for (path, line, name), (_, ncalls, own, cumulative, _) in rows:
        where = f"{Path(path).parent.name}/{Path(path).name}:{line}" if line else path
        print(f"  {own / calls * 1e6:6.2f} {cumulative / calls * 1e6:7.2f}  {ncalls / calls:5.1f}  {name}  {where}")


def _service(node):
    """The client protocol's servicer over ``node``'s container, topic ``t`` created on its broker."""
    from services.messaging.servicer import MessagingService
    container = node.container
    node.background.run(_create_topic(container))
    return MessagingService(container.directory, container.messaging, container.clock, container.directory.registry)


async def _create_topic(container, name: str = "t") -> None:
    from metadata.topic_config import TopicConfig
    hosted = next(iter(container.hosted.values()))
    hosted.broker.topics.upsert(TopicConfig(name), container.clock.now_ms())


if __name__ == "__main__":
    main()
