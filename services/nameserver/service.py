"""The nameserver's gRPC servicer: a thin driver around one :class:`RouteTable`.

Rules:
- The driver converts (``converters.py``), asks the core for a decision with ``now_ms`` from
  its one :class:`Clock`, applies the events, and answers.  All of it runs on the event
  loop's thread, so decisions and applies never interleave.
- Exceptions become gRPC statuses in exactly one place, :func:`_status_of`: bad fields are
  ``INVALID_ARGUMENT``, rejections carry their named reason first in the details.
- Removals (unregister, expiry, replacement) are logged with their reason, and so is an
  unregister the table ignored because it named a registration that is no longer the id's.
"""
from __future__ import annotations

import functools
import logging
from typing import Any, Callable

import grpc

from metadata.route_table import RouteTable, RouteTableOptions
from metadata.member_group import BrokerMemberGroup, decide_min_id_notice
from metadata.route_types import BrokerRegistered, BrokerRemoved, Decision, Rejected, RouteEvent, RouteRejection
from proto import nameserver_pb2 as pb
from proto import nameserver_pb2_grpc as pb_grpc
from scheduler.clock import Clock
from services import metrics
from services.nameserver import converters as conv
from services.nameserver.config import NamesrvConfig
from services.nameserver.notifier import MinBrokerIdNotifier

log = logging.getLogger(__name__)


class RouteRejected(Exception):
    def __init__(self, rejection: Rejected):
        super().__init__(f"{rejection.reason.value}: {rejection.detail}")
        self.rejection = rejection


class TopicRouteNotFound(Exception):
    pass


_REJECTION_STATUS = {
    RouteRejection.STALE_STATE_VERSION: grpc.StatusCode.FAILED_PRECONDITION,
    RouteRejection.BROKER_NAME_IN_OTHER_CLUSTER: grpc.StatusCode.FAILED_PRECONDITION,
    RouteRejection.HELD_BY_ANOTHER_ADDRESS: grpc.StatusCode.FAILED_PRECONDITION,
    RouteRejection.BROKER_NOT_REGISTERED: grpc.StatusCode.NOT_FOUND,
    RouteRejection.TOO_MANY_BROKERS: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def _status_of(exc: Exception) -> tuple[grpc.StatusCode, str]:
    """The one place where nameserver exceptions become gRPC statuses."""
    if isinstance(exc, conv.BadNameserverRequest):
        return grpc.StatusCode.INVALID_ARGUMENT, f"BAD_REQUEST: {exc}"
    if isinstance(exc, RouteRejected):
        return _REJECTION_STATUS[exc.rejection.reason], str(exc)
    if isinstance(exc, TopicRouteNotFound):
        return grpc.StatusCode.NOT_FOUND, f"TOPIC_NOT_FOUND: no route for topic {exc}"
    log.exception("nameserver: internal error")
    return grpc.StatusCode.INTERNAL, f"INTERNAL: {type(exc).__name__}"


def _rpc(method: Callable) -> Callable:
    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return method(self, request)
        except Exception as exc:  # converted in one place
            code, details = _status_of(exc)
            await context.abort(code, details)
    return wrapper


class NameserverDriver:
    """Owns the route table and the clock; every command goes through :meth:`execute`."""

    def __init__(self, config: NamesrvConfig, clock: Clock):
        self.config = config
        self.clock = clock
        self.notifier = MinBrokerIdNotifier(config.notify_min_broker_id_timeout_ms) if config.notify_min_broker_id_changed else None
        self.table = RouteTable(RouteTableOptions(
            default_heartbeat_timeout_ms=config.broker_channel_expired_time_ms,
            support_acting_master=config.support_acting_master,
            max_brokers=config.max_brokers,
        ))

    def execute(self, decision: Decision) -> Any:
        if isinstance(decision.reply, Rejected):
            raise RouteRejected(decision.reply)
        groups = {_group_of(e) for e in decision.events if isinstance(e, (BrokerRegistered, BrokerRemoved))}
        before = {g: (self.table.member_group(g[1], g[0]), self.table.acting_enabled(*g)) for g in groups}
        for event in decision.events:
            if isinstance(event, BrokerRemoved):
                log.info("nameserver: %s left the route (%s)", event.identity.canonical_name, event.reason.value)
            self.table.apply(event)
        for group, (members, acting) in sorted(before.items()):
            self._maybe_notify(members, acting)
        return decision.reply

    def _maybe_notify(self, before: BrokerMemberGroup, acting_before: bool) -> None:
        """Push the group's new smallest id to its members when it changed (notifyMinBrokerIdChanged)."""
        if self.notifier is None:
            return
        after = self.table.member_group(before.broker_name, before.cluster)
        acting = acting_before or self.table.acting_enabled(before.cluster, before.broker_name)
        notice = decide_min_id_notice(before, after, acting)
        if notice is not None:
            self.notifier.push(notice)

    def scan_not_active(self) -> None:
        self.execute(self.table.scan_not_active(self.clock.now_ms()))


def _group_of(event: RouteEvent) -> tuple[str, str]:
    identity = event.registration.identity if isinstance(event, BrokerRegistered) else event.identity
    return identity.cluster, identity.broker_name


class NameserverServicer(pb_grpc.NameserverServiceServicer):
    def __init__(self, driver: NameserverDriver):
        self.driver = driver

    @_rpc
    def RegisterBroker(self, request: pb.NameserverRegisterBrokerRequest) -> pb.NameserverRegisterBrokerResponse:
        identity = conv.identity_from_proto(request.broker)
        conv.parse_endpoint(request.address, "address")
        conv.parse_endpoint(request.client_endpoint, "client_endpoint")
        tls_endpoint = conv.tls_endpoint_from_proto(request.tls_client_endpoint, request.client_endpoint)
        topics = conv.topic_table_from_proto(request, self.driver.config.max_topics_per_registration)
        timeout_ms = conv.heartbeat_timeout_from_proto(request.heartbeat_timeout_ms)
        broker_endpoint = conv.broker_endpoint_from_proto(request.broker_endpoint)
        decision = self.driver.table.register(identity, request.address, request.client_endpoint, topics,
                                              self.driver.clock.now_ms(), timeout_ms, request.enable_acting_master,
                                              tls_endpoint, broker_endpoint)
        reply = self.driver.execute(decision)
        return pb.NameserverRegisterBrokerResponse(master_address=reply.master_address)

    @_rpc
    def UnregisterBroker(self, request: pb.NameserverUnregisterBrokerRequest) -> pb.NameserverUnregisterBrokerResponse:
        identity, address, state_version = conv.unregister_from_proto(request)
        decision = self.driver.table.unregister(identity, address, state_version)
        if isinstance(decision.reply, Rejected) and decision.reply.reason is not RouteRejection.BROKER_NOT_REGISTERED:
            log.info("nameserver: unregister of %s from %s ignored (%s: %s)", identity.canonical_name, address,
                     decision.reply.reason.value, decision.reply.detail)
        self.driver.execute(decision)
        return pb.NameserverUnregisterBrokerResponse()

    @_rpc
    def BrokerHeartbeat(self, request: pb.NameserverBrokerHeartbeatRequest) -> pb.NameserverBrokerHeartbeatResponse:
        identity = conv.identity_from_proto(request.broker)
        version = (conv.data_version_from_proto(request.topics_version, "topics_version")
                   if request.HasField("topics_version") else None)
        reply = self.driver.execute(self.driver.table.heartbeat(identity, self.driver.clock.now_ms(), version))
        return pb.NameserverBrokerHeartbeatResponse(registration_needed=reply.registration_needed)

    @_rpc
    def QueryRoute(self, request: pb.NameserverQueryRouteRequest) -> pb.NameserverQueryRouteResponse:
        topic = conv.topic_name_from_proto(request.topic)
        route = self.driver.table.route(topic)
        if route is None:
            metrics.labelled(metrics.ROUTES_SERVED, "not_found").inc()
            raise TopicRouteNotFound(topic)
        metrics.labelled(metrics.ROUTES_SERVED, "found").inc()
        return conv.route_to_proto(route)

    @_rpc
    def GetClusterInfo(self, request: pb.NameserverGetClusterInfoRequest) -> pb.NameserverGetClusterInfoResponse:
        return conv.cluster_info_to_proto(self.driver.table.cluster_info())

    @_rpc
    def GetBrokerMemberGroup(self, request: pb.NameserverGetBrokerMemberGroupRequest) -> pb.NameserverGetBrokerMemberGroupResponse:
        cluster, broker_name = conv.member_group_request_from_proto(request)
        group = self.driver.table.member_group(broker_name, cluster)
        return conv.member_group_to_proto(group, self.driver.table.acting_enabled(group.cluster, broker_name))
