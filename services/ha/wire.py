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
* :class:`Link` owns a non-blocking socket and uses the event loop's own socket calls (no
  thread): a send or receive that can go at once costs one system call and no hand-off.  Why
  (issue 23): with a thread per direction, a replicated 1 KiB put crossed four thread
  hand-offs (master send, slave receive, slave ack send, master receive), about a third of
  the replication round trip and a tenth of both containers' CPU under load.  The kernel
  buffers what arrives while the loop does other work, so a slave still checks and writes
  batch N while batch N+1 arrives.
* Frames go out whole and in the order their sends started (one lock); a send or receive
  cancelled halfway leaves the stream mid-frame, so it shuts the link down.
  :meth:`Link.shutdown` ends pending and later sends and receives (a tick that found the
  peer silent); :meth:`Link.aclose` waits for them, then closes the socket.
* ``on_received`` (if set) is called whenever bytes arrive, before the frame they belong to
  is complete: the peer's silence is measured from its last byte, not its last parsed frame
  (issue 24, defect 6).
"""
from __future__ import annotations

import asyncio
import socket
import struct
from typing import Callable

PREAMBLE = b"RMHA\x01"
PREFIX = struct.Struct(">II")
MAX_HEADER_BYTES = 32 * 1024 * 1024   # a batch's index: 20 bytes per record, per-queue names
MAX_BODY_BYTES = 64 * 1024 * 1024     # a batch's payload: haTransferBatchSize is at most 16 MiB


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


def check_preamble(data: bytes) -> None:
    if data != PREAMBLE:
        raise WireError(f"not a replication connection (preamble {data[:16]!r}, expected {PREAMBLE!r})")


class Link:
    """One replication connection (either side)."""

    SMALL_FRAME = 64 * 1024  # a frame up to this size goes out in one system call (joined)

    def __init__(self, sock: socket.socket):
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # acks and heartbeats go at once
        self._sock = sock
        self._sending = asyncio.Lock()
        self._busy = 0              # sends and receives under way on the socket
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

    async def send(self, header: bytes, body: bytes | memoryview = b"") -> None:
        """One frame, after every frame whose send started before it; OSError when the connection is gone."""
        prefix = frame_prefix(len(header), len(body))
        if len(header) + len(body) <= self.SMALL_FRAME:
            parts = [b"".join((prefix, header, body))]
        else:
            parts = [prefix + header, body] if body else [prefix + header]
        async with self._sending:
            await self._io(self._send_all(parts))

    async def send_preamble(self) -> None:
        async with self._sending:
            await self._io(self._send_all([PREAMBLE]))

    async def receive(self) -> tuple[bytes, bytes | bytearray] | None:
        """The next frame's (header, body); None when the peer closed between frames."""
        return await self._io(self._receive_frame())

    async def receive_preamble(self) -> None:
        check_preamble(bytes(await self._io(self._recv_exact(len(PREAMBLE)))))

    def shutdown(self) -> None:
        """Pending and later sends and receives fail (or see the end of the stream)."""
        self._broken = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.shutdown()
        await self._idle.wait()
        self._sock.close()  # nothing waits on it any more: its number cannot be reused under one

    # --- on the event loop -----------------------------------------------------------------------
    async def _io(self, operation):
        if self._broken:
            operation.close()
            raise ConnectionAbortedError("the replication link was shut down")
        self._busy += 1
        self._idle.clear()
        try:
            return await operation
        except asyncio.CancelledError:
            self.shutdown()  # cut inside a frame: nothing more may go over this stream
            raise
        finally:
            self._busy -= 1
            if not self._busy:
                self._idle.set()

    async def _send_all(self, parts: list) -> None:
        loop = asyncio.get_running_loop()
        for part in parts:
            await loop.sock_sendall(self._sock, part)

    async def _recv_exact(self, size: int) -> bytearray:
        """``size`` bytes, or fewer when the peer closed first (b"" when at once)."""
        buffer = bytearray(size)
        view, got, loop = memoryview(buffer), 0, asyncio.get_running_loop()
        while got < size:
            count = await loop.sock_recv_into(self._sock, view[got:])
            if not count:
                return buffer[:got]
            got += count
            if self.on_received is not None:
                self.on_received()
        return buffer

    async def _receive_frame(self) -> tuple[bytes, bytes | bytearray] | None:
        prefix = await self._recv_exact(PREFIX.size)
        if not prefix:
            return None
        header_size, body_size = parse_prefix(bytes(prefix))
        header = bytes(await self._recv_exact(header_size)) if header_size else b""
        body = await self._recv_exact(body_size) if body_size else b""
        if len(header) != header_size or len(body) != body_size:
            raise WireError(f"connection closed inside a frame ({header_size} + {body_size} bytes announced)")
        return header, body
