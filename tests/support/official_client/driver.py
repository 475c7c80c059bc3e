"""Drive the official Python client: ``python driver.py SCENARIO --endpoint HOST:PORT ...``.

Scenarios: produce (normal, fifo, delay), transaction (client commit/rollback plus an
orphan answered through Telemetry), simple (receive/ack, nack redelivery, no-ack to DLQ),
push (PushConsumer with an optional failing first delivery).  ``--tls`` connects over TLS
(the roots come from ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``); ``--access-key``/``--secret-key``
sign every call.  Every event is printed as ``@@{json}``; the script exits 0 when its
expectation was met before its deadline, 2 when not, 3 when the client raised (an ``error``
event names the exception).  Imports only the official client and the standard library.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
import traceback

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, Message, MessageListener,
                      Producer, PushConsumer, SimpleConsumer, TransactionChecker, TransactionResolution)
from rocketmq.grpc_protocol import FilterType


_OUT = threading.Lock()
CLIENT_ERRORS: list[str] = []  # the client logs the status behind many of its exceptions


class _ErrorLog(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR and len(CLIENT_ERRORS) < 20:
            CLIENT_ERRORS.append(record.getMessage()[:300])


logging.getLogger("rocketmq-python-client").addHandler(_ErrorLog())


def emit(event: str, **fields) -> None:
    line = "@@" + json.dumps({"event": event, **fields}, sort_keys=True) + "\n"
    with _OUT:  # consumer threads emit concurrently; keep one event per line
        sys.stdout.write(line)
        sys.stdout.flush()


def config(args) -> ClientConfiguration:
    return ClientConfiguration(args.endpoint, Credentials(args.access_key, args.secret_key), request_timeout=args.request_timeout)


def new_message(topic: str, body: str, tag: str | None = None) -> Message:
    message = Message()
    message.topic = topic
    message.body = body.encode()
    if tag:
        message.tag = tag
    message.keys = f"key-{body}"
    message.add_property("origin", "driver")
    return message


def produce(args) -> int:
    producer = Producer(config(args), (args.topic,), None, args.tls)
    producer.startup()
    try:
        for index in range(args.count):
            message = new_message(args.topic, f"{args.prefix}{index}", tag=args.tag)
            if args.numbered:
                message.add_property("n", str(index))
            if args.kind == "fifo":
                message.message_group = f"group-{index % 2}"
            if args.kind == "delay":
                message.delivery_timestamp = int(time.time()) + args.delay_s
            receipt = producer.send(message)
            emit("sent", body=f"{args.prefix}{index}", message_id=receipt.message_id, offset=receipt.offset,
                 recall_handle=getattr(receipt, "recall_handle", None) or "")
        if args.kind == "delay" and args.recall:
            handle = producer.recall_message(args.topic, receipt.recall_handle)
            emit("recalled", message_id=handle)
    finally:
        producer.shutdown()
    return 0


class Checker(TransactionChecker):
    def __init__(self):
        self.checked: list[str] = []
        self.event = threading.Event()

    def check(self, message: Message) -> TransactionResolution:
        self.checked.append(message.message_id)
        emit("checked", message_id=message.message_id, body=message.body.decode())
        self.event.set()
        return TransactionResolution.COMMIT


def transaction(args) -> int:
    checker = Checker()
    producer = Producer(config(args), (args.topic,), checker)
    producer.startup()
    try:
        for body, action in (("commit", "commit"), ("rollback", "rollback"), ("orphan", None)):
            tx = producer.begin_transaction()
            receipt = producer.send(new_message(args.topic, body), tx)
            emit("sent", body=body, message_id=receipt.message_id)
            if action == "commit":
                tx.commit()
            elif action == "rollback":
                tx.rollback()
            if action:
                emit(action, message_id=receipt.message_id)
        ok = checker.event.wait(args.deadline_s)
        time.sleep(0.5)  # let the checker's EndTransaction leave before shutdown
        return 0 if ok else 2
    finally:
        producer.shutdown()


def simple(args) -> int:
    expression = FilterExpression(args.filter, FilterType.SQL) if args.sql else FilterExpression(args.filter)
    consumer = SimpleConsumer(config(args), args.group, {args.topic: expression}, await_duration=args.await_s, tls_enable=args.tls)
    consumer.startup()
    acked, deadline, nacked = set(), time.monotonic() + args.deadline_s, set()
    try:
        while time.monotonic() < deadline and len(acked) < args.expect:
            for message in consumer.receive(args.batch, args.invisible_s) or []:
                body = message.body.decode()
                emit("received", body=body, message_id=message.message_id, attempt=message.delivery_attempt,
                     tag=message.tag, keys=list(message.keys or []), properties=dict(message.properties or {}),
                     topic=message.topic, group=message.message_group)
                if args.mode == "never-ack":
                    continue
                if args.mode == "nack-first" and body not in nacked:
                    nacked.add(body)
                    consumer.change_invisible_duration(message, 1)
                    emit("nacked", body=body)
                    continue
                consumer.ack(message)
                acked.add(body)
                emit("acked", body=body)
        return 0 if len(acked) >= args.expect or args.mode == "never-ack" else 2
    finally:
        consumer.shutdown()


class Listener(MessageListener):
    def __init__(self, fail_first: bool):
        self.fail_first = fail_first
        self.failed: set[str] = set()
        self.done: set[str] = set()
        self.lock = threading.Lock()

    def consume(self, message: Message) -> ConsumeResult:
        body = message.body.decode()
        emit("received", body=body, attempt=message.delivery_attempt, group=message.message_group)
        with self.lock:
            if self.fail_first and body not in self.failed:
                self.failed.add(body)
                return ConsumeResult.FAILURE
            self.done.add(body)
        return ConsumeResult.SUCCESS


def push(args) -> int:
    listener = Listener(args.mode == "fail-first")
    consumer = PushConsumer(config(args), args.group, listener, {args.topic: FilterExpression()})
    consumer.startup()
    emit("started")
    deadline = time.monotonic() + args.deadline_s
    try:
        while time.monotonic() < deadline and len(listener.done) < args.expect:
            time.sleep(0.1)
        emit("done", consumed=sorted(listener.done))
        return 0 if len(listener.done) >= args.expect else 2
    finally:
        consumer.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["produce", "transaction", "simple", "push"])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", default="")
    parser.add_argument("--kind", default="normal", choices=["normal", "fifo", "delay"])
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--prefix", default="m")
    parser.add_argument("--tag", default=None)
    parser.add_argument("--filter", default="*")
    parser.add_argument("--sql", action="store_true", help="--filter is an SQL92 expression")
    parser.add_argument("--numbered", action="store_true", help="each message gets the property n = its index")
    parser.add_argument("--delay-s", type=int, default=2)
    parser.add_argument("--recall", action="store_true")
    parser.add_argument("--expect", type=int, default=1)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--invisible-s", type=int, default=10)
    parser.add_argument("--await-s", type=int, default=3)
    parser.add_argument("--mode", default="ack")
    parser.add_argument("--deadline-s", type=float, default=20)
    parser.add_argument("--request-timeout", type=int, default=3)
    parser.add_argument("--tls", action="store_true", help="produce and simple only")
    parser.add_argument("--access-key", default="")
    parser.add_argument("--secret-key", default="")
    args = parser.parse_args()
    try:
        return {"produce": produce, "transaction": transaction, "simple": simple, "push": push}[args.scenario](args)
    except Exception as error:  # noqa: BLE001 - reported to the test as an event
        causes, cause = [], error.__cause__ or error.__context__
        while cause is not None and len(causes) < 5:
            causes.append(f"{type(cause).__name__}: {str(cause)[:300]}")
            cause = cause.__cause__ or cause.__context__
        emit("error", kind=type(error).__name__, message=str(error)[:500], causes=causes, client_errors=CLIENT_ERRORS[-5:])
        traceback.print_exc()
        return 3


if __name__ == "__main__":
    sys.exit(main())
