"""Build a backlog with the official Python client, then drain it: the load of issue 23.

``python backlog.py produce --endpoint H:P --topic T --fifo-topic F --groups 8 --rate 50 --seconds 25``
starts one thread per FIFO message group and one NORMAL thread; each sends 1 KiB messages
synchronously (``producer.send``), at most ``--rate`` a second, as an application with a
stream of orders would; a FIFO thread retries a failed message until it is acknowledged (a
FIFO application does not skip one), the NORMAL thread gives a failed one up.

``python backlog.py drain --endpoint H:P --topic T --group G [--fifo-topic F --fifo-group FG]``
drains with one SimpleConsumer per consumer group, each on its own thread: ``receive(32, 30)``,
then each message in order is handled and acked, until ``--idle-s`` pass with nothing new or
``--max-s`` in all.  ``--ack sync`` waits for each ack before the next message; ``--ack
async`` (the default) hands each ack to a pool as the message is handled and waits for the
batch's acks before the next receive, as an application that does not hold its messages
back for the broker's round trips (the client's own ``ack_async`` returns no future in 5.1.2).

Bodies are ``kind:group:seq``.  Every event is one ``@@{json}`` line with ``t`` =
time.monotonic() (shared by the processes of one machine); ``recv`` events of one consumer
come in the order it received them, which is what FIFO order is checked on.  Imports only
the official client and the standard library; stops on SIGTERM.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

_OUT = threading.Lock()
STOP = threading.Event()


def emit(event: str, **fields) -> None:
    line = "@@" + json.dumps({"event": event, "t": time.monotonic(), **fields}, sort_keys=True) + "\n"
    with _OUT:
        sys.stdout.write(line)
        sys.stdout.flush()


def message(topic: str, body: str, size: int, group: str | None = None) -> Message:
    m = Message()
    m.topic = topic
    m.body = body.encode().ljust(size, b".")
    if group:
        m.message_group = group
    return m


def send_loop(producer: Producer, args, topic: str, kind: str, group: str, until: float) -> None:
    """Synchronous sends of one thread, at most ``args.rate`` a second, until ``until``."""
    period, next_at, seq = 1.0 / args.rate, time.monotonic(), 0
    while not STOP.is_set() and time.monotonic() < until:
        seq += 1
        body = f"{kind}:{group}:{seq}"
        while not STOP.is_set():
            sent_at = time.monotonic()
            try:
                receipt = producer.send(message(topic, body, args.size, group if kind == "fifo" else None))
            except Exception as failure:  # noqa: BLE001 - reported; FIFO retries the same message
                emit("fail", kind=kind, body=body, sent=sent_at, error=f"{type(failure).__name__}: {str(failure)[:200]}")
                if kind == "fifo":
                    STOP.wait(0.05)
                    continue
                break
            emit("ack", kind=kind, body=body, sent=sent_at, id=receipt.message_id,
                 queue=str(receipt.message_queue) if receipt.message_queue else "")
            break
        next_at = max(next_at + period, time.monotonic() - 1.0)  # no burst after a stall
        delay = next_at - time.monotonic()
        if delay > 0:
            STOP.wait(delay)


def produce(args) -> int:
    topics = tuple(t for t in (args.topic, args.fifo_topic) if t)
    producer = Producer(ClientConfiguration(args.endpoint, Credentials()), topics)
    producer.startup()
    emit("started", role="producer")
    until = time.monotonic() + args.seconds
    threads = []
    if args.topic:
        threads.append(threading.Thread(target=send_loop, args=(producer, args, args.topic, "normal", "", until)))
    for index in range(args.groups if args.fifo_topic else 0):
        threads.append(threading.Thread(target=send_loop, args=(producer, args, args.fifo_topic, "fifo", f"g{index}", until)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    producer.shutdown()
    emit("stopped", role="producer")
    return 0


def ack_one(consumer: SimpleConsumer, group: str, received) -> None:
    try:
        consumer.ack(received)
    except Exception as failure:  # noqa: BLE001 - redelivered later: counted as a duplicate
        emit("ack-fail", group=group, body=received.body.rstrip(b".").decode(),
             error=f"{type(failure).__name__}: {str(failure)[:200]}")


def drain_one(args, group: str, topic: str, state: dict) -> None:
    consumer = SimpleConsumer(ClientConfiguration(args.endpoint, Credentials()), group, {topic: FilterExpression()},
                              await_duration=args.await_s)
    acks = ThreadPoolExecutor(max_workers=16) if args.ack == "async" else None
    consumer.startup()
    emit("started", role="consumer", group=group)
    started = last_new = time.monotonic()
    received_count = 0
    expected = args.expect_fifo if group == args.fifo_group else args.expect_normal
    seen: set[bytes] = set()
    while not STOP.is_set():
        now = time.monotonic()
        if now - last_new >= args.idle_s or now - started >= args.max_s or 0 < expected <= len(seen):
            break  # (everything expected came: waiting for the idle time is a long poll on nothing)
        began = time.monotonic()
        try:
            messages = consumer.receive(32, args.invisible_s) or []
        except Exception as failure:  # noqa: BLE001 - a consumer keeps polling
            emit("receive-fail", group=group, error=f"{type(failure).__name__}: {str(failure)[:200]}")
            STOP.wait(0.05)
            continue
        emit("receive", group=group, n=len(messages), began=began)
        pending = []
        for received in messages:  # handled in order, each acked once handled
            seen.add(received.body)
            emit("recv", group=group, body=received.body.rstrip(b".").decode(), attempt=received.delivery_attempt,
                 id=received.message_id)
            if acks is None:
                ack_one(consumer, group, received)
            else:
                pending.append(acks.submit(ack_one, consumer, group, received))
        for future in pending:
            future.result()
        if messages:
            received_count += len(messages)
            last_new = time.monotonic()
            state["last"] = max(state.get("last", 0.0), last_new)
    if acks is not None:
        acks.shutdown()
    consumer.shutdown()
    emit("drained", group=group, received=received_count, last=last_new, idle=time.monotonic() - last_new >= args.idle_s)


def drain(args) -> int:
    pairs = [(args.group, args.topic)] if args.topic else []
    if args.fifo_topic:
        pairs.append((args.fifo_group, args.fifo_topic))
    state: dict = {}
    threads = [threading.Thread(target=drain_one, args=(args, group, topic, state)) for group, topic in pairs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    emit("stopped", role="consumer")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("produce", "drain"))
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--topic", default="", help="the NORMAL topic ('' for none)")
    parser.add_argument("--fifo-topic", default="", help="the FIFO topic ('' for none)")
    parser.add_argument("--group", default="backlog-group", help="consumer group of the NORMAL topic")
    parser.add_argument("--fifo-group", default="backlog-fifo-group", help="consumer group (--fifo) of the FIFO topic")
    parser.add_argument("--groups", type=int, default=8, help="FIFO message groups, one sending thread each")
    parser.add_argument("--rate", type=float, default=50.0, help="sends per second per thread, at most")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=25.0)
    parser.add_argument("--await-s", type=int, default=20, help="the consumers' long poll (the client's default)")
    parser.add_argument("--invisible-s", type=int, default=30)
    parser.add_argument("--idle-s", type=float, default=40.0, help="stop draining after this long with nothing new")
    parser.add_argument("--max-s", type=float, default=200.0, help="stop draining after this long in all")
    parser.add_argument("--expect-normal", type=int, default=0,
                        help="stop the NORMAL drain once this many distinct messages came (0: wait for --idle-s)")
    parser.add_argument("--expect-fifo", type=int, default=0,
                        help="stop the FIFO drain once this many distinct messages came (0: wait for --idle-s)")
    parser.add_argument("--ack", choices=("async", "sync"), default="async",
                        help="wait for each ack before the next message (sync), or for the batch's before the next receive")
    args = parser.parse_args()
    if args.rate <= 0 or args.groups < 0 or args.seconds <= 0 or min(args.expect_normal, args.expect_fifo) < 0:
        parser.error("--rate and --seconds must be positive, --groups and --expect-* at least 0")
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    return produce(args) if args.mode == "produce" else drain(args)


if __name__ == "__main__":
    sys.exit(main())
