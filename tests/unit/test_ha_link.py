"""The replication link (services/ha/wire.py) over a real socket pair: frames whole and in order,
the end of the stream, shutdown, and a cancelled call that leaves the stream mid-frame."""
from __future__ import annotations

import asyncio
import socket

import pytest

from services.ha.wire import PREAMBLE, Link, WireError, frame_prefix


def run(coro):
    return asyncio.run(coro)


async def pair() -> tuple[Link, Link]:
    left, right = socket.socketpair()
    return Link(left), Link(right)


def test_frames_arrive_whole_and_in_order_small_and_large():
    async def scenario():
        a, b = await pair()
        big = bytes(range(256)) * (3 << 12)  # 3 MiB: more than the socket buffers, sent while received
        await a.send_preamble()
        sends = asyncio.gather(*(a.send(f"h{i}".encode(), big if i == 1 else b"x" * i) for i in range(5)))
        await b.receive_preamble()
        got = [await b.receive() for _ in range(5)]
        await sends
        assert [h for h, _ in got] == [f"h{i}".encode() for i in range(5)]
        assert [bytes(body) for _, body in got] == [b"", big, b"xx", b"xxx", b"xxxx"]
        await a.aclose()
        assert await b.receive() is None  # closed between frames: a clean end
        await b.aclose()
    run(scenario())


def test_a_connection_cut_inside_a_frame_is_a_wire_error():
    async def scenario():
        left, right = socket.socketpair()
        link = Link(right)
        left.sendall(frame_prefix(4, 10) + b"head" + b"short")
        left.close()
        with pytest.raises(WireError):
            await link.receive()
        await link.aclose()
    run(scenario())


def test_a_wrong_preamble_is_refused():
    async def scenario():
        left, right = socket.socketpair()
        link = Link(right)
        left.sendall(b"HTTP/")
        with pytest.raises(WireError):
            await link.receive_preamble()
        left.close()
        await link.aclose()
    run(scenario())


def test_shutdown_ends_a_pending_receive_and_later_calls_fail():
    async def scenario():
        a, b = await pair()
        pending = asyncio.ensure_future(b.receive())
        await asyncio.sleep(0.01)
        b.shutdown()
        assert await asyncio.wait_for(pending, 5) is None
        with pytest.raises(OSError):
            await b.send(b"after")
        await a.aclose()
        await b.aclose()
    run(scenario())


def test_a_receive_cancelled_halfway_shuts_the_link():
    """Its stream is mid-frame: a later receive would read a body as a prefix."""
    async def scenario():
        left, right = socket.socketpair()
        link = Link(right)
        left.sendall(frame_prefix(4, 100) + b"head" + b"part")
        pending = asyncio.ensure_future(link.receive())
        await asyncio.sleep(0.05)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        with pytest.raises(OSError):
            await link.receive()
        left.close()
        await link.aclose()
    run(scenario())


def test_preamble_is_the_first_bytes():
    async def scenario():
        left, right = socket.socketpair()
        link = Link(left)
        await link.send_preamble()
        await link.send(b"h", b"body")
        right.setblocking(True)
        data = b""
        while len(data) < len(PREAMBLE) + 8 + 5:
            data += right.recv(100)
        assert data == PREAMBLE + frame_prefix(1, 4) + b"hbody"
        await link.aclose()
        right.close()
    run(scenario())
