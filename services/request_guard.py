"""Requests that do not parse: a clear answer, a counter, and at most one log line per peer.

grpcio deserializes a request before the servicer runs; when the deserializer raises, grpc
logs a full traceback and answers UNKNOWN.  A peer sending garbage thousands of times a
second would fill a disk with tracebacks, which are for our bugs.  So every service we
serve is mounted through a :class:`GuardedServer`, which registers each method with no
deserializer and parses the bytes itself, in front of the servicer:

- A request that does not parse is answered, without reaching the servicer, with
  INVALID_ARGUMENT naming the method and what failed, or, where the protocol carries its own
  status in the response (the client protocol's ``Status``), with the response the caller
  gives for that method (``answers``).  A request stream (Telemetry) that sends a message
  that does not parse ends with the error the caller gives (``stream_error``), by default
  INVALID_ARGUMENT.
- Each one counts in ``relaymq_bad_requests_total{service, method}``.
- Each one is logged at most once per peer host per ``interval_ms`` (:class:`BadRequestLog`),
  one line, the count of the ones not logged included; never a traceback.
- Oversized requests never get here: grpc answers them RESOURCE_EXHAUSTED from the
  server's ``grpc.max_receive_message_length`` option, which every server sets from a
  config field.
- Only generic handlers are registered: the generated ``add_..._to_server`` also registers
  every method with the core, and grpc.aio then keeps one pending request-call future per
  registered method and ``asyncio.wait``s on all of them (22 for MessagingService) for every
  incoming call; with generic handlers alone it waits on one, as a bare echo server does.
  A service added through this class costs one dictionary lookup per call more.
"""
from __future__ import annotations

import inspect
import logging
from typing import Any, Callable, Mapping

import grpc

from services import metrics

log = logging.getLogger(__name__)

Answer = Callable[[str], Any]  # details -> the response message to send instead
StreamError = Callable[[str], BaseException]  # details -> what the request iterator raises
DEFAULT_LOG_INTERVAL_MS = 10_000
MAX_PEERS = 1024  # peers remembered by the log throttle; beyond it, one shared entry
DETAIL_MAX_CHARS = 300


class BadRequestLog:
    """Which bad requests to log: the first of a peer, then one per ``interval_ms``.

    Pure: ``now_ms`` is an argument.  ``note`` returns None (do not log) or the number of
    bad requests from that peer that were not logged since its last line."""

    def __init__(self, interval_ms: int = DEFAULT_LOG_INTERVAL_MS, max_peers: int = MAX_PEERS):
        assert interval_ms >= 0 and max_peers >= 1
        self.interval_ms = interval_ms
        self.max_peers = max_peers
        self._peers: dict[str, list[int]] = {}  # peer -> [last logged ms, suppressed since]

    def note(self, peer: str, now_ms: int) -> int | None:
        entry = self._peers.get(peer)
        if entry is None:
            if len(self._peers) >= self.max_peers:
                self._forget_quiet(now_ms)
            if len(self._peers) >= self.max_peers:
                peer, entry = "(other peers)", self._peers.setdefault("(other peers)", [now_ms - self.interval_ms, 0])
            else:
                self._peers[peer] = [now_ms, 0]
                return 0
        if now_ms - entry[0] >= self.interval_ms:
            suppressed = entry[1]
            entry[0], entry[1] = now_ms, 0
            return suppressed
        entry[1] += 1
        return None

    def _forget_quiet(self, now_ms: int) -> None:
        """Drop peers with nothing suppressed whose interval has passed (they would log anyway)."""
        for peer in [p for p, (last, suppressed) in self._peers.items()
                     if not suppressed and now_ms - last >= self.interval_ms]:
            del self._peers[peer]


def peer_host(peer: str) -> str:
    """``ipv4:127.0.0.1:5432`` -> ``127.0.0.1``; ``ipv6:[::1]:80`` -> ``[::1]``; else as is."""
    kind, _, address = peer.partition(":")
    if kind in ("ipv4", "ipv6") and ":" in address:
        return address.rpartition(":")[0]
    return peer or "unknown peer"


def split_path(path: str) -> tuple[str, str]:
    """``/pkg.Service/Method`` -> (``pkg.Service``, ``Method``)."""
    service, _, method = path.lstrip("/").partition("/")
    return service, method


def describe_failure(request_type: str, error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return f"the request is not a valid {request_type}: {text}"[:DETAIL_MAX_CHARS]


class RequestGuard:
    """Counts and logs bad requests of one process (shared by its servers)."""

    def __init__(self, log_interval_ms: int = DEFAULT_LOG_INTERVAL_MS, now_ms: Callable[[], int] | None = None):
        import time

        self.throttle = BadRequestLog(log_interval_ms)
        self._now_ms = now_ms or (lambda: time.monotonic_ns() // 1_000_000)

    def reject(self, path: str, peer: str, request_type: str, error: BaseException) -> str:
        """Count and maybe log one bad request; returns the details for the caller."""
        service, method = split_path(path)
        metrics.labelled(metrics.BAD_REQUESTS, service, method).inc()
        details = f"{method}: {describe_failure(request_type, error)}"
        host = peer_host(peer)
        suppressed = self.throttle.note(host, self._now_ms())
        if suppressed is not None:
            more = f" ({suppressed} more from this peer not logged)" if suppressed else ""
            log.warning("bad request from %s to %s: %s%s", host, path, details, more)
        return details


def _request_type(deserializer: Callable) -> str:
    owner = getattr(deserializer, "__self__", None)
    descriptor = getattr(owner, "DESCRIPTOR", None)
    return getattr(descriptor, "full_name", None) or "request"


def _forward(inner: Callable, answer_first: Callable) -> Callable:
    """A handler of the same kind as ``inner`` (coroutine, async generator) that first awaits
    ``answer_first(request, context)``: (True, request) to call ``inner`` with, or (False, reply)
    to answer instead (the reply is None when it aborted or wrote the answer itself)."""
    if inspect.isasyncgenfunction(inner):
        async def stream_out(request, context):
            go, value = await answer_first(request, context)
            if not go:
                if value is not None:
                    yield value
                return
            async for response in inner(value, context):
                yield response
        return stream_out

    async def call(request, context):
        go, value = await answer_first(request, context)
        if not go:
            return value
        result = inner(value, context)
        return await result if inspect.isawaitable(result) else result
    return call


def _unary_request(path: str, handler: grpc.RpcMethodHandler, guard: RequestGuard, answer: Answer | None):
    deserialize, kind = handler.request_deserializer, _request_type(handler.request_deserializer)
    streaming_reply = handler.unary_stream is not None
    inner = handler.unary_stream if streaming_reply else handler.unary_unary
    writes = streaming_reply and not inspect.isasyncgenfunction(inner)  # a coroutine that uses context.write

    async def refuse(error: Exception, context) -> Any:
        """A peer's bad bytes: counted, then answered (the reply, or None when aborted or written)."""
        details = guard.reject(path, context.peer(), kind, error)
        if answer is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, details)
        if writes:
            await context.write(answer(details))
            return None
        return answer(details)

    # The request parsed in the handler itself, not in a coroutine of its own that is awaited:
    # every call of the client protocol passes here (one coroutine and an inspect call less).
    if streaming_reply and not writes:
        async def stream_out(raw: bytes, context):
            try:
                request = deserialize(raw)
            except Exception as error:  # noqa: BLE001 - answered by refuse
                reply = await refuse(error, context)
                if reply is not None:
                    yield reply
                return
            async for response in inner(request, context):
                yield response
        return grpc.unary_stream_rpc_method_handler(stream_out, None, handler.response_serializer)
    coroutine = inspect.iscoroutinefunction(inner)

    async def call(raw: bytes, context):
        try:
            request = deserialize(raw)
        except Exception as error:  # noqa: BLE001 - answered by refuse
            return await refuse(error, context)
        if coroutine:
            return await inner(request, context)
        result = inner(request, context)
        return await result if inspect.isawaitable(result) else result
    if streaming_reply:
        return grpc.unary_stream_rpc_method_handler(call, None, handler.response_serializer)
    return grpc.unary_unary_rpc_method_handler(call, None, handler.response_serializer)


def _stream_request(path: str, handler: grpc.RpcMethodHandler, guard: RequestGuard, stream_error: StreamError | None):
    deserialize, kind = handler.request_deserializer, _request_type(handler.request_deserializer)

    async def decoded(raw_iterator, context):
        async for raw in raw_iterator:
            try:
                request = deserialize(raw)
            except Exception as error:  # noqa: BLE001 - a peer's bad bytes
                details = guard.reject(path, context.peer(), kind, error)
                if stream_error is not None:
                    raise stream_error(details) from None
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, details)
            yield request

    async def requests(raw_iterator, context) -> tuple[bool, Any]:
        return True, decoded(raw_iterator, context)

    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(_forward(handler.stream_unary, requests), None,
                                                    handler.response_serializer)
    return grpc.stream_stream_rpc_method_handler(_forward(handler.stream_stream, requests), None,
                                                 handler.response_serializer)


def guard_method(path: str, handler: grpc.RpcMethodHandler, guard: RequestGuard, answer: Answer | None = None,
                 stream_error: StreamError | None = None) -> grpc.RpcMethodHandler:
    """``handler`` with the request parsed in front of it (a handler without a deserializer is kept)."""
    if handler.request_deserializer is None:
        return handler
    if handler.request_streaming:
        return _stream_request(path, handler, guard, stream_error)
    return _unary_request(path, handler, guard, answer)


class _GuardedHandler(grpc.GenericRpcHandler):
    def __init__(self, inner: grpc.GenericRpcHandler, wrap: Callable[[str, grpc.RpcMethodHandler], grpc.RpcMethodHandler]):
        self._inner, self._wrap = inner, wrap
        self._cache: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def service(self, handler_call_details):
        method = handler_call_details.method
        cached = self._cache.get(method)
        handler = self._inner.service(handler_call_details)
        if handler is None:
            return None
        if cached is None or cached[0] is not handler:
            cached = self._cache[method] = (handler, self._wrap(method, handler))
        return cached[1]


class GuardedServer:
    """What a generated ``add_<Service>Servicer_to_server`` is given instead of the server."""

    def __init__(self, server: grpc.aio.Server, guard: RequestGuard, answers: Mapping[str, Answer] | None = None,
                 stream_error: StreamError | None = None):
        self._server, self._guard = server, guard
        self._answers = dict(answers or {})
        self._stream_error = stream_error

    def _wrap(self, path: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        return guard_method(path, handler, self._guard, self._answers.get(path), self._stream_error)

    def add_generic_rpc_handlers(self, handlers) -> None:
        self._server.add_generic_rpc_handlers(tuple(_GuardedHandler(h, self._wrap) for h in handlers))

    def add_registered_method_handlers(self, service_name: str, handlers) -> None:
        pass  # generic handlers only (see the module docstring)
