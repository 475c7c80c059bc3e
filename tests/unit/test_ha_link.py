"""The replication link (services/ha/wire.py) over a real socket pair: frames whole and in order,
the end of the stream, shutdown, limits, large bodies in pieces, and a cancelled receive."""
from __future__ import annotations

import asyncio
import socket

import pytest

from services.ha.wire import MAX_BODY_BYTES, MAX_HEADER_BYTES, PREAMBLE, Link, WireError, frame_prefix


LOOP = {"kind": "asyncio"}


@pytest.fixture(autouse=True, params=["asyncio", "uvloop"])
def loop_kind(request):
    """Every test on asyncio's loop and on uvloop (what a container runs on)."""
    LOOP["kind"] = request.param


def run(coro):
    if LOOP["kind"] == "uvloop":
        import uvloop
        return uvloop.run(coro)
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
        await a.send(b"first")
        assert await b.receive() == (b"first", b"")   # the transport is up
        pending = asyncio.ensure_future(b.receive())
        await asyncio.sleep(0.01)
        b.shutdown()
        assert await asyncio.wait_for(pending, 5) is None
        with pytest.raises(OSError):
            await b.send(b"after")
        await a.aclose()
        await b.aclose()
    run(scenario())


def test_a_receive_cancelled_halfway_takes_nothing_from_the_stream():
    """The frame's first bytes stay buffered: the next receive gets it whole once the rest arrives
    (a handshake timeout or a closing stream cancels receives)."""
    async def scenario():
        left, right = socket.socketpair()
        link = Link(right)
        left.sendall(frame_prefix(4, 100) + b"head" + b"part")
        pending = asyncio.ensure_future(link.receive())
        await asyncio.sleep(0.05)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        left.sendall(b"x" * 96 + frame_prefix(2, 0) + b"h2")
        assert await asyncio.wait_for(link.receive(), 5) == (b"head", b"part" + b"x" * 96)
        assert await asyncio.wait_for(link.receive(), 5) == (b"h2", b"")
        left.close()
        assert await asyncio.wait_for(link.receive(), 5) is None
        await link.aclose()
    run(scenario())


def test_a_large_body_arrives_whole_in_pieces_between_small_frames():
    """Bodies from DIRECT_BODY_BYTES up go to their own buffer; the frames around them are cut
    from the shared one, whatever the pieces the bytes arrive in."""
    async def scenario():
        left, right = socket.socketpair()
        link = Link(right)
        big = bytes(range(256)) * 4096   # 1 MiB
        stream = (frame_prefix(1, 3) + b"a" + b"abc" + frame_prefix(1, len(big)) + b"b" + big
                  + frame_prefix(1, 0) + b"c")
        left.setblocking(False)
        loop = asyncio.get_running_loop()
        sends = asyncio.ensure_future(_send_in_pieces(loop, left, stream, 7919))
        got = [await asyncio.wait_for(link.receive(), 10) for _ in range(3)]
        await sends
        assert [(h, bytes(b)) for h, b in got] == [(b"a", b"abc"), (b"b", big), (b"c", b"")]
        left.close()
        assert await asyncio.wait_for(link.receive(), 5) is None
        await link.aclose()
    run(scenario())


async def _send_in_pieces(loop, sock, data: bytes, piece: int) -> None:
    for at in range(0, len(data), piece):
        await loop.sock_sendall(sock, data[at:at + piece])
        await asyncio.sleep(0)


def test_frame_sizes_above_the_limits_are_wire_errors():
    async def scenario():
        for prefix in (frame_prefix(MAX_HEADER_BYTES + 1, 0), frame_prefix(0, MAX_BODY_BYTES + 1)):
            left, right = socket.socketpair()
            link = Link(right)
            left.sendall(prefix)
            with pytest.raises(WireError):
                await asyncio.wait_for(link.receive(), 5)
            left.close()
            await link.aclose()
    run(scenario())


def test_a_close_right_after_a_send_loses_nothing():
    async def scenario():
        a, b = await pair()
        big = b"z" * (8 << 20)   # more than the socket buffers and the write-ahead
        receiving = asyncio.ensure_future(b.receive())
        await a.send(b"big", big)
        await a.aclose()
        header, body = await asyncio.wait_for(receiving, 10)
        assert (header, len(body)) == (b"big", len(big))
        assert await asyncio.wait_for(b.receive(), 5) is None
        await b.aclose()
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


def test_a_peer_that_does_not_take_its_frames_pauses_the_sender():
    """Flow control: the receiver reads ahead at most READ_AHEAD_BYTES of whole frames, the sender
    buffers at most WRITE_AHEAD_BYTES, the kernel the rest; then sends wait until frames are taken."""
    async def scenario():
        a, b = await pair()
        frame = b"p" * (1 << 20)
        sent = 0

        async def sender():
            nonlocal sent
            for _ in range(48):
                await a.send(b"f", frame)
                sent += 1
        sending = asyncio.ensure_future(sender())
        await asyncio.sleep(0.5)
        assert 0 < sent < 48, sent   # paced: the frames not taken hold the rest back
        got = [await asyncio.wait_for(b.receive(), 10) for _ in range(48)]
        await asyncio.wait_for(sending, 10)
        assert all(len(body) == len(frame) for _, body in got)
        await a.aclose()
        await b.aclose()
    run(scenario())


def test_held_frames_go_out_together_at_the_end_of_the_pass_in_order():
    """A relayed stream's messages are sent held: the frames of one loop pass reach the kernel in
    one write, before the pass's next unheld frame and in send order; a held frame with nothing
    after it still goes out once the pass ends."""
    async def scenario():
        a, b = await pair()
        await a.send(b"warm")  # the transport exists from here
        assert await b.receive() == (b"warm", b"")
        writes = []

        class Counting:  # the loop's transports are C types: counted through a proxy
            def __init__(self, transport):
                self._transport = transport

            def write(self, data):
                writes.append(1)
                self._transport.write(data)

            def writelines(self, parts):
                writes.append(len(parts))
                self._transport.writelines(parts)

            def __getattr__(self, name):
                return getattr(self._transport, name)
        a._transport = Counting(a._transport)
        for number in range(5):
            await a.send(b"held", bytes([number]), held=True)
        assert writes == []  # still held: the pass is not over
        await a.send(b"end")
        assert writes == [6]
        got = [await b.receive() for _ in range(6)]
        assert got == [(b"held", bytes([n])) for n in range(5)] + [(b"end", b"")]
        await a.send(b"last", held=True)
        assert await asyncio.wait_for(b.receive(), 5) == (b"last", b"")
        assert writes == [6, 1]
        await a.aclose()
        await b.aclose()
    run(scenario())
