"""The replication connection's framing, and one connection driven by two threads.

Rules:

* A slave opens a TCP connection to the master container's ``haListenPort`` and sends
  :data:`PREAMBLE` first.  Then each direction is a sequence of frames: u32 header size, u32
  body size (big-endian), the header (protobuf: ``SlaveFrame`` or ``MasterFrame``), the body
  (a transfer batch's payload, else empty).  A size above :data:`MAX_HEADER_BYTES` or
  :data:`MAX_BODY_BYTES`, a wrong preamble or a connection cut inside a frame is
  :class:`WireError`; the caller logs it and closes.  A connection closed between frames is
  a clean end (None).
* Why not gRPC: one batch (up to 16 MiB of records) crossed grpc's copies and HTTP/2 flow
  control on both sides; here the master's payload goes from one ``sendmsg`` into the socket
  and the slave receives it with one ``recv`` into the object it writes to disk.
* :class:`Link` owns a blocking socket: one thread sends (frames in the order submitted), one
  receives, so a slave checks and writes batch N while batch N+1 arrives, and the event
  loop never blocks on the socket.  :meth:`Link.shutdown` wakes both threads (a tick that
  found the peer silent); :meth:`Link.aclose` waits for them, then closes the socket.
"""
from __future__ import annotations

import asyncio
import socket
import struct
from concurrent.futures import ThreadPoolExecutor

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

    def __init__(self, sock: socket.socket):
        sock.setblocking(True)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # acks and heartbeats go at once
        self._sock = sock
        self._sender = ThreadPoolExecutor(1, thread_name_prefix="ha-send")
        self._receiver = ThreadPoolExecutor(1, thread_name_prefix="ha-recv")
        self._closed = False
        try:
            host, port = sock.getpeername()[:2]
            self.peer = f"{host}:{port}"
        except OSError:
            self.peer = "?"

    # --- from the event loop ---------------------------------------------------------------------
    async def send(self, header: bytes, body: bytes | memoryview = b"") -> None:
        """One frame, after every frame submitted before it; OSError when the connection is gone."""
        parts = [frame_prefix(len(header), len(body)), header]
        if body:
            parts.append(body)
        await asyncio.get_running_loop().run_in_executor(self._sender, self._send_all, parts)

    async def send_preamble(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._sender, self._send_all, [PREAMBLE])

    async def receive(self) -> tuple[bytes, bytes] | None:
        """The next frame's (header, body); None when the peer closed between frames."""
        return await asyncio.get_running_loop().run_in_executor(self._receiver, self._receive_frame)

    async def receive_preamble(self) -> None:
        data = await asyncio.get_running_loop().run_in_executor(self._receiver, self._recv_exact, len(PREAMBLE))
        check_preamble(data)

    def shutdown(self) -> None:
        """Wake both threads: pending and later sends and receives fail."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.shutdown()
        loop = asyncio.get_running_loop()
        await asyncio.gather(loop.run_in_executor(self._sender, _idle), loop.run_in_executor(self._receiver, _idle))
        self._sock.close()  # no thread uses it any more: its number cannot be reused under one
        self._sender.shutdown(wait=False)
        self._receiver.shutdown(wait=False)

    # --- in the threads --------------------------------------------------------------------------
    def _send_all(self, parts: list) -> None:
        views = [memoryview(p).cast("B") for p in parts]
        while views:
            sent = self._sock.sendmsg(views)
            while views and sent >= len(views[0]):
                sent -= len(views[0])
                views.pop(0)
            if views and sent:
                views[0] = views[0][sent:]

    def _recv_exact(self, size: int) -> bytes:
        data = self._sock.recv(size, socket.MSG_WAITALL)  # one bytes object, filled in place
        if len(data) == size or not data:
            return data
        parts = [data]
        got = len(data)
        while got < size:  # a signal cut the wait short
            more = self._sock.recv(size - got, socket.MSG_WAITALL)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def _receive_frame(self) -> tuple[bytes, bytes] | None:
        prefix = self._recv_exact(PREFIX.size)
        if not prefix:
            return None
        header_size, body_size = parse_prefix(prefix)
        header = self._recv_exact(header_size) if header_size else b""
        body = self._recv_exact(body_size) if body_size else b""
        if len(header) != header_size or len(body) != body_size:
            raise WireError(f"connection closed inside a frame ({header_size} + {body_size} bytes announced)")
        return header, body


def _idle() -> None:
    """Runs once a link's thread has finished what it was doing."""
