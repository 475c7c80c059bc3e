"""``apache.rocketmq.v2.MessagingService`` over a :class:`BrokerDirectory`.

Rules:
- Thin driver: requests are validated and converted by ``converters``, answered through
  ``responses``; the broker decides.
- Errors are response statuses, never gRPC errors (Telemetry excepted, see
  ``telemetry``).  :meth:`MessagingService._failure` is the one place where an exception
  becomes a status: RequestRejected keeps its code, anything else is INTERNAL_ERROR with a
  logged traceback.  A stream never crashes.
- ReceiveMessage streams status first, then one response per message, then
  ``delivery_timestamp``; an empty poll answers MESSAGE_NOT_FOUND.  The long poll ends
  ``longPollingReserveTimeInMillis`` before the client's deadline.
- Metrics: sends, receives and acks per broker and topic; latency and non-OK codes per RPC.
- :meth:`MessagingService.client_of` is the one place call metadata is read.  With
  ``authenticationEnabled`` it first checks the call's signature
  (``metadata.authentication``); a refused call, or one signed by a disabled user, is
  UNAUTHORIZED before anything else is looked at.  Disabled, the ``authorization`` header is
  ignored (clients send it even without credentials).
- With ``authorizationEnabled`` every call is then authorized (``services.messaging.access``)
  before its handler runs: the subject is the verified access key, the address the gRPC
  peer; a refusal is FORBIDDEN.  Telemetry settings are authorized one by one; a refused one
  is answered with its FORBIDDEN status and the stream stays open.
- Routes asked for over TLS name TLS endpoints: the client reuses the scheme it connected
  with for every broker endpoint it is given, so each queue gets the TLS endpoint of the
  container hosting its broker (registered with the nameserver next to the plaintext one),
  this container's and every other's alike.  A queue whose container has no TLS port keeps
  its plaintext endpoint, and a warning is logged once per broker and endpoint: the TLS
  client then fails loudly on that endpoint (a handshake error naming it) instead of
  silently never producing to or consuming from that broker, as dropping the queue would.
  Plaintext callers always get plaintext endpoints.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from operator import attrgetter

from metadata import authentication
from metadata.message import MessageType
from metadata.rpc_permissions import Missing
from metadata.status import Code, RequestRejected
from proto import messaging_definition_pb2 as pb
from proto import messaging_service_pb2 as service
from proto import messaging_service_pb2_grpc as service_grpc
from scheduler.clock import utc_offset_ms
from services import metrics
from services.broker.api import BrokerApi, BrokerDirectory, GroupSettings, QueueRoute
from services.broker.internal_put import rejection_for
from services.messaging import converters, moved_relay, responses
from services.messaging.access import ClientAccess, settings_needs
from services.messaging.broker_choice import NoMaster
from services.messaging.client_registry import ClientRegistry
from services.messaging.config import MessagingConfig
from services.messaging.telemetry import serve_telemetry
from store.errors import StoreError

_message_type = attrgetter("message_type")
log = logging.getLogger(__name__)
_SUCCESS = {int(Code.OK), int(Code.MULTIPLE_RESULTS), int(Code.MESSAGE_NOT_FOUND)}
_CLIENT_TYPES = {pb.PRODUCER: "PRODUCER", pb.PUSH_CONSUMER: "PUSH_CONSUMER", pb.SIMPLE_CONSUMER: "SIMPLE_CONSUMER",
                 pb.PULL_CONSUMER: "PULL_CONSUMER"}


Endpoint = tuple[str, int]
_WARNINGS_WITHOUT_TLS_MAX = 1024  # distinct (broker, endpoint) pairs warned about; later ones are not


class MessagingService(service_grpc.MessagingServiceServicer):
    def __init__(self, directory: BrokerDirectory, config: MessagingConfig, clock, registry: ClientRegistry,
                 accounts: authentication.AccountSource | None = None, access: ClientAccess | None = None):
        """``access`` authorizes every call (None: authorization is off)."""
        assert access is None or config.authentication_enabled, "authorization needs authentication"
        self._directory = directory
        self._config = config
        self._clock = clock
        self._registry = registry
        self._accounts = accounts or authentication.Accounts({})
        self._access = access
        self._warned_without_tls: set[tuple[str, Endpoint]] = set()  # (broker, plaintext endpoint), bounded
        self._next_expiry_ms = 0

    # ---------------------------------------------------------------- the one place

    def client_of(self, context) -> converters.ClientContext:
        """The caller, from the call's metadata; authenticated first when that is enabled."""
        metadata = context.invocation_metadata()
        if self._config.authentication_enabled:
            return converters.client_context(metadata, self._authenticate(metadata))
        return converters.client_context(metadata)

    def _authenticate(self, metadata) -> str:
        """The access key of the call's valid signature; RequestRejected UNAUTHORIZED otherwise."""
        authorization, date_time = converters.signature_metadata(metadata)
        now_ms = self._clock.now_ms()
        access_key, rejection = authentication.verify_caller(self._accounts, authorization, date_time, now_ms,
                                                             utc_offset_ms(now_ms),
                                                             self._config.authentication_max_clock_skew_ms)
        if rejection is not None:
            log.debug("call refused: %s", rejection.name)
            raise RequestRejected(Code.UNAUTHORIZED, f"not authenticated: {rejection.value}")
        if self._accounts.disabled(access_key):
            raise RequestRejected(Code.UNAUTHORIZED, f"not authenticated: User:{access_key} is disabled")
        return access_key

    def authorize(self, method: str, request, client: converters.ClientContext, context) -> None:
        """Nothing when authorization is off or allows the call; RequestRejected FORBIDDEN otherwise."""
        if self._access is not None:
            self._access.check(method, request, client.access_key, context.peer())

    def settings_refusal(self, client: converters.ClientContext, peer: str, client_settings) -> pb.Status | None:
        """Why a Telemetry settings command is refused (its status), None when it is allowed."""
        needs = settings_needs(client_settings) if self._access is not None else None
        if needs is None or needs.missing is Missing.SETTINGS:  # malformed: the stream fails, as without authorization
            return None
        try:
            self._access.check_needs("Telemetry", needs, client.access_key, peer)
        except RequestRejected as refused:
            return responses.status(refused.code, refused.message)
        return None

    def _failure(self, method: str, error: Exception) -> pb.Status:
        if isinstance(error, StoreError):  # a full disk under a receive's or an ack's pop-log write
            error = rejection_for(error)
        if isinstance(error, RequestRejected):
            return responses.status(error.code, error.message)
        log.exception("%s failed unexpectedly", method, exc_info=error)
        return responses.status(Code.INTERNAL_ERROR, f"internal error: {type(error).__name__}")

    def _observe(self, method: str, code: int, started: float) -> None:
        metrics.labelled(metrics.RPC_LATENCY, method).observe(time.perf_counter() - started)
        if code not in _SUCCESS:
            metrics.RPC_ERRORS.labels(method, Code(code).name if code in Code._value2member_map_ else str(code)).inc()

    async def _answer(self, method, response_cls, work, request, context, on_reject=None):
        moved = self._moved(request)
        if moved is not None:
            return await moved_relay.relay_unary(*moved[:1], method, request, response_cls, context, *moved[1:])
        started = time.perf_counter()
        try:
            client = self.client_of(context)
            self.authorize(method, request, client, context)
            response = await work(request, client, context)
        except Exception as error:  # noqa: BLE001 - mapped to a status below, never re-raised
            response = response_cls(status=self._failure(method, error))
            if on_reject is not None:
                on_reject(request, response)
        self._observe(method, response.status.code, started)
        return response

    # ---------------------------------------------------------------- lookups

    def _master(self, topic: str) -> BrokerApi:
        broker = self._directory.local_master_for_topic(topic)
        if broker is None:
            explain = getattr(self._directory, "no_master_reason", None)
            reason, detail = explain(topic) if explain is not None else (NoMaster.NOT_SERVED,
                                                                        f"no broker of topic {topic} is served here")
            raise RequestRejected(Code.FORBIDDEN if reason is NoMaster.ACTING_SLAVE else Code.TOPIC_NOT_FOUND, detail)
        return broker

    def _broker_named(self, name: str) -> BrokerApi:
        broker = self._directory.local_broker(name)
        if broker is None:
            raise RequestRejected(Code.INVALID_RECEIPT_HANDLE, f"broker {name[:100]} is not served here")
        return broker

    def group_settings(self, group: str, topics) -> GroupSettings:
        """The group's settings (FIFO or not, attempts) from a local master of one of its topics;
        when none of them has a master here (a slave acting for its absent master, a replica's own
        endpoint, a container left with slaves only), from any local broker that knows the group:
        groups are made on every master and copied to the slaves.  A consumer configures itself
        from the first settings it is given, so defaults here made a FIFO consumer consume
        concurrently, out of order (test_acting_master's strict-FIFO test, one run in seven)."""
        found = None
        for topic in sorted(topics):
            broker = self._directory.local_master_for_topic(topic)
            if broker is not None:
                found = broker.group_settings(group)
                if found.known:
                    return found
        local = getattr(self._directory, "local_brokers", None)
        for broker in local() if local is not None else ():
            settings = broker.group_settings(group)
            if settings.known:
                return settings
        return found or GroupSettings()

    def _over_transport(self, routes: list[QueueRoute], context) -> list[QueueRoute]:
        """Over TLS, every queue's endpoint becomes the TLS endpoint of the container hosting its
        broker; one without a TLS port keeps its plaintext endpoint (warned about once)."""
        if not _over_tls(context):
            return routes
        secured = []
        for route in routes:
            if route.tls_endpoint is None:
                self._warn_without_tls(route)
                secured.append(route)
            else:
                secured.append(dataclasses.replace(route, endpoint=route.tls_endpoint, broker_endpoints=()))
        return secured

    def _warn_without_tls(self, route: QueueRoute) -> None:
        key = (route.broker_name, route.endpoint)
        if key in self._warned_without_tls or len(self._warned_without_tls) >= _WARNINGS_WITHOUT_TLS_MAX:
            return
        self._warned_without_tls.add(key)
        host, port = route.endpoint
        log.warning("a TLS client asked for the route of %s, but broker %s is hosted by a container without a TLS "
                    "port (grpcTlsPort); its queues keep the plaintext endpoint %s:%d, which TLS clients cannot use",
                    route.topic, route.broker_name, host, port)

    def _maybe_expire_clients(self) -> None:
        now = self._clock.monotonic_ms()
        if now >= self._next_expiry_ms:
            self._next_expiry_ms = now + 10_000
            self._registry.expire_idle()

    # ---------------------------------------------------------------- route, heartbeat

    async def QueryRoute(self, request, context):
        return await self._answer("QueryRoute", service.QueryRouteResponse, self._query_route, request, context)

    async def _query_route(self, request, client, context):
        topic = converters.topic_name(request.topic)
        routes = self._over_transport(await self._directory.route(topic), context)
        if not routes:
            raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        fallback = request.endpoints if request.HasField("endpoints") else None
        queues = [responses.message_queue(r, request.topic.resource_namespace, fallback) for r in routes]
        return service.QueryRouteResponse(status=responses.OK, message_queues=queues)

    async def Heartbeat(self, request, context):
        return await self._answer("Heartbeat", service.HeartbeatResponse, self._heartbeat, request, context)

    async def _heartbeat(self, request, client, context):
        group = converters.group_name(request.group) if request.group.name else ""
        self._registry.heartbeat(client.client_id, _CLIENT_TYPES.get(request.client_type, ""), group)
        self._maybe_expire_clients()
        return service.HeartbeatResponse(status=responses.OK)

    async def NotifyClientTermination(self, request, context):
        return await self._answer("NotifyClientTermination", service.NotifyClientTerminationResponse,
                                  self._terminate, request, context)

    async def _terminate(self, request, client, context):
        self._registry.terminate(client.client_id)
        return service.NotifyClientTerminationResponse(status=responses.OK)

    # ---------------------------------------------------------------- producing

    async def SendMessage(self, request, context):
        return await self._answer("SendMessage", service.SendMessageResponse, self._send, request, context,
                                  on_reject=_entry_per_message)

    async def _send(self, request, client, context):
        items = converters.send_items(request, self._config, self._clock.now_ms(), client.client_id)
        topic = items[0].topic
        broker = self._master(topic)
        if MessageType.TRANSACTION in map(_message_type, items):  # str comparisons in C
            self._registry.note_publishing(client.client_id, topic)
        outcomes = await broker.send(items)
        assert len(outcomes) == len(items), "the broker answers every message"
        metrics.labelled(metrics.MESSAGES_SENT, broker.name, topic).inc(len(items))
        return responses.send_response(outcomes)

    async def EndTransaction(self, request, context):
        return await self._answer("EndTransaction", service.EndTransactionResponse, self._end_transaction, request, context)

    async def _end_transaction(self, request, client, context):
        end = converters.end_transaction(request, self._config)
        if end.commit is not None:
            holder = getattr(self._directory, "broker_for_transaction", None)
            broker = holder(end.topic, end.message_id, end.transaction_id) if holder is not None else None
            broker = broker or self._master(end.topic)
            await broker.end_transaction(end.topic, end.message_id, end.transaction_id, end.commit, end.from_check)
        return service.EndTransactionResponse(status=responses.OK)

    async def RecallMessage(self, request, context):
        return await self._answer("RecallMessage", service.RecallMessageResponse, self._recall, request, context)

    async def _recall(self, request, client, context):
        topic, handle = converters.recall(request, self._config)
        message_id = await self._master(topic).recall(topic, handle)
        return service.RecallMessageResponse(status=responses.OK, message_id=message_id)

    # ---------------------------------------------------------------- consuming

    async def QueryAssignment(self, request, context):
        return await self._answer("QueryAssignment", service.QueryAssignmentResponse, self._query_assignment, request, context)

    async def _query_assignment(self, request, client, context):
        topic, group = converters.topic_and_group(request)
        routes = self._over_transport(await self._directory.route(topic), context)
        if not routes:
            raise RequestRejected(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        fifo = self.group_settings(group, [topic]).fifo
        fallback = request.endpoints if request.HasField("endpoints") else None
        assignments = responses.assignments(routes, fifo, request.topic.resource_namespace, fallback)
        if not assignments:
            raise RequestRejected(Code.FORBIDDEN, "no readable queue")
        return service.QueryAssignmentResponse(status=responses.OK, assignments=assignments)

    def _moved(self, request):
        """(channel, endpoint) of the container a moved broker of this call went to, or None."""
        target = self._directory.moved_target(moved_relay.topic_of(request), moved_relay.broker_of(request)) \
            if getattr(self._directory, "moved_away", False) else None
        return None if target is None else (self._directory.relay_channel(target), target,
                                             self._directory.relay_gate(target))

    async def ReceiveMessage(self, request, context):
        moved = self._moved(request)
        if moved is not None:
            async for response in moved_relay.relay_stream(moved[0], "ReceiveMessage", request,
                                                           service.ReceiveMessageResponse, context, *moved[1:]):
                yield response
            return
        started = time.perf_counter()
        code = int(Code.OK)
        try:
            client = self.client_of(context)
            self.authorize("ReceiveMessage", request, client, context)
            broker, receive = self._prepare_receive(request, client, context)
            deliveries = await broker.receive(receive)
        except Exception as error:  # noqa: BLE001 - becomes the stream's status
            status = self._failure("ReceiveMessage", error)
            self._observe("ReceiveMessage", status.code, started)
            yield service.ReceiveMessageResponse(status=status)
            return
        if not deliveries:
            self._observe("ReceiveMessage", int(Code.MESSAGE_NOT_FOUND), started)
            yield service.ReceiveMessageResponse(status=responses.status(Code.MESSAGE_NOT_FOUND, "no new message"))
            return
        self._observe("ReceiveMessage", code, started)
        metrics.labelled(metrics.MESSAGES_RECEIVED, broker.name, receive.topic).inc(len(deliveries))
        yield service.ReceiveMessageResponse(status=responses.OK)
        namespace = request.message_queue.topic.resource_namespace
        for delivery in deliveries:
            yield responses.delivered_response(delivery, broker.name, receive.topic, namespace)
        stamp = service.ReceiveMessageResponse()
        stamp.delivery_timestamp.FromMilliseconds(self._clock.now_ms())
        yield stamp

    def _prepare_receive(self, request, client, context):
        remaining = context.time_remaining()
        remaining_ms = None if remaining is None else int(remaining * 1000)
        receive = converters.receive_request(request, self._config, client.client_id, self._clock.monotonic_ms(),
                                             remaining_ms, self._registry.max_attempts(client.client_id),
                                             self._registry.client_type(client.client_id))
        name = converters.broker_name_of_queue(request)
        broker = self._directory.local_broker(name) if name else None
        return broker or self._master(receive.topic), receive

    async def AckMessage(self, request, context):
        return await self._answer("AckMessage", service.AckMessageResponse, self._ack, request, context)

    async def _ack(self, request, client, context):
        group, topic, entries = converters.ack_entries(request, self._config)
        statuses: list[pb.Status | None] = [None] * len(entries)
        by_broker: dict[str, list[int]] = {}
        for index, entry in enumerate(entries):
            by_broker.setdefault(entry.broker_name, []).append(index)
        for name, indexes in by_broker.items():  # one durable write per broker, not per entry
            try:
                broker = self._broker_named(name)
                rejections = await broker.ack_many(group, topic, [entries[i].receipt_handle for i in indexes])
                assert len(rejections) == len(indexes), "the broker answers every handle"
                for index, rejection in zip(indexes, rejections):
                    statuses[index] = responses.OK if rejection is None else self._failure("AckMessage", rejection)
                metrics.labelled(metrics.MESSAGES_ACKED, broker.name, topic).inc(rejections.count(None))
            except Exception as error:  # noqa: BLE001 - a broker's failure is the status of its entries
                for index in indexes:
                    statuses[index] = self._failure("AckMessage", error)
        return responses.ack_response(request.entries, statuses)

    async def ChangeInvisibleDuration(self, request, context):
        return await self._answer("ChangeInvisibleDuration", service.ChangeInvisibleDurationResponse,
                                  self._change_invisible, request, context, on_reject=_echo_handle)

    async def _change_invisible(self, request, client, context):
        change = converters.change_invisible(request, self._config)
        broker = self._broker_named(change.broker_name)
        handle = await broker.change_invisible_duration(change.group, change.topic, change.message_id,
                                                        change.receipt_handle, change.invisible_ms)
        return service.ChangeInvisibleDurationResponse(status=responses.OK,
                                                       receipt_handle=converters.join_receipt_handle(broker.name, handle))

    async def ForwardMessageToDeadLetterQueue(self, request, context):
        return await self._answer("ForwardMessageToDeadLetterQueue", service.ForwardMessageToDeadLetterQueueResponse,
                                  self._forward_to_dlq, request, context)

    async def _forward_to_dlq(self, request, client, context):
        entry = converters.forward_to_dlq(request, self._config)
        broker = self._broker_named(entry.broker_name)
        await broker.forward_to_dead_letter_queue(request.group.name, request.topic.name, entry.message_id, entry.receipt_handle)
        return service.ForwardMessageToDeadLetterQueueResponse(status=responses.OK)

    # ---------------------------------------------------------------- Telemetry and the unused RPCs

    async def Telemetry(self, request_iterator, context):
        async for command in serve_telemetry(self, self._registry, self._config, request_iterator, context):
            yield command

    async def PullMessage(self, request, context):
        yield service.PullMessageResponse(status=_not_implemented("PullMessage"))

    async def UpdateOffset(self, request, context):
        return service.UpdateOffsetResponse(status=_not_implemented("UpdateOffset"))

    async def GetOffset(self, request, context):
        return service.GetOffsetResponse(status=_not_implemented("GetOffset"))

    async def QueryOffset(self, request, context):
        return await self._answer("QueryOffset", service.QueryOffsetResponse, self._query_offset, request, context)

    async def _query_offset(self, request, client, context):
        """A queue's min or max offset, or its offset at a time: a master's read, which a slave
        acting for its absent master answers too (RIP-32)."""
        name, topic, queue_id, policy, timestamp = converters.query_offset(request)
        offset = await self._broker_named(name).query_offset(topic, queue_id, policy, timestamp)
        return service.QueryOffsetResponse(status=responses.OK, offset=offset)

    async def SyncLiteSubscription(self, request, context):
        return service.SyncLiteSubscriptionResponse(status=_not_implemented("SyncLiteSubscription"))


def _over_tls(context) -> bool:
    auth_context = getattr(context, "auth_context", None)
    return auth_context is not None and b"ssl" in auth_context().get("transport_security_type", ())


def _not_implemented(method: str) -> pb.Status:
    return responses.status(Code.NOT_IMPLEMENTED, f"{method} is not implemented; use ReceiveMessage")


def _entry_per_message(request, response) -> None:
    """The Python client asserts one entry per message, even when the request is refused."""
    for message in request.messages:
        response.entries.add(status=response.status, message_id=message.system_properties.message_id)


def _echo_handle(request, response) -> None:
    """The client copies receipt_handle before it checks the status; keep its handle usable."""
    response.receipt_handle = request.receipt_handle
