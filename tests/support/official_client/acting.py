"""Drive the official Python client for acting-master tests: ``python acting.py SCENARIO ...``.

Scenarios:
- ``delay``: send ``--count`` DELAY messages to ``--topic``, due ``--due-from`` to ``--due-to``
  seconds from now (spread evenly; the client sets whole epoch seconds).  Each acknowledged send
  is ``sent`` with its body, due time (epoch ms) and the broker whose queue took it.  With
  ``--normal`` the messages are NORMAL ones (no delivery time), with ``--message-group`` FIFO
  ones of that group.
- ``push``: a PushConsumer of ``--group`` on ``--topic`` that acks everything it consumes;
  each message is ``recv`` with its body, epoch ms, delivery attempt and the broker named in
  its receipt handle (``<broker>@...``: where it was consumed from).  ``--fail-first`` fails
  each message's first delivery (so the server retries it).
- ``transaction``: send ``--count`` transactional messages and resolve none of them; the
  checker answers UNKNOWN until the file ``--commit-flag`` exists, then COMMIT (``checked``
  events say which).
Every event is one ``@@{json}`` line with ``t`` = epoch ms.  Stops on SIGTERM or after
``--seconds``.  Imports only the official client and the standard library.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, Message, MessageListener,
                      Producer, PushConsumer, TransactionChecker, TransactionResolution)

_OUT = threading.Lock()
STOP = threading.Event()


def emit(event: str, **fields) -> None:
    line = "@@" + json.dumps({"event": event, "t": int(time.time() * 1000), **fields}, sort_keys=True) + "\n"
    with _OUT:
        sys.stdout.write(line)
        sys.stdout.flush()


def config(args) -> ClientConfiguration:
    return ClientConfiguration(args.endpoint, Credentials())


def new_message(topic: str, body: str) -> Message:
    message = Message()
    message.topic = topic
    message.body = body.encode()
    message.add_property("origin", "acting-test")
    return message


def delay(args) -> int:
    producer = Producer(config(args), (args.topic,))
    producer.startup()
    try:
        start = int(time.time())
        for index in range(args.count):
            due_s = start + args.due_from + (args.due_to - args.due_from) * index // max(1, args.count - 1)
            message = new_message(args.topic, f"{args.prefix}{index}")
            if args.message_group:
                message.message_group = args.message_group
            elif not args.normal:
                message.delivery_timestamp = due_s
            for attempt in range(20):
                try:
                    receipt = producer.send(message)
                    break
                except Exception as failure:  # noqa: BLE001 - retried: a delay message is not skipped
                    emit("retry", body=message.body.decode(), error=str(failure)[:200])
                    time.sleep(0.2)
            else:
                emit("fail", body=message.body.decode())
                continue
            queue = receipt.message_queue  # the client keeps the queue's broker name private
            emit("sent", body=message.body.decode(), due=due_s * 1000,
                 broker=getattr(queue, "_MessageQueue__broker_name", "") if queue is not None else "")
    finally:
        producer.shutdown()
    return 0


class Listener(MessageListener):
    def __init__(self, fail_first: bool):
        self.fail_first = fail_first
        self.failed: set[str] = set()
        self.lock = threading.Lock()

    def consume(self, message: Message) -> ConsumeResult:
        body = message.body.decode()
        broker = (message.receipt_handle or "").split("@", 1)[0]
        emit("recv", body=body, attempt=message.delivery_attempt, broker=broker)
        with self.lock:
            if self.fail_first and body not in self.failed:
                self.failed.add(body)
                return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def push(args) -> int:
    consumer = PushConsumer(config(args), args.group, Listener(args.fail_first), {args.topic: FilterExpression()})
    consumer.startup()
    emit("started")
    try:
        STOP.wait(args.seconds)
    finally:
        consumer.shutdown()
    return 0


class Checker(TransactionChecker):
    def __init__(self, commit_flag: str):
        self.commit_flag = commit_flag

    def check(self, message: Message) -> TransactionResolution:
        commit = os.path.exists(self.commit_flag)
        emit("checked", body=message.body.decode(), resolution="COMMIT" if commit else "UNKNOWN")
        return TransactionResolution.COMMIT if commit else TransactionResolution.UNKNOWN


def transaction(args) -> int:
    producer = Producer(config(args), (args.topic,), Checker(args.commit_flag))
    producer.startup()
    try:
        for index in range(args.count):
            tx = producer.begin_transaction()
            producer.send(new_message(args.topic, f"{args.prefix}{index}"), tx)
            emit("sent", body=f"{args.prefix}{index}")
        emit("started")
        STOP.wait(args.seconds)
    finally:
        producer.shutdown()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["delay", "push", "transaction"])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", default="")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--prefix", default="m")
    parser.add_argument("--due-from", type=int, default=5)
    parser.add_argument("--due-to", type=int, default=20)
    parser.add_argument("--normal", action="store_true", help="delay: send NORMAL messages instead (due = now)")
    parser.add_argument("--message-group", default="", help="delay: send FIFO messages of this group instead")
    parser.add_argument("--fail-first", action="store_true")
    parser.add_argument("--commit-flag", default="")
    parser.add_argument("--seconds", type=float, default=600)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    return {"delay": delay, "push": push, "transaction": transaction}[args.scenario](args)


if __name__ == "__main__":
    sys.exit(main())
