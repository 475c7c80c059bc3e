"""Mounting the messaging protocol on a grpc.aio server (the container owns the server).

Rules: the server must accept large requests (``grpcMaxInboundMessageSize``; the default
4 MiB of grpcio rejects a 4 MiB body) and tolerate keepalive pings without calls (Java
clients ping every 300 s).  :func:`server_options` gives those options;
:func:`add_messaging_services` registers the MessagingService and returns the
:class:`ClientRegistry`, which is the brokers' ``TransactionCheckSink``.
"""
from __future__ import annotations

import time

import grpc

from metadata.authentication import Accounts
from proto import messaging_service_pb2_grpc as service_grpc
from services.broker.api import BrokerDirectory
from services.messaging.broker_port import BrokerPortHandler, Relays
from services.messaging.client_registry import ClientRegistry
from services.messaging.config import MessagingConfig
from services.messaging.servicer import MessagingService

OTLP_METRICS_EXPORT = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"


def server_options(config: MessagingConfig) -> list[tuple[str, int]]:
    return [
        ("grpc.max_receive_message_length", config.grpc_max_inbound_message_size),
        ("grpc.max_send_message_length", config.grpc_max_outbound_message_size),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", config.grpc_keepalive_min_ping_interval_ms),
        ("grpc.http2.max_ping_strikes", 0),
    ]


async def _empty_export(request: bytes, context) -> bytes:
    return b""  # an empty ExportMetricsServiceResponse


def _metrics_sink() -> grpc.GenericRpcHandler:
    """An OTLP MetricsService that accepts and drops client metrics (clients with metric.on)."""
    handler = grpc.unary_unary_rpc_method_handler(_empty_export, request_deserializer=None, response_serializer=None)
    return grpc.method_handlers_generic_handler("opentelemetry.proto.collector.metrics.v1.MetricsService", {"Export": handler})


class GenericHandlersOnly:
    """The generated ``add_..._to_server`` also registers every method with the core.  grpc.aio
    then keeps one pending request-call future per registered method and ``asyncio.wait``s on
    all of them (22 for MessagingService) for every incoming call; with the generic handler
    alone it waits on one, as a bare echo server does.  Method paths and handlers are the same.
    Every service on the client endpoint (the health service too) is added through it."""

    def __init__(self, server: grpc.aio.Server):
        self._server = server

    def add_generic_rpc_handlers(self, handlers) -> None:
        self._server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service_name: str, handlers) -> None:
        pass


def add_messaging_services(server: grpc.aio.Server, directory: BrokerDirectory, config: MessagingConfig, clock,
                           accounts: Accounts | None = None) -> ClientRegistry:
    """``accounts`` authenticate calls when ``authenticationEnabled``."""
    registry = ClientRegistry(config, clock)
    service = MessagingService(directory, config, clock, registry, accounts=accounts)
    service_grpc.add_MessagingServiceServicer_to_server(service, GenericHandlersOnly(server))
    server.add_generic_rpc_handlers((_metrics_sink(),))
    return registry


class _MethodHandlers:
    """Collects the generated code's method handlers (path -> handler) instead of a server."""

    def __init__(self) -> None:
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers) -> None:
        pass

    def add_registered_method_handlers(self, service_name: str, handlers) -> None:
        self.handlers.update({f"/{service_name}/{name}": handler for name, handler in handlers.items()})


def add_broker_port(server: grpc.aio.Server, replica, directory: BrokerDirectory, config: MessagingConfig, clock,
                    registry: ClientRegistry, relays: Relays, accounts: Accounts | None = None) -> None:
    """One broker's own endpoint (services.messaging.broker_port): ``directory`` is pinned to
    the broker; ``registry`` is the container's (Telemetry streams on any endpoint reach it)."""
    service = MessagingService(directory, config, clock, registry, accounts=accounts)
    collected = _MethodHandlers()
    service_grpc.add_MessagingServiceServicer_to_server(service, collected)
    handler = BrokerPortHandler(replica, collected.handlers, relays, config.broker_endpoint_hold_ms, time.monotonic)
    server.add_generic_rpc_handlers((handler, _metrics_sink()))
