"""The replication connection's framing, and one connection driven by the event loop.

Rules:

* A slave opens a TCP connection to the master container's ``haListenPort`` and sends
  :data:`PREAMBLE` first.  Then each direction is a sequence of frames: u32 header size, u32
  body size (big-endian), the header (protobuf: ``SlaveFrame`` or ``MasterFrame``), the body
  (a transfer batch's payload, else empty).  A size above :data:`MAX_HEADER_BYTES` or
  :data:`MAX_BODY_BYTES`, a wrong preamble or a connection cut inside a frame is
  :class:`WireError`; the caller logs it and closes.  A connection closed between frames is
  a clean end (None).
* Why not gRPC: one batch (up to 16 MiB of records) crossed grpc's copies and HTTP/2 flow
  control on both sides; here the master's payload goes to the socket as it is, and the slave
  receives a body straight into the buffer it writes to disk.
* :class:`Link` drives its socket as the event loop's transport with a buffered protocol (no
  thread; issue 23: a thread per direction cost four hand-offs per replicated put).  Bytes
  are read as they arrive into one buffer and cut into frames there; a large body (at least
  :data:`DIRECT_BODY_BYTES`) is received straight into its own buffer, which the slave writes
  to disk.  Why a protocol and not the loop's socket calls (issue 27): on uvloop, each
  ``sock_recv_into`` and ``sock_sendall`` registered and removed the socket with epoll, and a
  frame took three receives: a 1 KiB batch and its ack cost 80 us of CPU, 16-21 us now
  (``bench/bench_ha_link.py``).  Reading stops while :data:`READ_AHEAD_BYTES` of whole frames
  wait to be taken, so a slow reader still paces its peer through TCP.
* Frames go out whole and in the order their sends started (the transport's order); a send
  waits only while more than :data:`WRITE_AHEAD_BYTES` are not yet with the kernel (a slow
  peer paces its sender).  A frame sent with ``held=True`` (more follow at once) may wait
  for the end of the event loop's pass, to go to the kernel with the frames after it in one
  system call (up to :data:`CORK_BYTES`; past it, or at the next frame sent without it, at
  once): a relayed receive streamed 32 messages as 32 frames, 32 sends and as many wake-ups
  of the peer.  A receive cancelled while it waits takes nothing from the stream.
  :meth:`Link.shutdown` ends pending and later sends and receives at once, dropping what was
  not sent (a tick that found the peer silent); :meth:`Link.aclose` first lets the bytes
  already sent go out (a refusal sent just before the close arrives), within
  :data:`CLOSE_FLUSH_S`.
* ``on_received`` (if set) is called whenever bytes arrive, before the frame they belong to
  is complete: the peer's silence is measured from its last byte, not its last parsed frame
  (issue 24, defect 6).
"""
from __future__ import annotations

import asyncio
import socket
import struct
from collections import deque
from typing import Callable

PREAMBLE = b"RMHA\x01"
PREFIX = struct.Struct(">II")
MAX_HEADER_BYTES = 32 * 1024 * 1024   # a batch's index: 20 bytes per record, per-queue names
MAX_BODY_BYTES = 64 * 1024 * 1024     # a batch's payload: haTransferBatchSize is at most 16 MiB
DIRECT_BODY_BYTES = 256 * 1024         # a body at least this large is received into its own buffer
READ_AHEAD_BYTES = 8 * 1024 * 1024     # whole frames waiting to be taken before reading pauses
WRITE_AHEAD_BYTES = 1024 * 1024        # bytes not yet with the kernel before a send waits
CLOSE_FLUSH_S = 5.0                    # a closed link's last bytes go out within this, or are dropped
CORK_BYTES = 64 * 1024                 # held frames (send(held=True)) wait up to this much, then go out together


class WireError(Exception):
    """The peer broke the framing: the connection must close."""


def frame_prefix(header_size: int, body_size: int) -> bytes:
    return PREFIX.pack(header_size, body_size)


def parse_prefix(prefix: bytes) -> tuple[int, int]:
    """(header size, body size) of a frame, checked against the limits."""
    if len(prefix) != PREFIX.size:
        raise WireError(f"frame prefix of {len(prefix)} bytes, expected {PREFIX.size}")
    header_size, body_size = PREFIX.unpack(prefix)
    if header_size > MAX_HEADER_BYTES:
        raise WireError(f"frame header of {header_size} bytes (at most {MAX_HEADER_BYTES})")
    if body_size > MAX_BODY_BYTES:
        raise WireError(f"frame body of {body_size} bytes (at most {MAX_BODY_BYTES})")
    return header_size, body_size


def check_preamble(data: bytes, accept: tuple[bytes, ...] = (PREAMBLE,)) -> bytes:
    """``data`` if it is one of ``accept`` (all as long as :data:`PREAMBLE`), else WireError."""
    if data not in accept:
        raise WireError(f"not a replication connection (preamble {data[:16]!r}, expected "
                        f"{' or '.join(repr(a) for a in accept)})")
    return data


class Link:
    """One replication connection (either side)."""

    SMALL_FRAME = 64 * 1024  # a frame up to this size goes to the transport as one buffer (joined)

    def __init__(self, sock: socket.socket):
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # acks and heartbeats go at once
        self._sock = sock
        self._transport: asyncio.Transport | None = None
        self._starting: asyncio.Future | None = None
        self._receiver = _Receiver(self)
        self._corked: list | None = None  # small frames of this loop pass, not yet given to the transport
        self._corked_bytes = 0
        self._busy = 0              # sends and receives under way
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False
        self._broken = False        # shut down: every later send and receive fails at once
        self.on_received: Callable[[], None] | None = None   # bytes arrived (the peer is alive)
        try:
            name = sock.getpeername()
        except OSError:
            name = ""
        self.peer = f"{name[0]}:{name[1]}" if isinstance(name, tuple) else (str(name) or "?")

    async def send(self, header: bytes, body: bytes | memoryview = b"", held: bool = False) -> None:
        """One frame, after every frame whose send started before it; OSError when the connection is gone.
        ``held``: more frames follow in this loop pass; this one may wait for them (see above)."""
        prefix = frame_prefix(len(header), len(body))
        if len(header) + len(body) <= self.SMALL_FRAME:
            await self._io(self._send((b"".join((prefix, header, body)),), held))
        else:
            await self._io(self._send((prefix + header, body) if body else (prefix + header,), False))

    async def send_preamble(self, preamble: bytes = PREAMBLE) -> None:
        assert len(preamble) == len(PREAMBLE)
        await self._io(self._send((preamble,)))

    async def receive(self) -> tuple[bytes, bytes | bytearray] | None:
        """The next frame's (header, body); None when the peer closed between frames."""
        return await self._io(self._receive())

    async def receive_preamble(self, accept: tuple[bytes, ...] = (PREAMBLE,)) -> bytes:
        """The peer's first bytes, which must be one of ``accept`` (call before anything else is
        received); returns which."""
        return await self._io(self._receive(preamble=accept))

    def shutdown(self) -> None:
        """Pending and later sends and receives fail (or see the end of the stream)."""
        self._broken = True
        if self._transport is not None:
            self._transport.abort()
        else:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._receiver.wake()

    async def aclose(self) -> None:
        """Close after the bytes already sent; pending sends and receives end."""
        if self._closed:
            return
        self._closed = True
        transport = self._transport
        if transport is not None and not self._broken:
            self._uncork()
            self._broken = True
            transport.close()   # what is buffered goes first, then the socket closes
            asyncio.get_running_loop().call_later(CLOSE_FLUSH_S, transport.abort)   # a peer that never reads
            self._receiver.wake()
        else:
            self.shutdown()
        await self._idle.wait()
        if self._transport is None:
            self._sock.close()  # never handed to a transport (it closes its own)

    # --- on the event loop -----------------------------------------------------------------------
    async def _io(self, operation):
        if self._broken:
            operation.close()
            raise ConnectionAbortedError("the replication link was shut down")
        self._busy += 1
        self._idle.clear()
        try:
            return await operation
        finally:
            self._busy -= 1
            if not self._busy:
                self._idle.set()

    async def _started(self, preamble: bool) -> asyncio.Transport:
        """The transport, made at the first send or receive (``preamble``: that first receive
        is the preamble's)."""
        if self._transport is not None:
            return self._transport
        if self._starting is None:
            self._receiver.expect_preamble = preamble
            self._starting = asyncio.ensure_future(
                asyncio.get_running_loop().connect_accepted_socket(lambda: self._receiver, self._sock))
        transport, _ = await asyncio.shield(self._starting)
        if self._transport is None:
            self._transport = transport
            transport.set_write_buffer_limits(high=WRITE_AHEAD_BYTES)
            if self._broken:
                transport.abort()
        return transport

    async def _send(self, parts: tuple, held: bool = False) -> None:
        transport = await self._started(preamble=False)
        receiver = self._receiver
        if self._broken or receiver.lost is not None:
            raise ConnectionAbortedError("the replication link was shut down")
        corked = self._corked
        if held:
            if corked is None:
                corked = self._corked = []
                asyncio.get_running_loop().call_soon(self._uncork)
            corked.extend(parts)
            self._corked_bytes += sum(len(part) for part in parts)
            if self._corked_bytes >= CORK_BYTES:
                self._uncork()
        elif corked:
            corked.extend(parts)
            self._uncork()
        else:
            for part in parts:
                transport.write(part)
        if receiver.write_paused:
            await receiver.drained()

    def _uncork(self) -> None:
        """Give the frames held in this pass to the transport, in one system call."""
        corked, self._corked, self._corked_bytes = self._corked, None, 0
        if corked and not self._broken and self._transport is not None:
            self._transport.writelines(corked)

    async def _receive(self, preamble: tuple[bytes, ...] = ()):
        """The next frame; with ``preamble`` (the accepted ones), the preamble instead."""
        await self._started(bool(preamble))
        receiver = self._receiver
        if preamble and not receiver.expect_preamble and receiver.preamble is None:
            raise RuntimeError("the preamble is the first thing received")
        while True:
            if preamble and receiver.preamble is not None:
                return check_preamble(receiver.preamble, preamble)
            if not preamble and receiver.frames:
                return receiver.take()
            if receiver.error is not None:
                raise receiver.error
            if self._broken:
                return None
            if receiver.lost is not None:
                if isinstance(receiver.lost, OSError):
                    raise receiver.lost
                if preamble:
                    check_preamble(receiver.partial(), preamble)
                return None
            await receiver.arrival()


class _Receiver(asyncio.BufferedProtocol):
    """The link's side of the transport: bytes into frames as they arrive; write pauses."""

    def __init__(self, link: Link):
        self._link = link
        self.expect_preamble = False
        self.preamble: bytes | None = None
        self.frames: deque = deque()          # whole (header, body) frames not taken yet
        self._ready_bytes = 0
        self.error: WireError | None = None
        self.lost: BaseException | bool | None = None   # the connection ended (its error, or True)
        self.write_paused = False
        self._buffer = bytearray(64 * 1024)
        self._view = memoryview(self._buffer)
        self._start = self._end = 0           # unparsed bytes: _buffer[_start:_end]
        self._body: bytearray | None = None   # a large body received straight into its own buffer
        self._body_got = 0
        self._header = b""
        self._waiter: asyncio.Future | None = None
        self._drain: asyncio.Future | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._reading = True

    # --- asyncio's calls --------------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._body is not None:
            return memoryview(self._body)[self._body_got:]
        if len(self._buffer) - self._end < 16 * 1024:
            self._make_room()
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._body is not None:
            self._body_got += nbytes
            if self._body_got == len(self._body):
                self._frame_done(self._header, self._body)
                self._body = None
        else:
            self._end += nbytes
        self._parse()
        if self._link.on_received is not None:
            self._link.on_received()
        self.wake()

    def eof_received(self) -> bool:
        self._ended(True)
        return True   # our sends may still go; aclose closes

    def connection_lost(self, exc) -> None:
        self._ended(exc if exc is not None else True)
        if self._drain is not None and not self._drain.done():
            self._drain.set_exception(ConnectionResetError("the replication link closed"))

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    # --- the link's calls -------------------------------------------------------------------------
    def take(self) -> tuple[bytes, bytes | bytearray]:
        frame = self.frames.popleft()
        self._ready_bytes -= len(frame[0]) + len(frame[1])
        if not self._reading and self._ready_bytes < READ_AHEAD_BYTES and self.error is None:
            self._reading = True
            self._transport.resume_reading()
        return frame

    def partial(self) -> bytes:
        return bytes(self._buffer[self._start:self._end])

    async def arrival(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def drained(self) -> None:
        if self._drain is None or self._drain.done():
            self._drain = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._drain)

    def wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # --- parsing ----------------------------------------------------------------------------------
    def _parse(self) -> None:
        buffer = self._buffer
        while self.error is None and self._body is None:
            available = self._end - self._start
            if self.expect_preamble and self.preamble is None:
                if available < len(PREAMBLE):
                    return
                self.preamble = bytes(buffer[self._start:self._start + len(PREAMBLE)])
                self._start += len(PREAMBLE)
                continue
            if available < PREFIX.size:
                return
            try:
                header_size, body_size = parse_prefix(bytes(buffer[self._start:self._start + PREFIX.size]))
            except WireError as error:
                self.error = error
                self._stop_reading()
                return
            header_end = self._start + PREFIX.size + header_size
            if self._end - header_end >= body_size >= 0 and self._end >= header_end:
                self._frame_done(bytes(buffer[self._start + PREFIX.size:header_end]),
                                 bytes(buffer[header_end:header_end + body_size]) if body_size else b"")
                self._start = header_end + body_size
                continue
            if body_size >= DIRECT_BODY_BYTES and self._end >= header_end:
                self._header = bytes(buffer[self._start + PREFIX.size:header_end])
                self._body = bytearray(body_size)
                self._body_got = self._end - header_end
                self._body[:self._body_got] = buffer[header_end:self._end]
                self._start = self._end = 0
                return
            needed = PREFIX.size + header_size + body_size
            if needed > len(buffer) - self._start:
                self._make_room(needed)
            return

    def _frame_done(self, header: bytes, body) -> None:
        self.frames.append((header, body))
        self._ready_bytes += len(header) + len(body)
        if self._ready_bytes >= READ_AHEAD_BYTES:
            self._stop_reading()

    def _stop_reading(self) -> None:
        if self._reading and self._transport is not None:
            self._reading = False
            self._transport.pause_reading()

    def _make_room(self, needed: int = 0) -> None:
        """Move the unparsed bytes to the front; grow the buffer to hold ``needed`` bytes of one frame."""
        pending = self._end - self._start
        size = max(len(self._buffer), needed, pending + 16 * 1024)
        if size > len(self._buffer):
            grown = bytearray(size)
            grown[:pending] = self._buffer[self._start:self._end]
            self._buffer = grown
            self._view = memoryview(grown)
        elif self._start:
            self._buffer[:pending] = self._buffer[self._start:self._end]
        self._start, self._end = 0, pending

    def _ended(self, reason) -> None:
        if self.lost is None:
            self.lost = reason
        if self.error is None and (self._body is not None or (self._end > self._start and
                                                               not (self.expect_preamble and self.preamble is None))):
            announced = f"{len(self._body)}-byte body" if self._body is not None else "frame"
            self.error = WireError(f"connection closed inside a frame (a {announced} not complete)")
        self.wake()
