"""Metrics read from status objects when Prometheus scrapes: brokers, replication, the
nameserver and the controller (docs/metrics.md lists them with the alerts to set).

Rules:
- Nothing here runs on a request path.  An owner (a container, a nameserver, a controller)
  registers a *source*, a function returning :class:`Sample` values, with :data:`STATUS`
  when it starts and removes it when it stops; one collector serves every source, so two
  owners in one process (tests) never register a metric name twice.
- Sources read only public status: ``ReplicationMaster.status()``, ``ReplicationSlave.status()``,
  a broker's ``role``, the store's offsets, the route table's cluster info, the Raft node's
  term and commit index.  The replication drivers stay free to change inside.
- Names follow Prometheus conventions: the ``relaymq_`` prefix, base units as suffixes
  (``_bytes``, ``_messages``), ``_total`` on counters (added by the client library), 0/1
  gauges for states, and one sample per state for an enumeration (``role``).
- The ``*_samples`` functions are pure: a status mapping in, samples out.
- Prometheus scrapes on its own HTTP thread; a source registered with its event loop runs on
  that loop (the statuses it reads are changed there), waited for at most
  ``SOURCE_TIMEOUT_S``; a source that fails or times out is left out of that scrape, logged.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

log = logging.getLogger(__name__)
ROLES = ("MASTER", "SLAVE", "FENCED")  # FENCED: controller mode, no role yet (or between roles)
SOURCE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


GAUGE, COUNTER = "gauge", "counter"
FAMILIES: dict[str, tuple[str, str]] = {
    "relaymq_broker_up": (GAUGE, "1 for every broker this process hosts and serves"),
    "relaymq_broker_role": (GAUGE, "1 for the broker's current role (MASTER, SLAVE or FENCED), 0 for the others"),
    "relaymq_replication_max_offset_bytes": (GAUGE, "Commit-log max offset of this replica (next byte to be written)"),
    "relaymq_replication_confirm_offset_bytes": (GAUGE, "Confirm offset: consumers read up to here"),
    "relaymq_replication_epoch": (GAUGE, "Latest epoch in this replica's epoch history"),
    "relaymq_replication_sync_state_set_size": (GAUGE, "Replicas in the master's SyncStateSet, the master included"),
    "relaymq_replication_sync_state_set_epoch": (GAUGE, "Epoch of the master's SyncStateSet (bumped at every change)"),
    "relaymq_replication_slave_connected": (GAUGE, "Master side: 1 while the slave's replication stream is open"),
    "relaymq_replication_slave_in_sync": (GAUGE, "Master side: 1 while the slave is in the SyncStateSet"),
    "relaymq_replication_slave_acked_offset_bytes": (GAUGE, "Master side: commit-log offset the slave acknowledged"),
    "relaymq_replication_slave_lag_bytes": (GAUGE, "Master side: master max offset minus the slave's acknowledged offset"),
    "relaymq_replication_slave_lag_messages": (GAUGE, "Master side: messages at or past the slave's acknowledged offset"),
    "relaymq_replication_master_connected": (GAUGE, "Slave side: 1 while connected to its master"),
    "relaymq_replication_acked_offset_bytes": (GAUGE, "Slave side: commit-log offset this slave acknowledged"),
    "relaymq_nameserver_brokers_alive": (GAUGE, "Brokers registered and heartbeating at this nameserver, per cluster"),
    "relaymq_nameserver_broker_groups": (GAUGE, "Broker groups (broker names) registered at this nameserver, per cluster"),
    "relaymq_nameserver_broker_groups_without_master": (GAUGE, "Broker groups registered with no master (broker id 0)"),
    "relaymq_controller_leader": (GAUGE, "1 while this controller member is the serving leader"),
    "relaymq_controller_term": (GAUGE, "Raft term of this controller member"),
    "relaymq_controller_committed_index": (GAUGE, "Raft commit index of this controller member"),
    "relaymq_controller_elections": (COUNTER, "Terms this controller member campaigned in (seen at its role changes)"),
    "relaymq_controller_leader_changes": (COUNTER, "Times this controller member saw the leader change"),
}


def _sample(name: str, value: float, **labels: object) -> Sample:
    assert name in FAMILIES, name
    return Sample(name, tuple((k, str(v)) for k, v in labels.items()), float(value))


def broker_samples(broker: str, broker_id: int, role: str) -> list[Sample]:
    return [_sample("relaymq_broker_up", 1, broker=broker, broker_id=broker_id)] + [
        _sample("relaymq_broker_role", int(role == each), broker=broker, broker_id=broker_id, role=each) for each in ROLES]


def _epoch(status: Mapping) -> int:
    if "masterEpoch" in status:
        return int(status["masterEpoch"])
    epochs = status.get("epochs") or []
    return int(epochs[-1][0]) if epochs else 0


def master_samples(broker: str, status: Mapping, lag_messages: Callable[[int], int]) -> list[Sample]:
    """From ``ReplicationMaster.status()``; ``lag_messages(offset)`` counts messages at or past it."""
    samples = [_sample("relaymq_replication_max_offset_bytes", status["maxOffset"], broker=broker, broker_id=0),
               _sample("relaymq_replication_confirm_offset_bytes", status["confirmOffset"], broker=broker, broker_id=0),
               _sample("relaymq_replication_epoch", _epoch(status), broker=broker, broker_id=0),
               _sample("relaymq_replication_sync_state_set_size", len(status.get("syncStateSet", ())), broker=broker)]
    if "syncStateSetEpoch" in status:
        samples.append(_sample("relaymq_replication_sync_state_set_epoch", status["syncStateSetEpoch"], broker=broker))
    for slave in status.get("slaves", ()):
        labels = {"broker": broker, "slave_id": slave["slaveId"]}
        lag_bytes = max(0, status["maxOffset"] - slave["ackOffset"])
        samples += [_sample("relaymq_replication_slave_connected", int(bool(slave["connected"])), **labels),
                    _sample("relaymq_replication_slave_in_sync", int(bool(slave["inSyncStateSet"])), **labels),
                    _sample("relaymq_replication_slave_acked_offset_bytes", slave["ackOffset"], **labels),
                    _sample("relaymq_replication_slave_lag_bytes", lag_bytes, **labels),
                    _sample("relaymq_replication_slave_lag_messages", lag_messages(slave["ackOffset"]) if lag_bytes else 0,
                            **labels)]
    return samples


def slave_samples(broker: str, broker_id: int, status: Mapping) -> list[Sample]:
    """From ``ReplicationSlave.status()``."""
    labels = {"broker": broker, "broker_id": broker_id}
    return [_sample("relaymq_replication_master_connected", int(bool(status.get("masterAddress"))), **labels),
            _sample("relaymq_replication_acked_offset_bytes", status.get("ackedOffset", 0), **labels),
            _sample("relaymq_replication_max_offset_bytes", status["maxOffset"], **labels),
            _sample("relaymq_replication_confirm_offset_bytes", status["confirmOffset"], **labels),
            _sample("relaymq_replication_epoch", _epoch(status), **labels)]


def nameserver_samples(cluster_info) -> list[Sample]:
    """From ``RouteTable.cluster_info()``: brokers and groups per cluster, groups without a master."""
    per_cluster: dict[str, list[int]] = {cluster: [0, 0, 0] for cluster in cluster_info.clusters}
    for group in cluster_info.groups:
        counts = per_cluster.setdefault(group.cluster, [0, 0, 0])
        counts[0] += len(group.members)
        counts[1] += 1
        counts[2] += int(not any(m.identity.broker_id == 0 for m in group.members))
    samples = []
    for cluster, (brokers, groups, masterless) in sorted(per_cluster.items()):
        samples += [_sample("relaymq_nameserver_brokers_alive", brokers, cluster=cluster),
                    _sample("relaymq_nameserver_broker_groups", groups, cluster=cluster),
                    _sample("relaymq_nameserver_broker_groups_without_master", masterless, cluster=cluster)]
    return samples


def controller_samples(group: str, member: str, leader: bool, term: int, committed_index: int, elections: int,
                       leader_changes: int) -> list[Sample]:
    labels = {"group": group, "member": member}
    return [_sample("relaymq_controller_leader", int(leader), **labels),
            _sample("relaymq_controller_term", term, **labels),
            _sample("relaymq_controller_committed_index", committed_index, **labels),
            _sample("relaymq_controller_elections", elections, **labels),
            _sample("relaymq_controller_leader_changes", leader_changes, **labels)]


Source = Callable[[], Iterable[Sample]]


def hosted_broker_source(hosted: Callable[[], Iterable[tuple[object, object, object]]]) -> Source:
    """Samples of every (broker, replica or None, store) ``hosted()`` returns; the replica's
    ``status()`` says its role (a FENCED replica has no replication samples)."""
    def samples() -> list[Sample]:
        found: list[Sample] = []
        for broker, replication, store in hosted():
            found += broker_samples(broker.name, broker.broker_id, broker.role)
            if replication is None:
                continue
            status = replication.status()
            if status.get("role") == "MASTER":
                found += master_samples(broker.name, status, store.messages_from)
            elif status.get("role") == "SLAVE":
                found += slave_samples(broker.name, broker.broker_id, status)
        return found
    return samples


def _on_loop(source: Source, loop: asyncio.AbstractEventLoop | None) -> list[Sample]:
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is None or running is loop:
        return list(source())
    future: concurrent.futures.Future = concurrent.futures.Future()

    def run() -> None:
        try:
            future.set_result(list(source()))
        except BaseException as failure:  # handed to the scraping thread
            future.set_exception(failure)
    loop.call_soon_threadsafe(run)
    return future.result(SOURCE_TIMEOUT_S)


class StatusMetrics:
    """The one collector of every registered source (a prometheus_client custom collector)."""

    def __init__(self) -> None:
        self._sources: dict[int, tuple[Source, asyncio.AbstractEventLoop | None]] = {}
        self._ids = itertools.count(1)

    def add(self, source: Source, loop: asyncio.AbstractEventLoop | None = None) -> int:
        """Register ``source`` (run on ``loop`` when given); returns the token for :meth:`remove`."""
        token = next(self._ids)
        self._sources[token] = (source, loop)
        return token

    def remove(self, token: int | None) -> None:
        self._sources.pop(token, None)

    def describe(self):
        return []  # registration must not call the sources (they may not exist yet)

    def samples(self) -> list[Sample]:
        found: list[Sample] = []
        for source, loop in list(self._sources.values()):
            try:
                found += _on_loop(source, loop)
            except concurrent.futures.TimeoutError:
                log.warning("metrics source %r did not answer within %.1f s; left out of this scrape", source,
                            SOURCE_TIMEOUT_S)
            except Exception:  # a scrape must not fail for one source; its owner may be stopping
                log.exception("metrics source %r failed", source)
        return found

    def collect(self):
        families: dict[str, object] = {}
        for sample in self.samples():
            family = families.get(sample.name)
            if family is None:
                kind, text = FAMILIES[sample.name]
                names = [k for k, _ in sample.labels]
                family = (CounterMetricFamily if kind == COUNTER else GaugeMetricFamily)(sample.name, text, labels=names)
                families[sample.name] = family
            family.add_metric([v for _, v in sample.labels], sample.value)
        return list(families.values())


STATUS = StatusMetrics()
