"""The official Python client under a steady load, for failover tests and benchmarks.

``python steady.py produce --endpoint H:P --topic T --fifo-topic F --rate 200 --seconds 30``
sends NORMAL messages to T at ``--rate`` per second (``send_async``, at most ``--in-flight``
outstanding, as an application with a steady stream would) and FIFO messages to F, one at a
time per message group (``--groups``), each retried until acknowledged (a FIFO application
does not skip a message).  ``consume`` receives both topics with a SimpleConsumer and acks
every message (a batch's acks in parallel, ``--ack-threads``).  Bodies are ``kind:group:seq``;
every event is one ``@@{json}`` line with
``t`` = time.monotonic() (CLOCK_MONOTONIC, shared by the processes of one machine).
The client keeps its default settings: request timeout 3 s, its own retries.  Imports only
the official client and the standard library; stops on SIGTERM or after ``--seconds``.  Either
role pauses on SIGUSR1 and resumes on SIGUSR2: a consumer acks what it holds and receives
nothing more (an application whose downstream stalls: a backlog builds meanwhile), a producer
lets its sends in flight finish and sends nothing more (emitting ``held`` and ``released``),
then resumes its schedule from the moment it is released (no burst).
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
RUNNING = threading.Event()  # receives and sends go on only while set (SIGUSR1 clears it, SIGUSR2 sets it)
RUNNING.set()
PAUSED = threading.Event()   # its opposite, for the thread that reports a producer's holds


def pause(*_) -> None:
    RUNNING.clear()
    PAUSED.set()


def resume(*_) -> None:
    PAUSED.clear()
    RUNNING.set()


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


def held() -> bool:
    """Wait while paused (SIGUSR1); True when it waited."""
    if RUNNING.is_set():
        return False
    while not STOP.is_set() and not RUNNING.wait(0.2):
        pass
    return True


def normal_loop(producer: Producer, args) -> None:
    slots = threading.BoundedSemaphore(args.in_flight)
    period, next_at, seq = 1.0 / args.rate, time.monotonic(), 0
    while not STOP.is_set():
        if held():
            next_at = time.monotonic()
        delay = next_at - time.monotonic()
        if delay > 0:
            STOP.wait(delay)
        next_at += period
        if not slots.acquire(timeout=1.0):
            continue
        seq += 1
        body = f"normal::{seq}"
        sent_at = time.monotonic()

        def done(future, body=body, sent_at=sent_at) -> None:
            slots.release()
            try:
                receipt = future.result()
            except Exception as failure:  # noqa: BLE001 - reported, the message is given up
                emit("fail", kind="normal", body=body, sent=sent_at, error=f"{type(failure).__name__}: {str(failure)[:200]}")
                return
            emit("ack", kind="normal", body=body, sent=sent_at, id=receipt.message_id,
                 queue=str(receipt.message_queue) if receipt.message_queue else "")
        try:
            producer.send_async(message(args.topic, body, args.size)).add_done_callback(done)
        except Exception as failure:  # noqa: BLE001
            slots.release()
            emit("fail", kind="normal", body=body, sent=sent_at, error=f"{type(failure).__name__}: {str(failure)[:200]}")


def fifo_loop(producer: Producer, args, group: str) -> None:
    """One message group: each message sent once the one before is acknowledged, started on a
    schedule of ``--fifo-rate`` a second (a late one goes at once; a stall is not made up in a burst)."""
    seq, next_at = 0, time.monotonic()
    while not STOP.is_set():
        if held():
            next_at = time.monotonic()
        seq += 1
        body = f"fifo:{group}:{seq}"
        while not STOP.is_set():
            sent_at = time.monotonic()
            try:
                receipt = producer.send(message(args.fifo_topic, body, args.size, group))
            except Exception as failure:  # noqa: BLE001 - a FIFO application retries the same message
                emit("fail", kind="fifo", body=body, sent=sent_at, error=f"{type(failure).__name__}: {str(failure)[:200]}")
                STOP.wait(args.retry_pause_s)
                continue
            emit("ack", kind="fifo", body=body, sent=sent_at, id=receipt.message_id,
                 queue=str(receipt.message_queue) if receipt.message_queue else "")
            break
        if args.fifo_rate:
            next_at = max(next_at + 1.0 / args.fifo_rate, time.monotonic() - 1.0)
            STOP.wait(max(0.0, next_at - time.monotonic()))


def report_holds() -> None:
    """A producer's ``held`` and ``released`` events, when a pause starts and ends."""
    while not STOP.is_set():
        if PAUSED.wait(0.5):
            emit("held")
            while not STOP.is_set() and not RUNNING.wait(0.2):
                pass
            emit("released")


def produce(args) -> int:
    topics = tuple(t for t in (args.topic, args.fifo_topic) if t)
    producer = Producer(ClientConfiguration(args.endpoint, Credentials()), topics)
    producer.startup()
    emit("started", role="producer")
    threading.Thread(target=report_holds, daemon=True).start()
    threads = []
    if args.topic and args.rate:
        threads.append(threading.Thread(target=normal_loop, args=(producer, args), daemon=True))
    for index in range(args.groups if args.fifo_topic else 0):
        threads.append(threading.Thread(target=fifo_loop, args=(producer, args, f"g{index}"), daemon=True))
    for thread in threads:
        thread.start()
    STOP.wait(args.seconds)
    STOP.set()
    for thread in threads:
        thread.join(timeout=10)
    time.sleep(0.5)  # let the last callbacks report
    producer.shutdown()
    emit("stopped", role="producer")
    return 0


def ack(consumer: SimpleConsumer, received) -> None:
    try:
        consumer.ack(received)
    except Exception as failure:  # noqa: BLE001 - redelivered later: counted as a duplicate
        emit("ack-fail", body=received.body.rstrip(b".").decode(), error=f"{type(failure).__name__}: {str(failure)[:200]}")


def consume(args) -> int:
    subscriptions = {t: FilterExpression() for t in (args.topic, args.fifo_topic) if t}
    consumer = SimpleConsumer(ClientConfiguration(args.endpoint, Credentials()), args.group, subscriptions,
                              await_duration=args.await_s)
    consumer.startup()
    acks = ThreadPoolExecutor(max_workers=args.ack_threads)
    emit("started", role="consumer")
    while not STOP.is_set():
        if not RUNNING.is_set():
            emit("paused")
            while not STOP.is_set() and not RUNNING.wait(0.2):
                pass
            emit("resumed")
            continue
        began = time.monotonic()
        try:
            messages = consumer.receive(32, args.invisible_s) or []
        except Exception as failure:  # noqa: BLE001 - a consumer keeps polling
            emit("receive-fail", error=f"{type(failure).__name__}: {str(failure)[:200]}")
            STOP.wait(0.05)
            continue
        for received in messages:  # consumed in the order received (FIFO order is checked on these)
            emit("recv", body=received.body.rstrip(b".").decode(), attempt=received.delivery_attempt,
                 id=received.message_id)
        # a batch's acks at once, as an application processing messages in parallel would: one at a
        # time, each ack's wait for its pop record's replication bounded the consumer below the load
        received_at = time.monotonic()
        list(acks.map(lambda received: ack(consumer, received), messages))
        emit("batch", n=len(messages), receive_ms=round(1000 * (received_at - began), 1),
             ack_ms=round(1000 * (time.monotonic() - received_at), 1))
    acks.shutdown()
    consumer.shutdown()
    emit("stopped", role="consumer")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("produce", "consume"))
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--topic", default="")
    parser.add_argument("--fifo-topic", default="")
    parser.add_argument("--group", default="steady-group")
    parser.add_argument("--rate", type=float, default=100.0, help="NORMAL sends per second")
    parser.add_argument("--fifo-rate", type=float, default=0.0, help="FIFO sends per second per group (0: as fast as acked)")
    parser.add_argument("--groups", type=int, default=1)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--retry-pause-s", type=float, default=0.0)
    parser.add_argument("--await-s", type=int, default=5)
    parser.add_argument("--invisible-s", type=int, default=10)
    parser.add_argument("--ack-threads", type=int, default=16, help="a received batch's acks in flight at once")
    args = parser.parse_args()
    if args.ack_threads < 1:
        parser.error("--ack-threads must be at least 1")
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    signal.signal(signal.SIGUSR1, pause)
    signal.signal(signal.SIGUSR2, resume)
    return produce(args) if args.mode == "produce" else consume(args)


if __name__ == "__main__":
    sys.exit(main())
