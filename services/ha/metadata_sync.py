"""A slave's periodic metadata sync from its master (RocketMQ's ``SlaveSynchronize``).

Rules:
- One :class:`MetadataSync` per SLAVE broker, run by the container as a declared periodic
  task every ``slaveSynchronizePeriod`` (:meth:`MetadataSync.declare_on`).
- Each run asks the master's container (``GetReplicaMetadata`` for the slave's own
  ``brokerName`` with ``brokerId`` 0, deadline ``slaveSynchronizeTimeoutMillis``) for one
  snapshot of its topics, groups, consumer offsets and timer checkpoint, and lets each
  manager adopt the master's copy with the master's DataVersion when the versions differ
  (``metadata.replica_metadata``).  Only a MASTER reply with id 0 and the same name is used.
- Nothing here is fatal: no master address, an unreachable or refusing master and a
  malformed reply are a :class:`SyncReport` with a named problem, logged at warning when a
  run starts failing and at debug while it keeps failing.  A file write that fails is a
  real error and propagates (the supervisor logs it; the next run retries).
- The role is checked before asking and again before adopting: a broker promoted to master
  meanwhile adopts nothing.
- :meth:`MetadataSync.sync_soon` runs a sync now, without waiting for the period, when the
  master says its topics or groups changed (on the replication stream); calls that arrive
  during a sync make one more run after it, never several at once.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Awaitable, Callable, Mapping, Union

from metadata.data_version import DataVersion
from metadata.replica_metadata import MASTER_ID, Adopt, Adoption, check_master_reply
from proto import admin_pb2 as pb
from scheduler.clock import Clock
from scheduler.periodic import PeriodicTasks
from services.admin.client import AdminClient, AdminRejected, AdminUnavailable, Credentials
from services.admin.replica_converters import BadReplicaReply, held_to_proto, replica_metadata_from_proto
from services.broker.replica_metadata import follow_master, snapshot

log = logging.getLogger(__name__)

AddressSource = Callable[[], Union[str, None, Awaitable[Union[str, None]]]]
TopicsChanged = Callable[[], Union[None, Awaitable[None]]]


class SyncOutcome(str, Enum):
    SYNCED = "SYNCED"  # the master's snapshot was handled: each item adopted or kept
    SKIPPED = "SKIPPED"  # nothing to ask now
    FAILED = "FAILED"  # asked, but nothing usable came back


class SyncProblem(str, Enum):
    NOT_A_SLAVE = "NOT_A_SLAVE"
    NO_MASTER_ADDRESS = "NO_MASTER_ADDRESS"
    MASTER_UNREACHABLE = "MASTER_UNREACHABLE"
    MASTER_REFUSED = "MASTER_REFUSED"
    BAD_REPLY = "BAD_REPLY"
    WRONG_BROKER_NAME = "WRONG_BROKER_NAME"
    NOT_THE_MASTER = "NOT_THE_MASTER"


@dataclass(frozen=True)
class SyncReport:
    outcome: SyncOutcome
    at_ms: int
    master_address: str = ""
    problem: SyncProblem | None = None
    detail: str = ""
    decisions: Mapping[str, Adoption] = field(default_factory=dict)  # item -> Adopt | Keep

    def __post_init__(self) -> None:
        object.__setattr__(self, "decisions", MappingProxyType(dict(self.decisions)))

    @property
    def adopted(self) -> dict[str, DataVersion]:
        """The items adopted by this run, with the DataVersion each now has."""
        return {item: d.remote_version for item, d in self.decisions.items() if isinstance(d, Adopt)}

    @property
    def topics_changed(self) -> bool:
        """The topic table changed: the container re-registers the broker with the nameserver."""
        return "topics" in self.adopted


class MetadataSync:
    def __init__(self, broker, master_admin_address: AddressSource, clock: Clock,
                 on_topics_changed: TopicsChanged | None = None, credentials: Credentials | None = None):
        """``broker``: the slave :class:`services.broker.broker.Broker`; ``master_admin_address``:
        the admin (internal) address ``host:port`` of the container hosting its master, or None
        while unknown (a plain or async callable, asked on every run); ``on_topics_changed``
        (plain or async) runs after the topic table was adopted, e.g. to re-register the
        broker with the nameserver; its failure is logged, the adoption stays.  ``credentials``
        sign the calls (``innerClientAuthenticationCredentials``: the master's container may
        have authorization on)."""
        self.credentials = credentials
        self.broker, self.master_admin_address, self.clock = broker, master_admin_address, clock
        self.on_topics_changed = on_topics_changed
        self.timeout_ms = broker.config.slave_synchronize_timeout_ms
        self.last_report: SyncReport | None = None
        self._client: AdminClient | None = None
        self._soon: asyncio.Task | None = None
        self._again = False

    def declare_on(self, tasks: PeriodicTasks, initial_delay_ms: int = 0) -> None:
        period = self.broker.config.slave_synchronize_period_ms
        tasks.declare(f"metadata-sync {self.broker.name}-{self.broker.broker_id}", period, self.sync_once, initial_delay_ms)

    async def sync_once(self) -> SyncReport:
        report = await self._sync()
        self._log(report)
        self.last_report = report
        if report.topics_changed and self.on_topics_changed is not None:
            await self._topics_changed()
        return report

    async def _topics_changed(self) -> None:
        try:
            result = self.on_topics_changed()
            if inspect.isawaitable(result):
                await result
        except Exception:  # the adopted table is durable; registration retries on its own schedule
            log.exception("metadata sync of %s-%s: topics-changed callback failed", self.broker.name, self.broker.broker_id)

    def sync_soon(self) -> None:
        self._again = True
        if self._soon is None or self._soon.done():
            self._soon = asyncio.get_running_loop().create_task(self._sync_while_wanted())

    async def _sync_while_wanted(self) -> None:
        while self._again:
            self._again = False
            try:
                await self.sync_once()
            except Exception:  # the periodic run retries; say why this one failed
                log.exception("metadata sync of %s on its master's news failed", self.broker.name)

    async def close(self) -> None:
        if self._soon is not None:
            self._soon.cancel()
            await asyncio.gather(self._soon, return_exceptions=True)
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def _sync(self) -> SyncReport:
        now = self.clock.now_ms()
        if self.broker.role != "SLAVE":
            return SyncReport(SyncOutcome.SKIPPED, now, problem=SyncProblem.NOT_A_SLAVE)
        address = self.master_admin_address()
        if inspect.isawaitable(address):
            address = await address
        if not address:
            return SyncReport(SyncOutcome.SKIPPED, now, problem=SyncProblem.NO_MASTER_ADDRESS)
        held = snapshot(self.broker)  # what this slave holds: the master sends only the tables at other versions
        request = pb.AdminGetReplicaMetadataRequest(broker_name=self.broker.name, broker_id=MASTER_ID,
                                                    held=held_to_proto(held.versions()))
        try:
            reply = await (await self._client_for(address)).call("GetReplicaMetadata", request)
            metadata = await asyncio.to_thread(replica_metadata_from_proto, reply, held)  # off the loop: big tables
        except AdminUnavailable as exc:
            return SyncReport(SyncOutcome.FAILED, now, address, SyncProblem.MASTER_UNREACHABLE, str(exc))
        except AdminRejected as exc:
            return SyncReport(SyncOutcome.FAILED, now, address, SyncProblem.MASTER_REFUSED, exc.details)
        except BadReplicaReply as exc:
            return SyncReport(SyncOutcome.FAILED, now, address, SyncProblem.BAD_REPLY, str(exc))
        rejected = check_master_reply(self.broker.name, metadata)
        if rejected is not None:
            detail = f"reply from {metadata.broker_name} id {metadata.broker_id} ({metadata.role})"
            return SyncReport(SyncOutcome.FAILED, now, address, SyncProblem(rejected.value), detail)
        await self.broker.catch_up_in_steps()  # adopting compares caught-up tables: a rebuild, in steps
        if self.broker.role != "SLAVE":  # promoted while we were asking
            return SyncReport(SyncOutcome.SKIPPED, now, address, SyncProblem.NOT_A_SLAVE)
        decisions = await follow_master(self.broker, metadata)
        return SyncReport(SyncOutcome.SYNCED, now, address, decisions=decisions)

    async def _client_for(self, address: str) -> AdminClient:
        if self._client is not None and self._client.address != address:
            await self.close()
        if self._client is None:
            self._client = AdminClient(address, self.timeout_ms, self.credentials)
        return self._client

    def _log(self, report: SyncReport) -> None:
        name = f"{self.broker.name}-{self.broker.broker_id}"
        was_failing = self.last_report is not None and self.last_report.outcome is SyncOutcome.FAILED
        if report.outcome is SyncOutcome.FAILED:
            level = logging.DEBUG if was_failing and self.last_report.problem is report.problem else logging.WARNING
            log.log(level, "metadata sync of %s from %s failed: %s: %s", name, report.master_address,
                    report.problem.value, report.detail)
        elif report.outcome is SyncOutcome.SYNCED:
            if was_failing:
                log.info("metadata sync of %s from %s works again", name, report.master_address)
            if report.adopted:
                log.info("metadata sync of %s adopted from %s: %s", name, report.master_address,
                         ", ".join(f"{item} {v.to_json()}" for item, v in report.adopted.items()))
        else:
            log.debug("metadata sync of %s skipped: %s", name, report.problem.value)
