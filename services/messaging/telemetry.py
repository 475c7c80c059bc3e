"""The Telemetry stream (bidi): settings in, settings replies and server commands out.

Rules:
- Every ``settings`` command is answered with status OK and the merged settings
  (``settings.reply``); the stream then stays open for the client's whole life, carrying
  server commands (orphaned transaction checks) from the stream's outbox.
- Streams that never send settings are fine: the client is still registered and routable
  by id.  Commands other than ``settings`` are ignored.
- Unlike the other RPCs, Telemetry fails with gRPC errors, as the proxy does: a missing
  client id or settings without publishing/subscription give INVALID_ARGUMENT; a call
  that is not authenticated gives UNAUTHENTICATED; an unexpected failure gives INTERNAL
  (logged).  The metadata is signed once, when the stream opens.
- With authorization on, each settings command is authorized by what it names (the
  publishing topics, or the subscription's group and topics) for the stream's authenticated
  user and peer; a refused one is answered with its FORBIDDEN status (the clients ignore a
  reply that is not OK) and is not remembered; the stream stays open.
- The reader runs as its own task and puts replies in the same bounded outbox the server
  pushes into, so one writer (this generator) owns the response stream.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import grpc

from metadata.status import Code, RequestRejected
from proto import messaging_service_pb2 as service
from services.messaging import responses, settings
from services.messaging.client_registry import ClientRegistry, TelemetryStream
from services.messaging.config import MessagingConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _End:
    """The reader finished; ``error`` set means the stream fails with that gRPC status."""

    code: grpc.StatusCode | None = None
    error: str = ""


async def serve_telemetry(owner, registry: ClientRegistry, config: MessagingConfig, request_iterator, context):
    try:
        client = owner.client_of(context)
    except RequestRejected as rejected:
        code = grpc.StatusCode.UNAUTHENTICATED if rejected.code == Code.UNAUTHORIZED else grpc.StatusCode.INVALID_ARGUMENT
        await context.abort(code, rejected.message)
        return
    stream = registry.open_stream(client.client_id)
    reader = asyncio.create_task(_read(owner, registry, config, stream, request_iterator, client, context.peer()))
    try:
        while True:
            command = await stream.outbox.get()
            if isinstance(command, _End):
                if command.code is not None:
                    await context.abort(command.code, command.error)
                return
            yield command
    finally:
        reader.cancel()
        registry.close_stream(stream)


async def _read(owner, registry, config, stream: TelemetryStream, request_iterator, client, peer: str) -> None:
    end = _End()
    try:
        async for command in request_iterator:
            if command.WhichOneof("command") != "settings":
                continue
            refusal = owner.settings_refusal(client, peer, command.settings)
            if refusal is not None:
                await stream.outbox.put(service.TelemetryCommand(status=refusal))
            else:
                await stream.outbox.put(_settings_reply(owner, registry, config, stream.client_id, command.settings))
    except RequestRejected as rejected:
        end = _End(grpc.StatusCode.INVALID_ARGUMENT, rejected.message)
    except asyncio.CancelledError:
        raise
    except Exception as error:  # noqa: BLE001 - the stream fails with INTERNAL, the server lives on
        if not isinstance(error, grpc.RpcError):
            log.exception("Telemetry stream of %s failed", stream.client_id)
        end = _End(grpc.StatusCode.INTERNAL, f"telemetry failed: {type(error).__name__}")
    await stream.outbox.put(end)


def _settings_reply(owner, registry, config, client_id: str, client_settings) -> service.TelemetryCommand:
    remembered = settings.client_settings(client_settings)
    registry.update_settings(client_id, remembered)
    group = None
    if remembered.client_type != settings.PRODUCER:
        group = owner.group_settings(remembered.group, remembered.topics)
    merged = settings.reply(client_settings, config, group)
    return service.TelemetryCommand(status=responses.OK, settings=merged)
