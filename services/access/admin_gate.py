"""Admin calls under authorization: every BrokerAdmin and AclAdmin call is signed and allowed.

With ``authorizationEnabled`` the container mounts its admin services through an
:class:`AdminGate` (what the generated ``add_..._to_server`` gets instead of the server, as
``services.request_guard.GuardedServer``), which puts a check in front of each method:

- Authentication: the call's ``authorization``/``x-mq-date-time`` metadata, signed as the
  clients sign (``relaymq admin --access-key/--secret-key`` or ``RELAYMQ_ACCESS_KEY``/
  ``RELAYMQ_SECRET_KEY``; ``services.admin.client`` signs), against the ACL store's users.
  Refused: UNAUTHENTICATED ``UNAUTHORIZED: not authenticated: ...``.
- Authorization: :func:`metadata.rpc_permissions.admin_requirements` of the method with
  the topics and groups the request names (:data:`NAMES`) and the cluster it is about
  (``cluster_of``), for the signing user from the gRPC peer's address.  Refused:
  PERMISSION_DENIED ``FORBIDDEN: User:x may not Create on Topic:y from ...``, counted in
  ``relaymq_authorization_denied_total{method="admin:<Method>"}``.
- Only the services mounted through the gate are checked (BrokerAdmin, AclAdmin).  The
  replication, acting, backlog and health services of the same port are cluster-internal and
  are not authenticated (docs/security.md).
"""
from __future__ import annotations

import inspect
import logging
from typing import Callable, Iterable, Mapping

import grpc

from metadata import authentication
from metadata.authorization import authorize_all
from metadata.rpc_permissions import ADMIN_RULES, admin_requirements
from scheduler.clock import utc_offset_ms
from services import metrics
from services.messaging.converters import signature_metadata
from services.request_guard import peer_host, split_path

log = logging.getLogger(__name__)

Names = tuple[tuple[str, ...], tuple[str, ...]]  # (topics, groups) a request names
_NONE: Names = ((), ())


def _offset_names(request) -> Names:
    return (tuple(o.topic for o in request.offsets), tuple(o.group for o in request.offsets))


NAMES: Mapping[str, Callable[[object], Names]] = {
    "CreateOrUpdateTopic": lambda r: ((r.topic.topic,), ()),
    "DeleteTopic": lambda r: ((r.topic,), ()),
    "CreateOrUpdateGroup": lambda r: ((), (r.group.group,)),
    "DeleteGroup": lambda r: ((), (r.group,)),
    "TopicStatus": lambda r: ((r.topic,), ()),
    "ConsumerProgress": lambda r: ((r.topic,), (r.group,)),
    "WriteConsumerOffsets": _offset_names,
    "ResetOffset": lambda r: ((r.topic,), (r.group,)),
    "QueryMessage": lambda r: ((r.topic,), ()),
    "ClientConnections": lambda r: ((r.topic,), (r.group,)),
}


class AdminGate:
    """A server stand-in: handlers added through it are authenticated and authorized first."""

    def __init__(self, server, store, now_ms: Callable[[], int], max_skew_ms: int,
                 cluster_of: Callable[[object], str]):
        """``store``: the ACL store (users and state); ``cluster_of(request)``: the cluster a
        request is about (the container's, or the one a request names)."""
        self._server, self._store = server, store
        self._now_ms, self._max_skew_ms, self._cluster_of = now_ms, max_skew_ms, cluster_of

    def add_generic_rpc_handlers(self, handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(tuple(_GatedHandler(h, self._wrap) for h in handlers))

    def add_registered_method_handlers(self, service_name: str, handlers) -> None:
        pass  # generic handlers only (services.request_guard)

    def _wrap(self, path: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        method = split_path(path)[1]
        assert handler.unary_unary is not None, f"{path}: admin methods are unary"
        inner = handler.unary_unary
        if method not in ADMIN_RULES:  # a method added without its rule: closed, not open
            log.error("admin method %s has no authorization rule (metadata/rpc_permissions.py): it is refused", path)

            async def closed(request, context):
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"FORBIDDEN: {method} has no authorization rule")
            return grpc.unary_unary_rpc_method_handler(closed, handler.request_deserializer, handler.response_serializer)

        async def gated(request, context):
            refusal = self.refusal(method, request, context.invocation_metadata(), context.peer())
            if refusal is not None:
                await context.abort(*refusal)
            result = inner(request, context)
            return await result if inspect.isawaitable(result) else result
        return grpc.unary_unary_rpc_method_handler(gated, handler.request_deserializer, handler.response_serializer)

    def refusal(self, method: str, request, metadata, peer: str) -> tuple[grpc.StatusCode, str] | None:
        """Why this admin call is refused (a gRPC status and details), None when it may go on."""
        authorization, date_time = signature_metadata(metadata)
        now_ms = self._now_ms()
        access_key, rejection = authentication.verify_caller(self._store, authorization, date_time, now_ms,
                                                             utc_offset_ms(now_ms), self._max_skew_ms)
        if rejection is not None:
            return grpc.StatusCode.UNAUTHENTICATED, f"UNAUTHORIZED: not authenticated: {rejection.value}"
        if self._store.disabled(access_key):
            return grpc.StatusCode.UNAUTHENTICATED, f"UNAUTHORIZED: not authenticated: User:{access_key} is disabled"
        topics, groups = NAMES.get(method, lambda r: _NONE)(request)
        needs = admin_requirements(method, self._cluster_of(request), topics, groups)
        if needs.missing is not None:
            return grpc.StatusCode.INVALID_ARGUMENT, f"BAD_REQUEST: the request names no {needs.missing.value.lower()}"
        state = self._store.state
        decision = authorize_all(state.users, state.index, access_key, needs.requirements, peer_host(peer))
        if decision is not None and not decision.allowed:
            metrics.labelled(metrics.AUTHORIZATION_DENIED, f"admin:{method}", decision.reason.value).inc()
            log.info("admin %s refused: %s", method, decision.message())
            return grpc.StatusCode.PERMISSION_DENIED, f"FORBIDDEN: {decision.message()}"
        return None


class _GatedHandler(grpc.GenericRpcHandler):
    def __init__(self, inner: grpc.GenericRpcHandler, wrap):
        self._inner, self._wrap = inner, wrap
        self._cache: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def service(self, handler_call_details):
        handler = self._inner.service(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        cached = self._cache.get(method)
        if cached is None or cached[0] is not handler:
            cached = self._cache[method] = (handler, self._wrap(method, handler))
        return cached[1]
