"""Calls for a broker that moved to another container, relayed there (issue 26, docs/reassign.md).

Why: clients refresh routes every 30 s; until then a moved broker's queues still name the
container it left.  That container relays each such call to the move's target, so clients with
default settings carry on at once.  Rules:

- A call is relayed only when no broker served here takes its topic (or, for a receive, the
  broker its queue names) and a broker released by a move had it: :func:`topic_of` finds the
  topic of every MessagingService request that carries one.
- Between the source's release and the target's open the target does not serve the broker
  yet.  Until a relayed call is answered otherwise, a target's :class:`Gate` lets one call at a
  time through (the others wait for it): one the target answers TOPIC_NOT_FOUND or
  INVALID_RECEIPT_HANDLE is sent again after :data:`RETRY_PAUSE_S`, for up to :data:`HOLD_S`
  (within the caller's deadline), so no call fails for the move's own gap, and the opening
  target is asked about 50 times a second, not once per waiting call (64 sends in flight
  resent every 20 ms slowed a 300 ms open to 1.4 s).
- The request is sent on unchanged (re-serialized) with the caller's metadata (its signature
  and client id) and deadline, less a margin so that a relay's own DEADLINE_EXCEEDED reaches
  the caller as a status.  A failed relay answers the relay's status code and details.
- The directory (``moved_target``) decides; with nothing moved away that is one dict check.
"""
from __future__ import annotations

import asyncio
import time

import grpc

from metadata.status import Code
from services import metrics
from services.messaging.broker_port import relay_timeout, relayed_metadata

SERVICE = "/apache.rocketmq.v2.MessagingService/"
HOLD_S = 10.0
RETRY_PAUSE_S = 0.02
_NOT_THERE_YET = frozenset({int(Code.TOPIC_NOT_FOUND), int(Code.INVALID_RECEIPT_HANDLE)})


def topic_of(request) -> str:
    """The topic a MessagingService request names ("" when it names none)."""
    for field in ("topic", "message_queue"):
        try:
            if request.HasField(field):
                resource = getattr(request, field)
                return resource.topic.name if field == "message_queue" else resource.name
        except ValueError:  # the request has no such field
            continue
    messages = getattr(request, "messages", None)
    return messages[0].topic.name if messages else ""


def broker_of(request) -> str:
    try:
        return request.message_queue.broker.name if request.HasField("message_queue") else ""
    except ValueError:
        return ""


class Gate:
    """One target's readiness as its relayed calls found it (container.moves keeps one per move)."""

    def __init__(self) -> None:
        self.ready = False
        self.lock = asyncio.Lock()


def _relay(channel: grpc.aio.Channel, kind: str, method: str, request, response_cls):
    """The call to the target, and until when a not-yet-serving target is asked again."""
    metrics.labelled(metrics.RELAYED_CALLS, "moved", method, "grpc").inc()
    call = getattr(channel, kind)(SERVICE + method, request_serializer=type(request).SerializeToString,
                                  response_deserializer=response_cls.FromString)
    return call, time.monotonic() + HOLD_S


async def relay_unary(channel: grpc.aio.Channel, method: str, request, response_cls, context, target: str,
                      gate: Gate):
    call, until = _relay(channel, "unary_unary", method, request, response_cls)

    async def once():
        return await call(request, metadata=relayed_metadata(context), timeout=relay_timeout(context))
    try:
        while True:
            if gate.ready:
                response = await once()
                if not _again(response, context, until):
                    return response
                gate.ready = False  # the target no longer serves it: probe one at a time again
                continue
            async with gate.lock:
                if gate.ready:
                    continue
                response = await once()
                if not _again(response, context, until):
                    gate.ready = response.status.code not in _NOT_THERE_YET
                    return response
                await asyncio.sleep(RETRY_PAUSE_S)
    except grpc.aio.AioRpcError as failure:
        await context.abort(failure.code(), f"relayed to {target}, where the broker moved: {failure.details()}")


async def relay_stream(channel: grpc.aio.Channel, method: str, request, response_cls, context, target: str,
                       gate: Gate):
    relay, until = _relay(channel, "unary_stream", method, request, response_cls)
    try:
        while True:
            if not gate.ready:  # wait while a unary call probes the target; receives do not probe
                async with gate.lock:
                    pass
            call = relay(request, metadata=relayed_metadata(context), timeout=relay_timeout(context))
            first = True
            async for response in call:
                if first and _again(response, context, until):
                    call.cancel()
                    break
                first = False
                yield response
            else:
                return
            await asyncio.sleep(RETRY_PAUSE_S * 5)
    except grpc.aio.AioRpcError as failure:
        await context.abort(failure.code(), f"relayed to {target}, where the broker moved: {failure.details()}")


def _again(response, context, until: float) -> bool:
    """A relayed answer of a target that does not serve the moved broker yet, with time to ask again."""
    remaining = context.time_remaining()
    return (response.status.code in _NOT_THERE_YET and time.monotonic() < until
            and (remaining is None or remaining >= 2 * RETRY_PAUSE_S))
