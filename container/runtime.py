"""The BrokerContainer: one process, several brokers, one client endpoint.

Composition only.  Start order: check every port; start the embedded nameserver (if any);
open every broker (store recovery, then the broker); mount the client protocol, the health
service and the admin service; start serving (the client server listens on
``grpcServerPort`` in plaintext and, with ``grpcTlsPort``, on a second port over TLS:
grpcio takes one credential type per port); register with the nameserver; start the
periodic registration and heartbeat.  Stop order is the reverse: stop accepting (grace
period for in-flight calls), unregister, stop brokers (persist), flush and close stores,
stop the nameserver.  Nothing in here decides anything about messages.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Mapping

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import start_http_server

from pathlib import Path

from container.config import ContainerConfig
from container.config_loader import load_config_file
from container.directory import ContainerDirectory
from container.acting_adapter import ContainerActing
from container.backlog_adapter import ContainerBacklog
from container.hosted_broker import (BrokerSpec, HostedBroker, check_unique, close_broker, open_broker,
                                     start_acting_mode, start_controller_mode, start_replication)
from container.ports import check_port_not_listened, check_ports_distinct, check_ports_free
from container.registration import Registration
from container.security import TlsMaterial
from metadata.authentication import AccountSource
from metadata.config import ConfigError
from scheduler.clock import Clock, SystemClock
from scheduler.loop_lag import LoopLag
from scheduler.pop.backlog_board import BoardSettings
from scheduler.periodic import PeriodicTasks
from proto import acting_pb2_grpc, backlog_pb2_grpc, reassign_pb2_grpc
from services.acting.client import ActingClient
from services.admin.client import Credentials
from services.acting.escape import EscapeBridge
from services.acting.service import ActingServicer
from services.access.acl_admin import add_acl_admin_service
from services.access.acl_replica import ReplicatedAclStore
from services.access.acl_store import AclStore
from services.access.admin_gate import AdminGate
from services.broker.consumer_lag import REFRESH_SLICE, lags_by_group_topic
from services.metrics import CONSUMER_LAG, EVENT_LOOP_LAG, REGISTRY, STORE_SIZE
from services.status_metrics import STATUS, hosted_broker_source
from services.ha.converters import MAX_FRAME_BYTES
from services.ha.service import HaListener, add_ha_service
from services.messaging.config import MessagingConfig
from services.messaging.backlog_probe import BacklogProbe, BacklogServicer
from services.messaging.access import ClientAccess
from services.messaging.broker_port import Relays
from services.messaging.server import add_broker_port, add_messaging_services, broker_port_options, server_options
from services.health import HealthService
from services.cluster_auth import exempt_health, exempt_health_and_admin, server_interceptors
from services.request_guard import GuardedServer, RequestGuard
from services.nameserver.client import NameserverUnavailable
from container.moves import ContainerMoves
from services.reassign.service import ReassignServicer
from store.errors import StoreIOError

log = logging.getLogger(__name__)
LOOP_LAG_LOOK_MS = 100  # relaymq_event_loop_lag_seconds: how often the loop is asked for a look


class BrokerContainer:
    def __init__(self, config: ContainerConfig, specs: list[BrokerSpec], messaging: MessagingConfig,
                 where: str, nameserver_values: Mapping[str, object] | None = None, clock: Clock | None = None,
                 tls: TlsMaterial | None = None, accounts: AccountSource | None = None,
                 acl_store: AclStore | ReplicatedAclStore | None = None, inner_credentials: Credentials | None = None):
        """``tls`` must be given when ``grpcTlsPort`` is set, ``acl_store`` when
        ``authorizationEnabled`` (``container.security`` reads both); the store's users are
        the accounts when it is given; ``inner_credentials`` sign this container's own admin calls
        to other containers (``innerClientAuthenticationCredentials``)."""
        assert tls is not None or not config.grpc_tls_port, "grpcTlsPort needs its certificate and key"
        assert acl_store is not None or not messaging.authorization_enabled, "authorization needs its ACL store"
        check_unique(specs)
        self.config = config
        self.specs = list(specs)
        self.messaging = messaging
        self.where = where
        self.tls = tls
        self.acl_store = acl_store
        self.accounts = acl_store if acl_store is not None else accounts
        self.access = ClientAccess(acl_store) if messaging.authorization_enabled else None
        self.inner_credentials = inner_credentials
        self.clock = clock or SystemClock()
        self.hosted: dict[str, HostedBroker] = {}
        self.moves = ContainerMoves(self)  # broker moves: release, open, resume, the report to the controller
        self.directory = ContainerDirectory(self)
        self.tasks = PeriodicTasks("container")
        self.loop_lag = LoopLag(LOOP_LAG_LOOK_MS, lambda: time.monotonic() * 1000, EVENT_LOOP_LAG.observe)
        self._nameserver_values = dict(nameserver_values or {})
        self._nameserver = None
        self._client_server: grpc.aio.Server | None = None
        self._broker_servers: dict[str, grpc.aio.Server] = {}  # broker name -> its own endpoint
        self.relays = Relays(server_options(messaging))
        self.acting_client = ActingClient()  # escapes, hand-overs and lock grants to other containers
        self._internal_server: grpc.aio.Server | None = None
        self._broker_ports: dict[str, object] = {}   # broker name -> its endpoint's handler (relay links)
        self._ha_listener = HaListener(self.replication_master, self._relayed_call)
        self._health = HealthService()
        self.guard = RequestGuard(config.bad_request_log_interval_ms)  # bad requests of every server of ours
        self.registration: Registration | None = None
        self.ports: dict[str, int] = {}
        self._metrics_source: int | None = None
        self.backlog = BacklogProbe(BoardSettings(messaging.backlog_probe_interval_ms or 1, messaging.backlog_fresh_ms),
                                    self.clock, self._route_of, ContainerBacklog(self))

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def identity(self) -> str:
        """This container as a shared store's ownership claims name it: its client endpoint as
        configured (``cluster-list`` shows it; ``reassign-broker --to`` names it)."""
        return f"{self.config.broker_container_ip}:{self.config.grpc_server_port}"

    def _ports(self) -> list[tuple[str, str, int]]:
        c = self.config
        ports = [("grpcServerPort", c.client_bind_host, c.grpc_server_port), ("listenPort", c.admin_bind_address, c.listen_port),
                 ("haListenPort", c.admin_bind_address, c.ha_listen_port)]
        if c.grpc_tls_port:
            ports.append(("grpcTlsPort", c.client_bind_host, c.grpc_tls_port))
        if c.metrics_port:
            ports.append(("metricsPromExporterPort", c.metrics_host, c.metrics_port))
        if c.start_embedded_namesrv:
            ports.append(("namesrvListenPort", c.admin_bind_address, c.namesrv_listen_port))
        for spec in self.specs:
            if spec.broker.listen_port:
                ports.append((f"listenPort of {spec.broker.broker_name}", c.client_bind_host, spec.broker.listen_port))
        return ports

    async def start(self) -> None:
        check_ports_distinct(self.where, self._ports())
        check_ports_free(self.where, self._ports())
        if self.config.start_embedded_namesrv:
            await self._start_nameserver()
        self.specs += self.moves.moved_in_specs({spec.broker.broker_name for spec in self.specs})
        for spec in self.specs:
            try:
                await self._open(spec)
            except StoreIOError as refused:
                if not (spec.store.shared_storage and "owned by" in str(refused)):
                    raise
                log.warning("%s: not served here: %s", spec.canonical_name, refused)  # the claims decide (docs/reassign.md)
        if isinstance(self.acl_store, ReplicatedAclStore):  # under a controller: its version before serving
            self.acl_store.container = f"{self.config.admin_bind_address}:{self.config.listen_port}"
            self.acl_store.brokers = lambda: tuple(sorted({h.name for h in self.hosted.values()}))
            await self.acl_store.start_sync(self.messaging.authorization_metadata_sync_timeout_ms / 1000)
        await self._start_servers()
        for hosted in self.hosted.values():
            self._start_controller_mode(hosted)
        self._metrics_source = STATUS.add(hosted_broker_source(
            lambda: [(h.broker, h.replica, h.store) for h in self.hosted.values()]), asyncio.get_running_loop())
        if self.config.metrics_port:
            start_http_server(self.config.metrics_port, addr=self.config.metrics_host, registry=REGISTRY)
            self.ports["metrics"] = self.config.metrics_port
        self.registration = Registration(self)
        await self.registration.register_all()
        for hosted in self.hosted.values():
            self._go_online(hosted)
        self.tasks.declare("register-brokers", self.config.register_period_ms, self.registration.register_all, self.config.register_period_ms)
        self.tasks.declare("heartbeat", self.config.heartbeat_interval_ms, self.registration.heartbeat_all, self.config.heartbeat_interval_ms)
        self.tasks.declare("store-metrics", 5_000, self._refresh_store_metrics, 1_000)
        self.tasks.declare("loop-lag", LOOP_LAG_LOOK_MS, self.loop_lag.look, LOOP_LAG_LOOK_MS)
        self.tasks.declare("ownership", self.config.heartbeat_interval_ms, self._drop_taken_over,
                           self.config.heartbeat_interval_ms)
        self.tasks.declare("controller-report", self.config.heartbeat_interval_ms, self.moves.report)
        interval = self.messaging.authorization_metadata_watch_interval_ms
        if isinstance(self.acl_store, ReplicatedAclStore):
            self.tasks.declare("acl-controller-sync", interval, self.acl_store.sync, interval)
        elif self.acl_store is not None:
            self.tasks.declare("acl-file-watch", interval, self.acl_store.watch, interval)
        self.tasks.start()
        self.backlog.start()
        log.info("container started: client endpoint %s:%d%s, admin %s:%d, brokers %s", self.config.broker_container_ip,
                 self.ports["client"], f" (TLS {self.ports['tls']})" if "tls" in self.ports else "",
                 self.config.admin_bind_address, self.ports["admin"], ", ".join(self.hosted))

    async def _start_nameserver(self) -> None:
        from services.nameserver.config import NamesrvConfig
        from services.nameserver.server import start_nameserver
        from metadata.config import bind

        values = {**self._nameserver_values, "listenPort": self.config.namesrv_listen_port,
                  "enableControllerInNamesrv": self.config.enable_controller_in_namesrv}
        config = bind(NamesrvConfig, values, self.where)
        controller = self._embedded_controller_config(config) if self.config.enable_controller_in_namesrv else None
        self._nameserver = await start_nameserver(config, guard=self.guard, controller_config=controller)

    def _embedded_controller_config(self, namesrv):
        """The controller inside the embedded nameserver: its keys at the container file's top
        level; by default a one-member group on the nameserver's own port, its Raft log under
        ``{storePathRootDir}/controller``."""
        from services.controller.config import controller_config

        values = dict(self._nameserver_values)
        values.setdefault("controllerDLegerPeers", f"n0-{namesrv.bind_address}:{namesrv.listen_port}")
        values.setdefault("controllerDLegerSelfId", "n0")
        values.setdefault("controllerStorePath", str(self.config.store_path_root_dir / "controller"))
        return controller_config(values, self.where)

    async def _start_servers(self) -> None:
        self._client_server = grpc.aio.server(options=server_options(self.messaging))
        self.directory.attach_registry(add_messaging_services(self._client_server, self.directory, self.messaging, self.clock,
                                                              accounts=self.accounts, guard=self.guard,
                                                              access=self.access))
        for hosted in self.hosted.values():
            await self._start_broker_port(hosted)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, GuardedServer(self._client_server, self.guard))
        self.ports["client"] = self._bind(self._client_server, "grpcServerPort", self.config.client_bind_host, self.config.grpc_server_port)
        if self.tls is not None:
            credentials = grpc.ssl_server_credentials([(self.tls.private_key, self.tls.certificate_chain)])
            self.ports["tls"] = self._bind(self._client_server, "grpcTlsPort", self.config.client_bind_host,
                                           self.config.grpc_tls_port, credentials)
        self._internal_server = grpc.aio.server(options=[
            ("grpc.max_send_message_length", MAX_FRAME_BYTES),
            ("grpc.max_receive_message_length", self.config.admin_max_inbound_message_size)],
            interceptors=server_interceptors(exempt_health_and_admin if self.access is not None else exempt_health))
        from services.admin.service import add_admin_service
        from container.admin_adapter import ContainerAdmin

        internal = GuardedServer(self._internal_server, self.guard)
        admin = internal
        if self.access is not None:  # every admin call signed and allowed (services.access.admin_gate)
            admin = AdminGate(internal, self.acl_store, self.clock.now_ms, self.messaging.authentication_max_clock_skew_ms,
                              self._cluster_of)
        add_admin_service(admin, ContainerAdmin(self), on_topics_changed=self._topics_changed,
                          load_config=lambda path: load_config_file(Path(path)))
        add_acl_admin_service(admin, self.acl_store if self.access is not None else None)
        add_ha_service(internal, self.replication_master, lambda: self._ha_listener.port, self.client_endpoint_for)
        acting_pb2_grpc.add_ActingServiceServicer_to_server(ActingServicer(ContainerActing(self)), internal)
        backlog_pb2_grpc.add_BacklogServiceServicer_to_server(BacklogServicer(ContainerBacklog(self)), internal)
        reassign_pb2_grpc.add_ReassignServiceServicer_to_server(ReassignServicer(self.moves), internal)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, internal)
        self.ports["admin"] = self._bind(self._internal_server, "listenPort", self.config.admin_bind_address, self.config.listen_port)
        try:
            self.ports["ha"] = self._ha_listener.bind(self.config.admin_bind_address, self.config.ha_listen_port)
        except OSError as exc:
            raise ConfigError(self.where, "haListenPort", f"cannot listen on {self.config.admin_bind_address}:"
                                                          f"{self.config.ha_listen_port} ({exc})") from None
        await self._client_server.start()
        await self._internal_server.start()
        self._ha_listener.start()
        await self._set_health(health_pb2.HealthCheckResponse.SERVING)

    async def _start_broker_port(self, hosted: HostedBroker) -> None:
        """The broker's own endpoint (listenPort): served here while master, else relayed or held."""
        port = hosted.spec.broker.listen_port
        if not port or hosted.name in self._broker_servers:
            return
        server = grpc.aio.server(options=broker_port_options(self.messaging))
        self._broker_ports[hosted.name] = add_broker_port(
            server, hosted.replica, self.directory.pinned(hosted.name), self.messaging, self.clock,
            self.directory.registry, self.relays, accounts=self.accounts, guard=self.guard,
            acting=lambda: hosted.broker.is_acting, access=self.access)
        self.ports[f"broker:{hosted.name}"] = self._bind(server, f"listenPort of {hosted.name}",
                                                          self.config.client_bind_host, port)
        await server.start()
        self._broker_servers[hosted.name] = server

    async def _stop_broker_port(self, name: str, grace_s: float) -> None:
        server = self._broker_servers.pop(name, None)
        self._broker_ports.pop(name, None)
        self.ports.pop(f"broker:{name}", None)
        if server is not None:
            await server.stop(grace_s)

    def _cluster_of(self, request) -> str:
        """The cluster an admin request is about: the one it names, its broker's, else the first
        hosted broker's (authorization's ``Cluster:<name>`` resource)."""
        named = getattr(request, "cluster", "")
        if isinstance(named, str) and named:
            return named
        broker = getattr(request, "broker_name", "")
        specs = [h.spec for h in self.hosted.values() if h.name == broker] or self.specs
        return specs[0].broker.broker_cluster_name if specs else ""

    def client_endpoint_for(self, broker_name: str) -> str:
        """Where this container serves ``broker_name``'s clients: its listenPort, else the container's."""
        port = self.ports.get(f"broker:{broker_name}") or self.ports.get("client", 0)
        return f"{self.config.broker_container_ip}:{port}" if port else ""

    def _bind(self, server: grpc.aio.Server, key: str, host: str, port: int, credentials=None) -> int:
        try:
            if credentials is None:
                bound = server.add_insecure_port(f"{host}:{port}")
            else:
                bound = server.add_secure_port(f"{host}:{port}", credentials)
        except RuntimeError as exc:
            raise ConfigError(self.where, key, f"cannot listen on {host}:{port} ({exc})") from None
        if bound == 0:
            raise ConfigError(self.where, key, f"cannot listen on {host}:{port}")
        return bound

    async def _set_health(self, status) -> None:
        result = self._health.set("", status)
        if asyncio.iscoroutine(result):
            await result

    async def stop(self) -> None:
        STATUS.remove(self._metrics_source)
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.tasks.stop()
        await self.backlog.stop()
        grace = self.config.shutdown_timeout_ms / 1000 / 2
        for name in list(self._broker_servers):
            await self._stop_broker_port(name, grace)
        if self._client_server is not None:
            await self._client_server.stop(grace)
        await self.relays.close()
        if self.registration is not None:
            await self.registration.unregister_all()
        for key in list(self.hosted):
            await close_broker(self.hosted.pop(key))
        await self.acting_client.close()
        await self.moves.close()
        await self._ha_listener.stop()
        if self._internal_server is not None:
            await self._internal_server.stop(0.5)
        if isinstance(self.acl_store, ReplicatedAclStore):
            await self.acl_store.close()
        if self._nameserver is not None:
            await self._nameserver.stop()

    # -- runtime changes (admin) -----------------------------------------------------------

    async def _open(self, spec: BrokerSpec) -> HostedBroker:
        hosted = await open_broker(spec, self.clock, self.directory.sink, self.acting_client, owner=self.identity)
        self.hosted[spec.broker.broker_name + f"#{spec.broker.broker_id}"] = hosted
        if self.messaging.backlog_probe_interval_ms:
            hosted.broker.pop.backlog_hint = self.backlog
        if hosted.acting.enabled:
            hosted.acting.bridge = EscapeBridge(hosted.name, spec.broker, self.clock, lambda: self._local_masters(hosted.name),
                                                self._route_of, self.acting_client)
        await start_replication(hosted, self.clock, lambda: self._master_address(hosted),
                                on_topics_changed=lambda: self._topics_changed(hosted.name),
                                credentials=self.inner_credentials)
        if "admin" in self.ports:  # added at runtime: the servers are up
            await self._start_broker_port(hosted)
            self._start_controller_mode(hosted)
        return hosted

    def _go_online(self, hosted: HostedBroker) -> None:
        """A registered broker starts its acting mode; a master in pre-online first takes its
        group's tables back (services.ha.pre_online), then registers and starts it."""
        driver = hosted.pre_online
        if driver is None:
            self._start_acting_mode(hosted)
            return

        async def online(reason) -> None:
            await self.registration.register(hosted)
            self._start_acting_mode(hosted)
            await hosted.broker.apply_role()

        driver.start(self.registration.client, self.acting_client, self.registration.admin_address, online)

    def _start_acting_mode(self, hosted: HostedBroker) -> None:
        start_acting_mode(hosted, lambda: self.registration.client if self.registration else None, self.acting_client,
                          self.clock)

    def _local_masters(self, but: str) -> list:
        """The brokers of other groups this container serves as master (local escape targets)."""
        return [h.broker for h in self.hosted.values() if h.is_master and h.name != but]

    async def _route_of(self, topic: str):
        """The backlog probe's route: the nameserver's (its last while none answers), else this
        container's replicas' own view of the topic."""
        if self.registration is not None:
            try:
                return await self.registration.topic_route(topic)
            except NameserverUnavailable:
                pass
        return self.directory.local_topic_route(topic, f"{self.config.admin_bind_address}:{self.ports['admin']}")

    def _start_controller_mode(self, hosted: HostedBroker) -> None:
        if not hosted.controller_mode or hosted.manager is not None:
            return
        address = f"{self.config.admin_bind_address}:{self.ports['admin']}"
        start_controller_mode(hosted, address, self.config.heartbeat_interval_ms, self.clock,
                              on_role_changed=lambda: self._role_changed(hosted),
                              on_topics_changed=lambda: self._topics_changed(hosted.name),
                              credentials=self.inner_credentials)

    async def _role_changed(self, hosted: HostedBroker) -> None:
        if self.registration is not None:
            await self.registration.register(hosted)

    async def _master_address(self, hosted: HostedBroker) -> str | None:
        """A slave's master: ``haMasterAddress``, else what the nameserver answers its
        registration, else a master that offered itself (pre-online: not registered yet)."""
        if hosted.spec.ha.ha_master_address:
            return hosted.spec.ha.ha_master_address
        if self.registration is None:
            return hosted.offered_master or None
        return await self.registration.register(hosted) or hosted.offered_master or None

    def _relayed_call(self, broker_name: str, method: str, streamed: bool):
        """What serves a call relayed over a relay link: the group's endpoint here."""
        handler = self._broker_ports.get(broker_name)
        return None if handler is None else handler.relayed(method, streamed)

    def replication_master(self, broker_name: str):
        for hosted in self.hosted.values():
            if hosted.name == broker_name and hosted.replica.master is not None:
                return hosted.replica.master
        return None

    async def add_broker(self, spec: BrokerSpec) -> HostedBroker:
        check_unique([h.spec for h in self.hosted.values()] + [spec])
        check_port_not_listened(spec.where, "listenPort", spec.broker.listen_port, self.ports)
        hosted = await self._open(spec)
        if self.registration is not None:
            await self.registration.register(hosted)
            self._go_online(hosted)
        return hosted

    async def remove_broker(self, cluster: str, name: str, broker_id: int) -> bool:
        key = f"{name}#{broker_id}"
        hosted = self.hosted.get(key)
        if hosted is None or hosted.spec.broker.broker_cluster_name != cluster:
            return False
        del self.hosted[key]
        if self.registration is not None:
            await self.registration.unregister(hosted)
        await self._stop_broker_port(hosted.name, 0.5)
        await close_broker(hosted)
        return True

    async def _drop_taken_over(self) -> None:
        """A broker on shared storage whose store another container took over (docs/reassign.md,
        fencing rule 5) is no longer served here: unregistered and closed, its store untouched;
        its calls are relayed to the new owner (clients refresh routes every 30 s)."""
        for hosted in list(self.hosted.values()):
            why = hosted.store.fenced() if hosted.spec.store.shared_storage else None
            if why is not None:
                owner = self.moves.relay_taken_over(hosted)
                log.warning("%s: %s; no longer served here%s", hosted.spec.canonical_name, why,
                            f"; its calls are relayed to {owner}" if owner else "")
                await self.remove_broker(hosted.spec.broker.broker_cluster_name, hosted.name, hosted.spec.broker.broker_id)

    async def _topics_changed(self, broker_name: str) -> None:
        if self.registration is not None:
            await self.registration.register_by_name(broker_name)

    async def _refresh_store_metrics(self) -> None:
        for key, hosted in list(self.hosted.items()):
            STORE_SIZE.labels(broker=hosted.name).set(hosted.store.disk_usage_bytes())
            lags = lags_by_group_topic(hosted.broker, hosted.broker.group_table().groups)
            for count, (group, topic, value) in enumerate(lags, 1):
                CONSUMER_LAG.labels(broker=hosted.name, group=group, topic=topic).set(value)
                if count % REFRESH_SLICE == 0:
                    await asyncio.sleep(0)
                    if self.hosted.get(key) is not hosted:  # closed or moved away meanwhile
                        break
