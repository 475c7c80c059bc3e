"""Mounting the messaging protocol on a grpc.aio server (the container owns the server).

Rules: the server must accept large requests (``grpcMaxInboundMessageSize``; the default
4 MiB of grpcio rejects a 4 MiB body) and tolerate keepalive pings without calls (Java
clients ping every 300 s).  :func:`server_options` gives those options;
:func:`add_messaging_services` registers the MessagingService and returns the
:class:`ClientRegistry`, which is the brokers' ``TransactionCheckSink``.

Requests that do not parse are answered by ``services.request_guard`` in front of the
servicer: the client protocol carries its own status in every response, so a unary or
server-streaming call gets its response type with ``BAD_REQUEST`` (40000) naming the method
and what failed (:func:`bad_request_answers`); a Telemetry stream that sends such a command
ends with INVALID_ARGUMENT, as its other refusals do.
"""
from __future__ import annotations

import time

import grpc

from metadata.authentication import AccountSource
from metadata.status import Code, RequestRejected
from proto import messaging_definition_pb2 as definition
from proto import messaging_service_pb2 as service_pb
from proto import messaging_service_pb2_grpc as service_grpc
from services.broker.api import BrokerDirectory
from services.messaging.access import ClientAccess
from services.messaging.broker_port import BrokerPortHandler, Relays
from services.messaging.client_registry import ClientRegistry
from services.messaging.config import MessagingConfig
from services.messaging.servicer import MessagingService
from services.request_guard import GuardedServer, RequestGuard, guard_method

OTLP_METRICS_EXPORT = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"


def server_options(config: MessagingConfig) -> list[tuple[str, int]]:
    return [
        ("grpc.max_receive_message_length", config.grpc_max_inbound_message_size),
        ("grpc.max_send_message_length", config.grpc_max_outbound_message_size),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", config.grpc_keepalive_min_ping_interval_ms),
        ("grpc.http2.max_ping_strikes", 0),
    ]


def broker_port_options(config: MessagingConfig) -> list[tuple[str, int]]:
    """A broker's own endpoint also ends each client connection after
    ``brokerEndpointMaxConnectionAgeMillis`` (HTTP/2 GOAWAY; calls in flight finish within the
    grace).  Why (issue 23, bench/chaos.py): the official clients keep one connection over
    all of a group's replica endpoints (gRPC's pick_first) and stay on whichever answered
    when the master failed, so after the master came back every call was relayed by the
    other replica for good, doubling the gRPC work of both containers; a client that
    reconnects tries the lowest address first, the group's preferred master."""
    options = server_options(config)
    if config.broker_endpoint_max_connection_age_ms:
        options += [("grpc.max_connection_age_ms", config.broker_endpoint_max_connection_age_ms),
                    ("grpc.max_connection_age_grace_ms", config.broker_endpoint_max_connection_age_grace_ms)]
    return options


async def _empty_export(request: bytes, context) -> bytes:
    return b""  # an empty ExportMetricsServiceResponse


def _metrics_sink() -> grpc.GenericRpcHandler:
    """An OTLP MetricsService that accepts and drops client metrics (clients with metric.on)."""
    handler = grpc.unary_unary_rpc_method_handler(_empty_export, request_deserializer=None, response_serializer=None)
    return grpc.method_handlers_generic_handler("opentelemetry.proto.collector.metrics.v1.MetricsService", {"Export": handler})


def bad_request_answers() -> dict[str, object]:
    """Method path -> (details -> the method's response with status BAD_REQUEST), for every
    MessagingService method with a single request."""
    answers = {}
    for method in service_pb.DESCRIPTOR.services_by_name["MessagingService"].methods:
        if method.client_streaming:
            continue
        response_type = getattr(service_pb, method.output_type.name)

        def answer(details: str, response_type=response_type):
            return response_type(status=definition.Status(code=int(Code.BAD_REQUEST), message=details))
        answers[f"/{method.containing_service.full_name}/{method.name}"] = answer
    return answers


def _bad_command(details: str) -> BaseException:
    return RequestRejected(Code.BAD_REQUEST, details)  # Telemetry ends the stream with INVALID_ARGUMENT


def add_messaging_services(server: grpc.aio.Server, directory: BrokerDirectory, config: MessagingConfig, clock,
                           accounts: AccountSource | None = None, guard: RequestGuard | None = None,
                           access: ClientAccess | None = None) -> ClientRegistry:
    """``accounts`` authenticate calls when ``authenticationEnabled``, ``access`` authorizes them
    when ``authorizationEnabled``; ``guard`` counts and logs requests that do not parse (one
    per process, shared with the other servers)."""
    registry = ClientRegistry(config, clock)
    service = MessagingService(directory, config, clock, registry, accounts=accounts, access=access)
    guarded = GuardedServer(server, guard or RequestGuard(), bad_request_answers(), _bad_command)
    service_grpc.add_MessagingServiceServicer_to_server(service, guarded)
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
                    registry: ClientRegistry, relays: Relays, accounts: AccountSource | None = None,
                    guard: RequestGuard | None = None, acting=lambda: False,
                    access: ClientAccess | None = None) -> BrokerPortHandler:
    """One broker's own endpoint (services.messaging.broker_port): ``directory`` is pinned to
    the broker; ``registry`` is the container's (Telemetry streams on any endpoint reach it).
    Calls served here parse their requests behind the same guard as the client endpoint."""
    service = MessagingService(directory, config, clock, registry, accounts=accounts, access=access)
    collected = _MethodHandlers()
    service_grpc.add_MessagingServiceServicer_to_server(service, collected)
    guard, answers = guard or RequestGuard(), bad_request_answers()
    local = {path: guard_method(path, method, guard, answers.get(path), _bad_command)
             for path, method in collected.handlers.items()}
    handler = BrokerPortHandler(replica, local, relays, config.broker_endpoint_hold_ms, time.monotonic, acting)
    server.add_generic_rpc_handlers((handler, _metrics_sink()))
    return handler
