"""The nameserver's route table: a pure decide-then-apply core (reference sections 2.2, 2.3).

Rules:
- Commands (:meth:`RouteTable.register`, :meth:`unregister`, :meth:`heartbeat`,
  :meth:`scan_not_active`) only decide: they return ``Decision(events, reply)`` and change
  nothing.  State changes only in :meth:`RouteTable.apply`.  Time is the ``now_ms`` argument.
- Two live brokers claiming one id of a group (the "two masters" case, upstream #6316): the
  registration with the larger ``stateVersion`` (the controller's master epoch) wins; a
  smaller one is rejected with ``STALE_STATE_VERSION``.  Ties and larger versions replace.
- A broker name belongs to one cluster; a claim from another cluster is rejected.
- A registration carries the container's plaintext and TLS client endpoints (TLS ``""``
  when off); every registration replaces both, and route members copy both.
- Addresses are never identities: a container's brokers share one internal address, so a
  broker that changes its id (a role switch) unregisters the old id itself.
- An unregister names what it removes: the id, the address it registered from and the
  ``stateVersion`` it registered with.  It removes the id's registration only when that is
  still its own: held from another address it is ``HELD_BY_ANOTHER_ADDRESS`` (a master woken
  from a stop after the controller elected its successor must not delete the successor's
  route), with a larger ``stateVersion`` it is ``STALE_STATE_VERSION`` (an unregister that
  arrives after a newer registration of the same container).  Either way nothing changes.
- Queue data of a topic in a group comes from the master (id 0) when present, otherwise from
  the member with the smallest id (the "prime slave"); in a group with acting master enabled
  that member's queue data loses ``PERM_WRITE``.
- ``enableActingMaster`` is per broker name and the last registrant wins.
- Routes pass through one seam, ``route_rewrite`` (default: the acting-master rewrite of
  ``metadata/route_acting_master.py`` when ``support_acting_master`` is set).
- At most ``max_brokers`` registrations (``TOO_MANY_BROKERS``).
- A broker is expired when ``last_heartbeat_ms + heartbeat_timeout_ms < now_ms``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping

from metadata.data_version import DataVersion
from metadata.member_group import BrokerMemberGroup
from metadata.route_acting_master import rewrite_for_acting_master
from metadata.route_types import (
    MASTER_ID, BrokerAddress, BrokerGroupInfo, BrokerIdentity, BrokerRegistered, BrokerRemoved,
    BrokerRoute, ClusterInfo, Decision, HeartbeatRecorded, HeartbeatReply, QueueData, RegisterReply,
    Registration, Rejected, RemovalReason, RouteEvent, RouteRejection, TopicRoute,
)
from metadata.topic_config import PERM_WRITE, TopicConfig, TopicTable

RouteRewrite = Callable[[str, BrokerRoute], BrokerRoute]


@dataclass(frozen=True)
class RouteTableOptions:
    default_heartbeat_timeout_ms: int = 120_000  # when a registration carries none
    support_acting_master: bool = False
    max_brokers: int = 10_000

    def __post_init__(self) -> None:
        assert self.default_heartbeat_timeout_ms > 0 and self.max_brokers > 0, "validated by NamesrvConfig"


def _no_rewrite(topic: str, route: BrokerRoute) -> BrokerRoute:
    return route


class RouteTable:
    def __init__(self, options: RouteTableOptions = RouteTableOptions(), route_rewrite: RouteRewrite | None = None):
        self.options = options
        if route_rewrite is None:
            route_rewrite = rewrite_for_acting_master if options.support_acting_master else _no_rewrite
        self._rewrite = route_rewrite
        self._brokers: dict[BrokerIdentity, Registration] = {}
        self._acting: dict[tuple[str, str], bool] = {}  # (cluster, broker name) -> last registrant's flag

    # ---- commands: decide only ----

    def register(self, identity: BrokerIdentity, address: str, client_endpoint: str, topics: TopicTable,
                 now_ms: int, heartbeat_timeout_ms: int | None = None,
                 enable_acting_master: bool = False, tls_client_endpoint: str = "",
                 broker_endpoint: str = "") -> Decision:
        other_cluster = self._cluster_of(identity.broker_name)
        if other_cluster is not None and other_cluster != identity.cluster:
            return Decision((), Rejected(RouteRejection.BROKER_NAME_IN_OTHER_CLUSTER,
                                         f"broker name {identity.broker_name} is registered in cluster {other_cluster}"))
        if identity not in self._brokers and len(self._brokers) >= self.options.max_brokers:
            return Decision((), Rejected(RouteRejection.TOO_MANY_BROKERS,
                                         f"the nameserver holds {len(self._brokers)} brokers, the limit"))
        registration = Registration(
            identity=identity, address=address, client_endpoint=client_endpoint, topics=topics,
            heartbeat_timeout_ms=heartbeat_timeout_ms or self.options.default_heartbeat_timeout_ms,
            last_heartbeat_ms=now_ms, enable_acting_master=enable_acting_master,
            tls_client_endpoint=tls_client_endpoint, broker_endpoint=broker_endpoint,
        )
        events: list[RouteEvent] = []
        replaced = None
        existing = self._brokers.get(identity)
        if existing is not None and existing.address != address:
            if not existing.expired(now_ms) and existing.state_version > registration.state_version:
                return Decision((), Rejected(
                    RouteRejection.STALE_STATE_VERSION,
                    f"{identity.broker_name} id {identity.broker_id} is held by {existing.address} with stateVersion "
                    f"{existing.state_version} > {registration.state_version}"))
            replaced = identity
            events.append(BrokerRemoved(identity, RemovalReason.REPLACED))
        events.append(BrokerRegistered(registration))
        return Decision(tuple(events), RegisterReply(self._master_address_for(identity), replaced))

    def unregister(self, identity: BrokerIdentity, address: str, state_version: int) -> Decision:
        """Remove the registration ``address`` made with ``state_version``, if it is still the id's."""
        existing = self._brokers.get(identity)
        if existing is None:
            return Decision((), Rejected(RouteRejection.BROKER_NOT_REGISTERED, f"{identity.canonical_name} is not registered"))
        if existing.address != address:
            return Decision((), Rejected(
                RouteRejection.HELD_BY_ANOTHER_ADDRESS,
                f"{identity.broker_name} id {identity.broker_id} is held by {existing.address}, not {address}: kept"))
        if existing.state_version > state_version:
            return Decision((), Rejected(
                RouteRejection.STALE_STATE_VERSION,
                f"{identity.broker_name} id {identity.broker_id} was registered again with stateVersion "
                f"{existing.state_version} > {state_version}: kept"))
        return Decision((BrokerRemoved(identity, RemovalReason.UNREGISTERED),), None)

    def heartbeat(self, identity: BrokerIdentity, now_ms: int, data_version: DataVersion | None = None) -> Decision:
        """Refresh liveness; the reply asks for a full registration when the table differs."""
        existing = self._brokers.get(identity)
        if existing is None:
            return Decision((), HeartbeatReply(registration_needed=True))
        changed = data_version is not None and data_version != existing.data_version
        return Decision((HeartbeatRecorded(identity, now_ms),), HeartbeatReply(registration_needed=changed))

    def scan_not_active(self, now_ms: int) -> Decision:
        expired = sorted(identity for identity, reg in self._brokers.items() if reg.expired(now_ms))
        return Decision(tuple(BrokerRemoved(identity, RemovalReason.EXPIRED) for identity in expired), tuple(expired))

    # ---- the only mutation ----

    def apply(self, event: RouteEvent) -> None:
        if isinstance(event, BrokerRegistered):
            registration = event.registration
            self._brokers[registration.identity] = registration
            group = (registration.identity.cluster, registration.identity.broker_name)
            self._acting[group] = registration.enable_acting_master
        elif isinstance(event, HeartbeatRecorded):
            existing = self._brokers.get(event.identity)
            if existing is not None and event.now_ms > existing.last_heartbeat_ms:
                self._brokers[event.identity] = replace(existing, last_heartbeat_ms=event.now_ms)
        elif isinstance(event, BrokerRemoved):
            self._brokers.pop(event.identity, None)
            group = (event.identity.cluster, event.identity.broker_name)
            if not self._members(*group):
                self._acting.pop(group, None)
        else:
            raise AssertionError(f"unknown route event {event!r}")

    def apply_all(self, events: Iterable[RouteEvent]) -> None:
        for event in events:
            self.apply(event)

    # ---- queries ----

    def registration(self, identity: BrokerIdentity) -> Registration | None:
        return self._brokers.get(identity)

    def route(self, topic: str) -> TopicRoute | None:
        """The topic's route, or None when no broker group serves it."""
        routes = []
        for (cluster, broker_name), members in sorted(self._groups().items()):
            queue_data = self._queue_data(topic, cluster, broker_name, members)
            if queue_data is None:
                continue
            addresses = {m.identity.broker_id: BrokerAddress(m.address, m.client_endpoint, m.tls_client_endpoint,
                                                             m.broker_endpoint) for m in members}
            route = BrokerRoute(cluster, broker_name, addresses, queue_data, self._acting.get((cluster, broker_name), False))
            routes.append(self._rewrite(topic, route))
        return TopicRoute(topic, tuple(routes)) if routes else None

    def cluster_info(self) -> ClusterInfo:
        clusters: dict[str, list[str]] = {}
        groups = []
        for (cluster, broker_name), members in sorted(self._groups().items()):
            clusters.setdefault(cluster, []).append(broker_name)
            groups.append(BrokerGroupInfo(cluster, broker_name, tuple(members), self._acting.get((cluster, broker_name), False)))
        return ClusterInfo({c: tuple(names) for c, names in clusters.items()}, tuple(groups))

    def member_group(self, broker_name: str, cluster: str = "") -> BrokerMemberGroup:
        """The group's live members (``rmq_sys_SYNC_BROKER_MEMBER_<name>``); none for an unknown group.
        ``cluster`` "" means the cluster the name is registered in."""
        cluster = cluster or self._cluster_of(broker_name) or ""
        return BrokerMemberGroup(cluster, broker_name, {r.identity.broker_id: r.address
                                                        for r in self._members(cluster, broker_name)})

    def acting_enabled(self, cluster: str, broker_name: str) -> bool:
        return self._acting.get((cluster, broker_name), False)

    def master_addresses(self, cluster: str) -> Mapping[str, str]:
        """broker name -> address of its master (id 0), for the cluster's groups that have one."""
        return {i.broker_name: r.address for i, r in sorted(self._brokers.items())
                if i.cluster == cluster and i.broker_id == MASTER_ID}

    # ---- helpers ----

    def _groups(self) -> dict[tuple[str, str], list[Registration]]:
        groups: dict[tuple[str, str], list[Registration]] = {}
        for identity in sorted(self._brokers):
            groups.setdefault((identity.cluster, identity.broker_name), []).append(self._brokers[identity])
        return groups

    def _members(self, cluster: str, broker_name: str) -> list[Registration]:
        return [r for i, r in sorted(self._brokers.items()) if i.cluster == cluster and i.broker_name == broker_name]

    def _cluster_of(self, broker_name: str) -> str | None:
        for identity in self._brokers:
            if identity.broker_name == broker_name:
                return identity.cluster
        return None

    def _master_address_for(self, identity: BrokerIdentity) -> str:
        if identity.broker_id == MASTER_ID:
            return ""
        master = self._brokers.get(replace(identity, broker_id=MASTER_ID))
        return master.address if master is not None else ""

    def _queue_data(self, topic: str, cluster: str, broker_name: str, members: list[Registration]) -> QueueData | None:
        source = members[0]  # sorted by id: the master when present, else the prime slave
        config: TopicConfig | None = source.topics.topics.get(topic)
        if config is None:
            return None
        perm = config.perm
        if source.identity.broker_id != MASTER_ID and self._acting.get((cluster, broker_name), False):
            perm &= ~PERM_WRITE
        return QueueData(config.read_queue_nums, config.write_queue_nums, perm, config.message_type)
