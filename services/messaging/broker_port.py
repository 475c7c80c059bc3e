"""A broker's own client endpoint (its ``listenPort``): served here, relayed, or held.

Why: the official clients open one gRPC channel over all the addresses of a queue's broker
endpoints and let gRPC's pick_first move to the next address when a connection fails.  A
group's route names the endpoint of every replica, so when the master's container dies the
channel reconnects to another replica's endpoint within milliseconds -- provided something
listens there.  Every replica therefore listens, and each call is decided when it arrives:

* the replica here is master (and its pause fence allows): the call is served here, by the
  client protocol's servicer pinned to this broker (a FIFO group keeps its broker);
* it copies from a connected master: the call is relayed, bytes unchanged, with the
  caller's metadata and deadline, to that master container's endpoint for the group (what
  ``HaService.Locate`` answered); streams (ReceiveMessage, Telemetry) are relayed as streams.
  A unary relay still waiting when this replica becomes master (the old master stopped
  answering) is cancelled and served here;
* it is a slave acting for its absent master (RIP-32): the call is served here, by the same
  pinned servicer, which serves reads and receives and refuses writes with a clear status;
* none of these (the master just died, an election is running, the replica has no role yet):
  the call is held until the replica becomes master, acts, or connects to a new master, at most
  ``brokerEndpointHoldMillis`` and never past the caller's deadline; then it is served
  here, which answers with a status the client retries (HA_NOT_AVAILABLE).

Requests are parsed only when served here; a relayed call costs one extra hop, no parse.
The handlers served here may parse their requests themselves (``services.request_guard``
registers them without a deserializer, to answer bytes that do not parse); then the raw
bytes are handed to them as they are.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

import grpc

from services import metrics
from services.messaging.relay_link import RelayFailed, RelayLinks

log = logging.getLogger(__name__)
LOCAL = "local"
_OVER_GRPC = object()   # the relay link cannot carry this call: relay it over gRPC
# a relay ends this much before its caller's deadline, so that its DEADLINE_EXCEEDED reaches the
# caller as a status; at the same instant, the status went to a call gRPC had already ended
# (ExecuteBatchError logged with a traceback by grpc's core)
RELAY_DEADLINE_MARGIN_S = 0.05


def relay_timeout(context) -> float | None:
    remaining = context.time_remaining()
    return None if remaining is None else max(0.001, remaining - RELAY_DEADLINE_MARGIN_S)
_HOP_HEADERS = {"content-type", "te", "user-agent", "grpc-accept-encoding", "grpc-encoding", "grpc-timeout"}


def relayed_metadata(context) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in context.invocation_metadata()
                 if not k.startswith(":") and k not in _HOP_HEADERS and not k.startswith("grpc-"))


class Relays:
    """gRPC channels to other containers' broker endpoints, one per address, kept until closed;
    and the relay links to their replication listeners (unary calls)."""

    def __init__(self, options: list[tuple[str, int]]):
        self._options = options
        self._channels: dict[str, grpc.aio.Channel] = {}
        self.links = RelayLinks()

    def channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:  # a master that comes back is reached within a second, not gRPC's up to 2 minutes
            channel = grpc.aio.insecure_channel(address, options=[*self._options, ("grpc.max_reconnect_backoff_ms", 1000)])
            self._channels[address] = channel
        return channel

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
        await self.links.close()


def _parsed(handler: grpc.RpcMethodHandler, raw: bytes):
    return raw if handler.request_deserializer is None else handler.request_deserializer(raw)


class BrokerPortHandler(grpc.GenericRpcHandler):
    """Decides each call on ``replica``'s endpoint; ``local`` maps method paths to the pinned
    servicer's handlers (with their (de)serializers)."""

    def __init__(self, replica, local: dict[str, grpc.RpcMethodHandler], relays: Relays, hold_ms: int,
                 now_s: Callable[[], float], acting: Callable[[], bool] = lambda: False):
        """``acting()``: the broker is a slave acting for its absent master now."""
        self.replica, self.local, self.relays, self.hold_ms, self._now_s = replica, local, relays, hold_ms, now_s
        self.acting = acting
        self._relayed_behaviours: dict = {}

    def service(self, handler_call_details):
        method = handler_call_details.method
        handler = self.local.get(method)
        if handler is None:
            return None
        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(self._bidi(method, handler))
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(self._stream(method, handler))
        return grpc.unary_unary_rpc_method_handler(self._unary(method, handler))

    def relayed(self, method: str, streamed: bool):
        """The behaviour serving ``method`` on this endpoint for a call that came over a relay
        link: unary, or with ``streamed`` a unary-request stream; None for another kind or a
        method this endpoint does not have."""
        key = (method, streamed)
        behaviour = self._relayed_behaviours.get(key)
        if behaviour is None:
            handler = self.local.get(method)
            if handler is None or handler.request_streaming or handler.response_streaming != streamed:
                return None
            make = self._stream if streamed else self._unary
            behaviour = self._relayed_behaviours[key] = make(method, handler)
        return behaviour

    def _relaying(self, method: str, via: str) -> None:
        metrics.labelled(metrics.RELAYED_CALLS, self.replica.name, method.rsplit("/", 1)[-1], via).inc()

    async def target(self, context) -> str:
        """LOCAL, or the endpoint to relay to; waits (bounded) while there is neither."""
        remaining = context.time_remaining()
        hold_s = self.hold_ms / 1000 if remaining is None else min(self.hold_ms / 1000, max(0.0, remaining - 0.2))
        deadline = self._now_s() + hold_s
        while True:
            replica = self.replica
            if replica.is_master and (replica.fence is None or replica.fence.writable(int(self._now_s() * 1000))):
                return LOCAL
            endpoint = replica.relay_endpoint()
            if endpoint:
                return endpoint
            if self.acting():
                return LOCAL
            left = deadline - self._now_s()
            if left <= 0:
                return LOCAL
            await replica.wait_changed(left)

    def _unary(self, method: str, handler: grpc.RpcMethodHandler):
        async def behaviour(raw: bytes, context):
            where = await self.target(context)
            if where == LOCAL:
                response = await handler.unary_unary(_parsed(handler, raw), context)
                return handler.response_serializer(response)
            relayed = await self._relay_unless_promoted(method, where, raw, context)
            if relayed is not None:
                return relayed
            response = await handler.unary_unary(_parsed(handler, raw), context)
            return handler.response_serializer(response)
        return behaviour

    async def _relay_unless_promoted(self, method: str, where: str, raw: bytes, context) -> bytes | None:
        """Relay a unary call; None when this replica became master meanwhile (the relay, stuck
        on a master that stopped answering, is cancelled and the call is served here: a send
        may then be stored twice, never lost).  Over the relay link to the master's container
        when it takes one (services.messaging.relay_link), else over gRPC.  The call is awaited
        as it is, and a listener on the replica cancels it on a promotion: no task, event wait
        or timer per relayed call."""
        address = self.replica.relay_link_address()
        if address and self.relays.links.supported(address):
            self._relaying(method, "link")
            outcome = await self._relay_over_link(address, method, where, raw, context)
            if outcome is not _OVER_GRPC:
                return outcome
        self._relaying(method, "grpc")
        call = self.relays.channel(where).unary_unary(method)(raw, metadata=relayed_metadata(context),
                                                              timeout=relay_timeout(context))
        promoted = False

        def on_change() -> None:
            nonlocal promoted
            if self.replica.is_master and not call.done():
                promoted = True
                call.cancel()

        self.replica.add_change_listener(on_change)
        try:
            return await call
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if promoted and (task is None or not task.cancelling()):  # ours, not the caller's going away
                return None
            raise
        except grpc.aio.AioRpcError as failure:
            await context.abort(failure.code(), f"relayed to {where}: {failure.details()}")
        finally:
            self.replica.remove_change_listener(on_change)
            if not call.done():
                call.cancel()

    async def _relay_over_link(self, address: str, method: str, where: str, raw: bytes, context):
        watched: list[asyncio.Future] = []
        promoted = False

        def cancel_if_promoted() -> None:
            nonlocal promoted
            if self.replica.is_master and watched and not watched[0].done():
                promoted = True
                watched[0].cancel()

        def watch(future: asyncio.Future) -> None:
            watched.append(future)
            cancel_if_promoted()   # promoted while the link was being made

        self.replica.add_change_listener(cancel_if_promoted)
        try:
            return await self.relays.links.call(address, self.replica.name, method, raw, relayed_metadata(context),
                                                relay_timeout(context), watch)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if promoted and (task is None or not task.cancelling()):  # ours, not the caller's going away
                return None
            raise
        except RelayFailed as failure:
            if failure.code is grpc.StatusCode.UNIMPLEMENTED or not self.relays.links.supported(address):
                return _OVER_GRPC   # that container serves the group elsewhere, or takes no relay links
            await context.abort(failure.code, f"relayed to {where}: {failure.details}")
        finally:
            self.replica.remove_change_listener(cancel_if_promoted)

    def _stream(self, method: str, handler: grpc.RpcMethodHandler):
        async def behaviour(raw: bytes, context):
            where = await self.target(context)
            if where == LOCAL:
                async for response in handler.unary_stream(_parsed(handler, raw), context):
                    yield handler.response_serializer(response)
                return
            address = self.replica.relay_link_address()
            if address and self.relays.links.supported(address):
                self._relaying(method, "link")
                answered = False
                try:
                    async for chunk in self.relays.links.stream(address, self.replica.name, method, raw,
                                                                relayed_metadata(context), relay_timeout(context)):
                        answered = True
                        yield chunk
                    return
                except RelayFailed as failure:
                    over_grpc = failure.code is grpc.StatusCode.UNIMPLEMENTED or not self.relays.links.supported(address)
                    if answered or not over_grpc:
                        await context.abort(failure.code, f"relayed to {where}: {failure.details}")
            self._relaying(method, "grpc")
            call = self.relays.channel(where).unary_stream(method)(
                raw, metadata=relayed_metadata(context), timeout=relay_timeout(context))
            try:
                async for chunk in call:
                    yield chunk
            except grpc.aio.AioRpcError as failure:
                await context.abort(failure.code(), f"relayed to {where}: {failure.details()}")
        return behaviour

    def _bidi(self, method: str, handler: grpc.RpcMethodHandler):
        async def behaviour(request_iterator, context):
            where = await self.target(context)
            if where == LOCAL:
                parsed = (request_iterator if handler.request_deserializer is None
                          else (handler.request_deserializer(raw) async for raw in request_iterator))
                async for response in handler.stream_stream(parsed, context):
                    yield handler.response_serializer(response)
                return
            self._relaying(method, "grpc")
            call = self.relays.channel(where).stream_stream(method)(
                request_iterator, metadata=relayed_metadata(context), timeout=relay_timeout(context))
            try:
                async for chunk in call:
                    yield chunk
            except grpc.aio.AioRpcError as failure:
                await context.abort(failure.code(), f"relayed to {where}: {failure.details()}")
        return behaviour
