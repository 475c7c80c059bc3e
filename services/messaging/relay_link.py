"""Relay links: a replica's container passes unary client calls to its master's container over
one framed TCP connection instead of a gRPC call (issue 27: a relayed call at most 1.3x a direct one).

Why: relayed over gRPC, a unary call cost the relaying container a gRPC client call on top of
the server call it answers (about 260 us of CPU, bench_replicated_sends: relayed/direct
1.56x), and the master's container a gRPC server call.  Over a relay link it costs a frame
each way (services.ha.wire: about 10 us each side) and the master's servicer as it is.

Rules:

* The link goes to the master container's replication listener (``haListenPort``, the address
  the replica's slave copies from), preamble :data:`RELAY_PREAMBLE`, then the cluster proof
  when a cluster secret is installed (services.ha.link_auth): only cluster members relay.
  One link per master container, made at the first relayed call and kept; calls are
  multiplexed on it by number.
* A request frame is a ``RelayRequest`` (call number, the group's broker name, the method
  path, the caller's metadata, the time left) with the request's bytes as they came as its
  body; the answer is a ``RelayResponse`` with the response's bytes, or a gRPC status and
  details.  ``cancel`` asks the master's container to stop a call (the relaying replica was
  promoted, or its caller went away).
* The master's container serves a relayed call exactly as a call on the group's own endpoint
  (services.messaging.broker_port: served there while master, relayed on or held
  otherwise), with :class:`RelayedContext` for the gRPC context: the caller's metadata and
  deadline; the peer is the relaying container's, as over a gRPC relay.
* A link that fails fails its calls with UNAVAILABLE (the official clients retry); the next
  call makes a new link.  A call past its deadline ends DEADLINE_EXCEEDED (checked every
  :data:`WATCH_INTERVAL_S`; its caller's own deadline usually ends it first), and a link on
  which nothing arrived since such a call began is closed as dead.  A master's container that does not take relay links (it closes at
  the preamble) is asked over gRPC for :data:`UNSUPPORTED_RETRY_S`.  A streamed answer
  (ReceiveMessage) comes as one frame per response, then its status; Telemetry (both ways
  streamed) is relayed over gRPC.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Callable

import grpc
from google.protobuf.message import DecodeError

from proto import ha_pb2 as pb
from services.ha.link_auth import prove_to_master
from services.ha.wire import Link, WireError

log = logging.getLogger(__name__)
RELAY_PREAMBLE = b"RMRL\x01"
CONNECT_TIMEOUT_S = 3.0
WATCH_INTERVAL_S = 1.0   # how often a link's calls are checked against their deadlines
UNSUPPORTED_RETRY_S = 60.0
# (broker name, method path, streamed answer) -> the behaviour serving it on that group's
# endpoint (a coroutine of the response's bytes, or for a stream an async iterator of them), or None
Dispatch = Callable[[str, str, bool], "Callable | None"]


class RelayFailed(Exception):
    """The relayed call ended with a gRPC status other than OK."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(f"{code.name}: {details}")
        self.code, self.details = code, details


_CODES = {code.value[0]: code for code in grpc.StatusCode}


# --- the relaying container's side -----------------------------------------------------------------
class _Connection:
    def __init__(self, address: str, link: Link):
        self.address, self.link = address, link
        self.calls: dict[int, asyncio.Future] = {}
        self.deadlines: dict[int, tuple[float, float]] = {}   # call -> (started, deadline), monotonic s
        self.next_id = 1
        self.reader: asyncio.Task | None = None
        self.watchdog: asyncio.Task | None = None
        self.failure: str | None = None
        self.answered = False   # a container that closes before any answer may not take relay links
        self.heard = time.monotonic()
        link.on_received = self._heard

    def _heard(self) -> None:
        self.heard = time.monotonic()

    async def watch(self) -> None:
        """Once a second: a call past its deadline ends DEADLINE_EXCEEDED; when nothing came
        over the link since such a call began, the link is taken as dead (a master's host gone
        without closing its connections) and closed, so the next call makes a new one.  No
        timer per call."""
        while self.failure is None:
            await asyncio.sleep(WATCH_INTERVAL_S)
            now = time.monotonic()
            late = [(call_id, started) for call_id, (started, deadline) in self.deadlines.items() if now >= deadline]
            for call_id, _ in late:
                self.deadlines.pop(call_id, None)
                waiter = self.calls.pop(call_id, None)
                failure = RelayFailed(grpc.StatusCode.DEADLINE_EXCEEDED, f"no answer from {self.address} in time")
                if isinstance(waiter, asyncio.Queue):
                    waiter.put_nowait(failure)
                elif waiter is not None and not waiter.done():
                    waiter.set_exception(failure)
            if any(self.heard < started for _, started in late):
                self.fail("nothing heard before a call's deadline")

    async def read(self) -> None:
        try:
            while True:
                got = await self.link.receive()
                if got is None:
                    raise ConnectionError("closed by the master's container")
                header, body = got
                answer = pb.RelayResponse.FromString(header)
                self.answered = True
                waiter = self.calls.get(answer.id) if answer.more else self.calls.pop(answer.id, None)
                if waiter is None:
                    continue
                if not answer.more:
                    self.deadlines.pop(answer.id, None)
                if isinstance(waiter, asyncio.Queue):   # a stream: its responses, then its end
                    waiter.put_nowait(bytes(body) if answer.more else _status(answer))
                elif waiter.done():
                    continue
                elif answer.code == 0:
                    waiter.set_result(bytes(body))
                else:
                    waiter.set_exception(_status(answer))
        except (OSError, WireError, ValueError, DecodeError, ConnectionError) as failure:
            self.fail(str(failure) or type(failure).__name__)
        except asyncio.CancelledError:
            self.fail("the relay link closed")
            raise

    def fail(self, reason: str) -> None:
        self.failure = self.failure or reason
        calls, self.calls, self.deadlines = self.calls, {}, {}
        lost = RelayFailed(grpc.StatusCode.UNAVAILABLE, f"relay link to {self.address} lost: {self.failure}")
        for waiter in calls.values():
            if isinstance(waiter, asyncio.Queue):
                waiter.put_nowait(lost)
            elif not waiter.done():
                waiter.set_exception(lost)
        self.link.shutdown()

    def start(self, request: pb.RelayRequest, waiter, timeout_s: float | None) -> tuple[int, bytes]:
        """A new call's number and its request frame's header; ``waiter`` gets its answers."""
        call_id, self.next_id = self.next_id, self.next_id + 1
        request.id = call_id
        self.calls[call_id] = waiter
        if timeout_s is not None:
            now = time.monotonic()
            self.deadlines[call_id] = (now, now + timeout_s)
        return call_id, request.SerializeToString()

    def stop(self, call_id: int) -> None:
        """The call ended here (a cancel to the master's container when it had not there)."""
        self.deadlines.pop(call_id, None)
        if self.calls.pop(call_id, None) is not None and self.failure is None:
            asyncio.ensure_future(_quietly(self.link.send(pb.RelayRequest(id=call_id, cancel=True).SerializeToString())))


def _status(answer: pb.RelayResponse) -> RelayFailed | None:
    """A final answer's status: None when OK."""
    if answer.code == 0:
        return None
    return RelayFailed(_CODES.get(answer.code, grpc.StatusCode.UNKNOWN), answer.details)


class RelayLinks:
    """The relaying container's links, one per master container's replication address."""

    def __init__(self):
        self._links: dict[str, _Connection] = {}
        self._connecting: dict[str, asyncio.Future] = {}
        self._unsupported: dict[str, float] = {}   # address -> until (monotonic s)

    def supported(self, address: str) -> bool:
        until = self._unsupported.get(address)
        return until is None or time.monotonic() >= until

    async def call(self, address: str, broker: str, method: str, raw: bytes, metadata, timeout_s: float | None,
                   watch: Callable[[asyncio.Future], None] = lambda future: None) -> bytes:
        """The response's bytes; RelayFailed with the status otherwise (UNAVAILABLE when the
        link fails).  ``watch(future)``: the call's future, as soon as there is one; cancelling
        it ends the call (CancelledError here) and asks the master's container to stop it."""
        connection = await self._connection(address)
        future = asyncio.get_running_loop().create_future()
        call_id, header = connection.start(_request(broker, method, metadata, timeout_s), future, timeout_s)
        watch(future)
        await self._send(connection, header, raw)
        try:
            return await future
        except RelayFailed as failure:
            self._unanswered(connection, failure)
            raise
        except asyncio.CancelledError:
            connection.stop(call_id)
            raise

    async def stream(self, address: str, broker: str, method: str, raw: bytes, metadata, timeout_s: float | None):
        """A streamed answer's responses (bytes), as they come; RelayFailed with its status."""
        connection = await self._connection(address)
        responses: asyncio.Queue = asyncio.Queue()
        request = _request(broker, method, metadata, timeout_s)
        request.stream = True
        call_id, header = connection.start(request, responses, timeout_s)
        await self._send(connection, header, raw)
        try:
            while True:
                got = await responses.get()
                if isinstance(got, bytes):
                    yield got
                    continue
                if got is not None:
                    self._unanswered(connection, got)
                    raise got
                return
        finally:
            connection.stop(call_id)   # nothing when it ended; a cancel when the caller went away

    @staticmethod
    async def _send(connection: _Connection, header: bytes, raw: bytes) -> None:
        try:
            await connection.link.send(header, raw)
        except OSError as failure:
            connection.fail(str(failure))

    def _unanswered(self, connection: _Connection, failure: RelayFailed) -> None:
        if failure.code is grpc.StatusCode.UNAVAILABLE and not connection.answered:
            self.unsupported(connection.address)

    async def _connection(self, address: str) -> _Connection:
        connection = self._links.get(address)
        if connection is not None and connection.failure is None:
            return connection
        pending = self._connecting.get(address)
        if pending is None:
            pending = self._connecting[address] = asyncio.ensure_future(self._connect(address))
            pending.add_done_callback(lambda _: self._connecting.pop(address, None))
        try:
            return await asyncio.shield(pending)
        except (OSError, WireError, TimeoutError) as failure:
            raise RelayFailed(grpc.StatusCode.UNAVAILABLE, f"no relay link to {address}: {failure}") from None

    async def _connect(self, address: str) -> _Connection:
        host, port = address.rsplit(":", 1)
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            infos = await loop.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
            family, kind, proto, _, where = infos[0]
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, where)
            except BaseException:
                sock.close()
                raise
            link = Link(sock)
            try:
                await link.send_preamble(RELAY_PREAMBLE)
                await prove_to_master(link)
            except BaseException:
                await link.aclose()
                raise
        connection = _Connection(address, link)
        connection.reader = asyncio.ensure_future(connection.read())
        connection.watchdog = asyncio.ensure_future(connection.watch())
        old = self._links.get(address)
        self._links[address] = connection
        if old is not None:
            for task in (old.reader, old.watchdog):
                if task is not None:
                    task.cancel()
        return connection

    def unsupported(self, address: str) -> None:
        """The container at ``address`` does not take relay links: use gRPC there for a while."""
        self._unsupported[address] = time.monotonic() + UNSUPPORTED_RETRY_S

    async def close(self) -> None:
        links, self._links = list(self._links.values()), {}
        tasks = [task for c in links for task in (c.reader, c.watchdog) if task is not None]
        for task in tasks:
            task.cancel()
        for connection in links:
            await connection.link.aclose()
        await asyncio.gather(*tasks, return_exceptions=True)


def _request(broker: str, method: str, metadata, timeout_s: float | None) -> pb.RelayRequest:
    return pb.RelayRequest(broker_name=broker, method=method,
                           metadata=[pb.RelayMetadata(key=k, value=v) for k, v in metadata],
                           timeout_ms=0 if timeout_s is None else max(1, int(timeout_s * 1000)))


async def _quietly(operation) -> None:
    try:
        await operation
    except (OSError, WireError):
        pass


# --- the master container's side ---------------------------------------------------------------------
class _Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code, self.details = code, details


def grpc_peer(address: str) -> str:
    """``host:port`` as gRPC names a peer: ``ipv4:127.0.0.1:5432``, ``ipv6:[::1]:5432``."""
    host, _, port = address.rpartition(":")
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


class RelayedContext:
    """What the servicer asks of a gRPC context, for a call that came over a relay link."""

    def __init__(self, metadata: tuple[tuple[str, str], ...], peer: str, deadline: float | None):
        self._metadata, self._peer, self._deadline = metadata, peer, deadline

    def invocation_metadata(self):
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        raise _Aborted(code, details)


async def serve_relay_link(link: Link, dispatch: Dispatch) -> None:
    """The master container's side of one relay link (after its preamble and proof): every
    call served as on its group's endpoint, answered in the order they end."""
    peer = grpc_peer(link.peer)
    running: dict[int, asyncio.Task] = {}

    async def answer(call_id: int, code: grpc.StatusCode, details: str = "", body: bytes = b"",
                     more: bool = False) -> None:
        response = pb.RelayResponse(id=call_id, code=code.value[0], details=details, more=more)
        try:  # a stream's messages are held to go out together (services.ha.wire); its end is not
            await link.send(response.SerializeToString(), body, held=more)
        except OSError:
            pass

    async def run(request: pb.RelayRequest, raw, behaviour) -> None:
        timeout_s = request.timeout_ms / 1000 if request.timeout_ms else None
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        context = RelayedContext(tuple((m.key, m.value) for m in request.metadata), peer, deadline)
        body = b""
        try:
            async with asyncio.timeout(timeout_s):
                if request.stream:
                    async for response in behaviour(bytes(raw), context):
                        await answer(request.id, grpc.StatusCode.OK, body=response, more=True)
                else:
                    body = await behaviour(bytes(raw), context)
        except _Aborted as aborted:
            await answer(request.id, aborted.code, aborted.details)
        except TimeoutError:
            await answer(request.id, grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded on the master's container")
        except asyncio.CancelledError:
            raise
        except Exception as failure:  # noqa: BLE001 - as gRPC would: the caller gets UNKNOWN, we log it
            log.exception("relayed %s for %s failed", request.method, request.broker_name)
            await answer(request.id, grpc.StatusCode.UNKNOWN, f"unexpected error: {failure}")
        else:
            await answer(request.id, grpc.StatusCode.OK, body=body)
        finally:
            running.pop(request.id, None)

    try:
        while True:
            got = await link.receive()
            if got is None:
                return
            header, raw = got
            try:
                request = pb.RelayRequest.FromString(header)
            except DecodeError:
                log.warning("relay link from %s closed: a request that does not parse", link.peer)
                return
            if request.cancel:
                task = running.pop(request.id, None)
                if task is not None:
                    task.cancel()
                continue
            behaviour = dispatch(request.broker_name, request.method, request.stream)
            if behaviour is None:
                await answer(request.id, grpc.StatusCode.UNIMPLEMENTED,
                             f"this container serves no {request.method} for {request.broker_name!r} on a relay link")
                continue
            running[request.id] = asyncio.ensure_future(run(request, raw, behaviour))
    finally:
        for task in list(running.values()):
            task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
