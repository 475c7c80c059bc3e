"""The container's replication endpoints: the listener slaves connect to, and Locate.

Rules:

* :class:`HaListener` accepts on ``haListenPort``.  Each connection must send the preamble
  and a slave handshake naming a broker group within ``HANDSHAKE_TIMEOUT_S``; a container
  hosting no master of that name answers a refusal ("BROKER_NOT_MASTER: ..."), which the
  slave logs and retries (its master may not have started yet, or moved).  Anything else
  closes the connection with one log line.  With a cluster secret, the slave must prove it
  first (``services.ha.link_auth``).
* A connection whose preamble is a relay link's (``services.messaging.relay_link``) carries
  client calls relayed by a replica's container, after the same cluster proof.
* ``HaService.Locate`` on the internal gRPC endpoint tells a slave that port and the client
  endpoint where this container serves the group (the slave's container relays client calls
  there), or NOT_FOUND when the container hosts no master of that name: a slave configures (or learns from the
  nameserver) one address per master container, the one its metadata sync also uses.
"""
from __future__ import annotations

import asyncio
import logging
import socket
from typing import Callable

import grpc

from ha.replication.messages import SlaveHandshake
from proto import ha_pb2 as pb
from proto import ha_pb2_grpc as pb_grpc
from services.ha.converters import decode_slave_frame, refusal_to_proto
from services.ha.master import ReplicationMaster
from services.ha.link_auth import check_slave
from services.ha.wire import PREAMBLE, Link, WireError
from services.messaging.relay_link import RELAY_PREAMBLE, Dispatch, serve_relay_link

log = logging.getLogger(__name__)
HANDSHAKE_TIMEOUT_S = 5.0
Masters = Callable[[str], ReplicationMaster | None]


class HaServicer(pb_grpc.HaServiceServicer):
    def __init__(self, masters: Masters, port: Callable[[], int], client_endpoint: Callable[[str], str]):
        self._masters, self._port, self._client_endpoint = masters, port, client_endpoint

    async def Locate(self, request: pb.LocateRequest, context: grpc.aio.ServicerContext) -> pb.LocateResponse:
        if not request.broker_name or self._masters(request.broker_name) is None:
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"BROKER_NOT_MASTER: this container hosts no master broker named {request.broker_name!r}")
        return pb.LocateResponse(ha_port=self._port(), client_endpoint=self._client_endpoint(request.broker_name))


def add_ha_service(server: grpc.aio.Server, masters: Masters, port: Callable[[], int],
                   client_endpoint: Callable[[str], str] = lambda name: "") -> None:
    """``client_endpoint(name)``: where this container serves the group's clients (relays go there)."""
    pb_grpc.add_HaServiceServicer_to_server(HaServicer(masters, port, client_endpoint), server)


class HaListener:
    def __init__(self, masters: Masters, relay_dispatch: Dispatch | None = None):
        """``relay_dispatch``: relay links are taken (services.messaging.relay_link)."""
        self._masters = masters
        self._relay_dispatch = relay_dispatch
        self._socket: socket.socket | None = None
        self._accepting: asyncio.Task | None = None
        self._connections: set[asyncio.Task] = set()
        self.port = 0

    def bind(self, host: str, port: int) -> int:
        """Listen (raises OSError when the port is taken); returns the bound port."""
        sock = socket.create_server((host, port), reuse_port=False, backlog=64)
        sock.setblocking(False)
        self._socket, self.port = sock, sock.getsockname()[1]
        return self.port

    def start(self) -> None:
        self._accepting = asyncio.create_task(self._accept(), name="ha-listener")

    async def stop(self) -> None:
        tasks = [t for t in (self._accepting, *self._connections) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._socket is not None:
            self._socket.close()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(self._socket)
            except OSError as failure:  # e.g. out of file descriptors: keep listening
                log.warning("replication listener: accept failed: %s", failure)
                await asyncio.sleep(0.1)
                continue
            task = asyncio.create_task(self._serve(Link(sock)))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

    async def _serve(self, link: Link) -> None:
        try:
            async with asyncio.timeout(HANDSHAKE_TIMEOUT_S):
                accept = (PREAMBLE, RELAY_PREAMBLE) if self._relay_dispatch is not None else (PREAMBLE,)
                preamble = await link.receive_preamble(accept)
                if not await check_slave(link):  # the cluster secret, when one is installed (logged there)
                    return
                if preamble == RELAY_PREAMBLE:
                    got = None
                else:
                    got = await link.receive()
            if preamble == RELAY_PREAMBLE:
                await serve_relay_link(link, self._relay_dispatch)
                return
            if got is None:
                log.info("replication connection from %s closed by the peer before its handshake", link.peer)
                return
            decoded = decode_slave_frame(*got)
            if decoded is None or not decoded[0] or not isinstance(decoded[1], SlaveHandshake):
                log.warning("replication connection from %s closed: BAD_HANDSHAKE (the first frame must be a "
                            "slave handshake with slave_id > 0 and a broker name)", link.peer)
                return
            name, handshake = decoded
            master = self._masters(name)
            if master is None:
                reason = f"BROKER_NOT_MASTER: this container hosts no master broker named {name!r}"
                await link.send(refusal_to_proto(reason).SerializeToString())
                return
            await master.serve(link, handshake)
        except TimeoutError:
            log.warning("replication connection from %s closed: HANDSHAKE_TIMEOUT", link.peer)
        except (OSError, WireError) as failure:
            log.warning("replication connection from %s closed: %s", link.peer, failure)
        finally:
            await link.aclose()
