"""The replication link's own cost (services/ha/wire.py): CPU per batch and ack, and bulk MB/s.

Two links over a socket pair on one event loop: one side sends a batch frame (a 60-byte
header and a 1.1 KiB body, one replicated 1 KiB message) and waits for a 12-byte ack frame
from the other; ``--count`` round trips, the process's CPU per round trip (both sides). Then
bulk: ``--bulk-mib`` of 4 MiB frames one way (a slave catching up), MB/s.  The references in
the same run: for round trips, a bare buffered protocol doing the same exchange with no
framing checks, limits or flow control (what the loop's transport costs by itself); for
bulk, a loopback copy (two threads, blocking ``sendall`` and ``recv_into`` of the same
bytes).  Each on uvloop (what a container runs on) and asyncio's loop.  Medians of ``--rounds``.

    .venv/bin/python bench/bench_ha_link.py
    .venv/bin/python bench/bench_ha_link.py --count 20000 --rounds 5

Benchmarks print; they never fail on timing.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import socket
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.ha.wire import PREFIX, Link  # noqa: E402

HEADER, BODY, ACK = b"h" * 60, b"x" * 1100, b"a" * 12
BULK_FRAME = 4 << 20


class BareProtocol(asyncio.BufferedProtocol):
    """The reference: frames cut from one buffer, nothing else."""

    def __init__(self):
        self.buffer = bytearray(8 << 20)
        self.view = memoryview(self.buffer)
        self.end = 0
        self.frames: collections.deque = collections.deque()
        self.waiter: asyncio.Future | None = None

    def connection_made(self, transport):
        self.transport = transport

    def get_buffer(self, sizehint):
        return self.view[self.end:]

    def buffer_updated(self, nbytes):
        self.end += nbytes
        at = 0
        while self.end - at >= PREFIX.size:
            header, body = PREFIX.unpack_from(self.buffer, at)
            stop = at + PREFIX.size + header + body
            if stop > self.end:
                break
            self.frames.append(bytes(self.buffer[at + PREFIX.size + header:stop]))
            at = stop
        if at:
            self.buffer[:self.end - at] = self.buffer[at:self.end]
            self.end -= at
        if self.frames and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


class BareLink:
    def __init__(self, transport, protocol):
        self.transport, self.protocol = transport, protocol

    async def send(self, header: bytes, body: bytes = b"") -> None:
        self.transport.write(b"".join((PREFIX.pack(len(header), len(body)), header, body)))

    async def receive(self):
        while not self.protocol.frames:
            self.protocol.waiter = asyncio.get_running_loop().create_future()
            await self.protocol.waiter
        return b"", self.protocol.frames.popleft()

    async def aclose(self) -> None:
        self.transport.close()


async def make(kind: str, sock: socket.socket):
    if kind == "link":
        return Link(sock)
    sock.setblocking(False)
    transport, protocol = await asyncio.get_running_loop().connect_accepted_socket(BareProtocol, sock)
    return BareLink(transport, protocol)


async def round_trips(kind: str, count: int) -> float:
    left, right = socket.socketpair()
    master, slave = await make(kind, left), await make(kind, right)

    async def send_side():
        for _ in range(count):
            await master.send(HEADER, BODY)
            await master.receive()

    async def ack_side():
        for _ in range(count):
            await slave.receive()
            await slave.send(ACK)
    began = time.process_time()
    await asyncio.gather(send_side(), ack_side())
    spent = time.process_time() - began
    await master.aclose()
    await slave.aclose()
    return spent / count * 1e6


async def bulk(kind: str, mib: int) -> float:
    left, right = socket.socketpair()
    master, slave = await make(kind, left), await make(kind, right)
    frames, payload = max(1, mib * (1 << 20) // BULK_FRAME), bytes(BULK_FRAME)

    async def send_side():
        for _ in range(frames):
            await master.send(HEADER, payload)

    async def receive_side():
        for _ in range(frames):
            await slave.receive()
    began = time.perf_counter()
    await asyncio.gather(send_side(), receive_side())
    spent = time.perf_counter() - began
    await master.aclose()
    await slave.aclose()
    return frames * BULK_FRAME / spent / 1e6


def loopback_copy(mib: int) -> float:
    """MB/s of the same bytes through a socket pair by two threads, no event loop."""
    import threading
    left, right = socket.socketpair()
    total, chunk = mib << 20, bytes(BULK_FRAME)

    def receive():
        buffer, view, got = bytearray(BULK_FRAME), None, 0
        view = memoryview(buffer)
        while got < total:
            got += right.recv_into(view, min(BULK_FRAME, total - got))
    reader = threading.Thread(target=receive)
    began = time.perf_counter()
    reader.start()
    for _ in range(total // BULK_FRAME):
        left.sendall(chunk)
    reader.join()
    spent = time.perf_counter() - began
    left.close()
    right.close()
    return total / spent / 1e6


def run(loop_name: str, coroutine):
    if loop_name == "uvloop":
        import uvloop
        return uvloop.run(coroutine)
    return asyncio.run(coroutine)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=10000, help="round trips per measurement")
    parser.add_argument("--bulk-mib", type=int, default=512, help="MiB sent in 4 MiB frames")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.count < 1 or args.bulk_mib < 4 or args.rounds < 1:
        parser.error("--count and --rounds at least 1, --bulk-mib at least 4")
    rows = []
    for loop_name in ("uvloop", "asyncio"):
        for kind in ("link", "bare"):
            trips = [run(loop_name, round_trips(kind, args.count)) for _ in range(args.rounds)]
            rates = [run(loop_name, bulk(kind, args.bulk_mib)) if kind == "link" else loopback_copy(args.bulk_mib)
                     for _ in range(args.rounds)]
            rows.append((loop_name, kind, statistics.median(trips), statistics.median(rates)))
    print(f"# bench_ha_link: {' '.join(sys.argv)}; a 1.1 KiB batch and a 12-byte ack per round trip "
          f"({args.count}), CPU of both sides; bulk {args.bulk_mib} MiB in 4 MiB frames; medians of {args.rounds}")
    print(f"{'loop':<9}{'link':<7}{'us CPU per round trip':>23}{'bulk MB/s':>11}   (bare's bulk: the loopback copy)")
    for loop_name, kind, trip, rate in rows:
        print(f"{loop_name:<9}{kind:<7}{trip:>23.1f}{rate:>11.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
