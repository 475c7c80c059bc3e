"""A container's side of broker moves (issue 26, docs/reassign.md): release, open, resume, report.

Rules:
- ``release`` (the source): the broker must be served here on shared storage; it stops taking
  calls, is unregistered, and its store is flushed and closed (a clean close: the target's
  scan from the handed end finds nothing more).  Answers the commit log's end and the
  broker's keys; asked again for the same move, the same.  A move this container resumed
  from (cancelled) is not released when its release arrives late.
- ``open`` (the target, or the source taking the broker back at a newer epoch): takes the store
  over at the epoch (``store.takeover``: from then on any older owner acknowledges nothing)
  and serves the broker.  Asked again at the epoch it opened, it answers the same.
- ``check_store`` (before a move commits): this container sees the store the source owns, and
  it takes a durable atomic rename; else the move is refused with the reason.
- ``resume`` (a cancelled move): a broker still served here notes the epoch; one released for
  that move is taken over again at that epoch (the target was never asked to open).
- Calls that still reach this container for a broker it released are relayed to the move's
  target (``moved_to``, services.messaging); so are those for a broker taken over while this
  container could not release it (stopped, cut off): the store's newest claim names the owner.
- A broker opened here by a move is remembered in ``{storePathRootDir}/moved-in.json`` (its
  keys; written atomically, fsynced) until it is released again, so the container serves it
  after a restart although its file does not name it (:meth:`ContainerMoves.moved_in_specs`);
  the store's claims still decide whether it may.
- ``report``: every ``brokerHeartbeatInterval`` the container tells the controller its client
  endpoint, its internal address and the brokers it serves (those on shared storage with their
  ownership epoch and keys); an idle container reports too: it may be a move's target.
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING

import grpc

from container.config import BrokerEntry
from container.hosted_broker import bind_broker
from metadata.config import ConfigError
from services.broker.config_files import read_document, write_document
from proto import controller_pb2 as cpb
from services.messaging.moved_relay import Gate
from services.reassign.service import MoveRefused
from store.ownership import LedgerError
from store.ownership_files import check_shared_store, read_ledger
from store.takeover import take_over

if TYPE_CHECKING:
    from container.runtime import BrokerContainer

log = logging.getLogger(__name__)
MOVED_IN = "moved-in.json"


def _moved_in(document) -> dict[str, dict]:
    if not isinstance(document, dict) or not all(isinstance(v, dict) and v.get("brokerName") == k
                                                  for k, v in document.items()):
        raise ValueError("expected an object of broker name -> its keys (naming that broker)")
    return document


class ContainerMoves:
    def __init__(self, container: "BrokerContainer") -> None:
        self.container = container
        self._released: dict[str, tuple[int, int, dict]] = {}  # broker -> (move epoch, end, keys)
        self._opened: dict[str, tuple[int, int, int]] = {}     # broker -> (epoch, sealed end, starts at)
        self._resumed: dict[str, int] = {}                      # broker -> the newest move epoch cancelled
        self.moved_to: dict[str, tuple[str, frozenset[str]]] = {}  # broker -> (its client endpoint now, its topics)
        self._client = None
        self._unreported: str | None = None   # why the controller has not taken our reports (logged once)
        self._gates: dict[str, Gate] = {}  # target endpoint -> its readiness to relayed calls
        self._lock = asyncio.Lock()  # one step at a time: a resume racing its move's release sees it whole

    @property
    def _moved_in_path(self):
        return self.container.config.store_path_root_dir / MOVED_IN

    def moved_in_specs(self, configured: set[str]) -> list:
        """The brokers moved here before this start, and not in the container's file."""
        try:
            document = read_document(self._moved_in_path, _moved_in) or {}
        except ValueError as bad:
            log.error("%s unreadable (%s): brokers moved here are not opened; move them again", self._moved_in_path, bad)
            return []
        specs = []
        for name, values in sorted(document.items()):
            if name in configured:
                continue
            try:
                specs.append(bind_broker(BrokerEntry(values, f"{self._moved_in_path} [{name}]"), self.container.config))
            except ConfigError as bad:
                log.error("broker %s moved here cannot be opened: %s", name, bad)
        return specs

    async def _remember(self, broker_name: str, values: dict | None) -> None:
        def update() -> None:
            document = read_document(self._moved_in_path, _moved_in) or {}
            if values is None:
                if document.pop(broker_name, None) is None:
                    return
            else:
                document[broker_name] = values
            write_document(self._moved_in_path, document)
        await asyncio.to_thread(update)

    def _shared_spec(self, broker_name: str, values: dict):
        """The moved broker's spec from its keys; refused unless it is on shared storage."""
        try:
            spec = bind_broker(BrokerEntry(values, f"moved broker {broker_name}"), self.container.config)
        except ConfigError as bad:
            raise MoveRefused(grpc.StatusCode.INVALID_ARGUMENT, str(bad)) from None
        if not spec.store.shared_storage:
            raise MoveRefused(grpc.StatusCode.FAILED_PRECONDITION, f"broker {broker_name} is not on shared storage")
        return spec

    def gate(self, target: str) -> Gate:
        gate = self._gates.get(target)
        if gate is None:
            gate = self._gates[target] = Gate()
        return gate

    def _hosted(self, broker_name: str):
        return next((h for h in self.container.hosted.values() if h.name == broker_name), None)

    async def release(self, broker_name: str, epoch: int, target_endpoint: str = "") -> tuple[int, dict]:
        async with self._lock:
            return await self._release(broker_name, epoch, target_endpoint)

    async def open(self, broker_name: str, epoch: int, values: dict, handed_end: int | None = None) -> tuple[int, int]:
        async with self._lock:
            return await self._open(broker_name, epoch, values, handed_end)

    async def resume(self, broker_name: str, epoch: int, values: dict) -> tuple[int, int]:
        async with self._lock:
            return await self._resume(broker_name, epoch, values)

    async def _release(self, broker_name: str, epoch: int, target_endpoint: str) -> tuple[int, dict]:
        released = self._released.get(broker_name)
        if released is not None and released[0] == epoch:
            return released[1], released[2]
        if self._resumed.get(broker_name, 0) >= epoch:
            raise MoveRefused(grpc.StatusCode.FAILED_PRECONDITION,
                              f"the move of {broker_name} at epoch {epoch} was cancelled; it stays here")
        hosted = self._hosted(broker_name)
        if hosted is None:
            raise MoveRefused(grpc.StatusCode.NOT_FOUND, f"broker {broker_name} is not served by {self.container.identity}")
        if not hosted.spec.store.shared_storage:
            raise MoveRefused(grpc.StatusCode.FAILED_PRECONDITION, f"broker {broker_name} is not on shared storage "
                              "(sharedStorage): it cannot move without copying")
        spec = hosted.spec
        if target_endpoint:  # relayed from now (services.messaging.moved_relay)
            self.moved_to[broker_name] = (target_endpoint, frozenset(hosted.broker.topics.table.topics))
            self._gates[target_endpoint] = Gate()  # not ready until a relayed call finds it serving
        await self.container.remove_broker(spec.broker.broker_cluster_name, hosted.name, spec.broker.broker_id)
        end = hosted.store.commit_log_max_offset  # closed: nothing is written past it any more
        self._released[broker_name] = (epoch, end, dict(spec.values))
        self._opened.pop(broker_name, None)
        await self._remember(broker_name, None)
        log.warning("%s: released for a move at ownership epoch %d (store closed at %d)%s", spec.canonical_name, epoch,
                    end, f"; its calls are relayed to {target_endpoint}" if target_endpoint else "")
        return end, dict(spec.values)

    def relay_taken_over(self, hosted) -> str:
        """A broker another container took over without this one's release (it was stopped or cut
        off while the move went on, and found itself fenced): its calls are relayed to the owner
        the store's newest claim names, as after a release.  Answers that owner ("" if none)."""
        try:
            owner = read_ledger(hosted.spec.store.store_path_root_dir).newest.owner
        except (OSError, LedgerError) as unreadable:
            log.warning("%s: the store's claims cannot be read (%s): its calls are not relayed",
                        hosted.spec.canonical_name, unreadable)
            return ""
        if not owner or owner == self.container.identity:
            return ""
        self.moved_to[hosted.name] = (owner, frozenset(hosted.broker.topics.table.topics))
        self._gates.setdefault(owner, Gate())
        return owner

    async def _open(self, broker_name: str, epoch: int, values: dict, handed_end: int | None = None) -> tuple[int, int]:
        opened = self._opened.get(broker_name)
        if opened is not None and opened[0] == epoch and self._hosted(broker_name) is not None:
            return opened[1], opened[2]
        spec = self._shared_spec(broker_name, values)
        hosted = self._hosted(broker_name)
        if hosted is not None:
            if hosted.store.ownership_epoch >= epoch:
                raise MoveRefused(grpc.StatusCode.FAILED_PRECONDITION, f"{self.container.identity} already serves "
                                  f"{broker_name} at ownership epoch {hosted.store.ownership_epoch}")
            # taking back a broker this container never released (its release timed out): drop its stale copy
            await self.container.remove_broker(spec.broker.broker_cluster_name, hosted.name, spec.broker.broker_id)
        try:
            taken = await asyncio.to_thread(take_over, spec.store, self.container.identity, epoch, handed_end)
        except LedgerError as refused:
            raise MoveRefused(grpc.StatusCode.FAILED_PRECONDITION, f"the store's claims refuse the takeover: {refused}") from None
        self._released.pop(broker_name, None)
        self.moved_to.pop(broker_name, None)
        await self._remember(broker_name, dict(values))
        await self.container.add_broker(spec)
        self._opened[broker_name] = (epoch, taken.sealed_end, taken.starts_at)
        log.warning("%s: taken over at ownership epoch %d (the previous owner's bytes end at %d)", spec.canonical_name,
                    epoch, taken.sealed_end)
        return taken.sealed_end, taken.starts_at

    async def _resume(self, broker_name: str, epoch: int, values: dict) -> tuple[int, int]:
        self._resumed[broker_name] = max(epoch, self._resumed.get(broker_name, 0))
        released = self._released.get(broker_name)
        if released is not None and released[0] == epoch:
            log.warning("%s: the move at epoch %d was cancelled after the release: taking the store back", broker_name,
                        epoch)
            return await self._open(broker_name, epoch, values or released[2])
        hosted = self._hosted(broker_name)
        if hosted is None:
            raise MoveRefused(grpc.StatusCode.NOT_FOUND, f"broker {broker_name} is not served by {self.container.identity}")
        log.warning("%s: the move at epoch %d was cancelled; still served here", broker_name, epoch)
        return hosted.store.commit_log_max_offset, 0

    async def check_store(self, broker_name: str, values: dict, owner: str) -> None:
        spec = self._shared_spec(broker_name, values)
        why = await asyncio.to_thread(check_shared_store, spec.store.store_path_root_dir, owner)
        if why is not None:
            raise MoveRefused(grpc.StatusCode.FAILED_PRECONDITION, f"{self.container.identity}: {why}")

    # ---- the report to the controller

    def controller_addresses(self) -> list[str]:
        text = self.container.config.controller_addr
        if not text:
            text = next((";".join(h.spec.broker.controller_addresses) for h in self.container.hosted.values()
                         if h.spec.broker.enable_controller_mode), "")
        return [a.strip() for a in text.split(";") if a.strip()]

    def report_request(self) -> cpb.ReportContainerRequest:
        hosted = list(self.container.hosted.values())
        shared = [cpb.ContainerBroker(name=h.name, ownership_epoch=h.store.ownership_epoch,
                                      entry_json=json.dumps(dict(h.spec.values), sort_keys=True, default=str))
                  for h in hosted if h.spec.store.shared_storage]
        container = self.container
        return cpb.ReportContainerRequest(
            endpoint=container.identity, admin_address=f"{container.config.admin_bind_address}:{container.ports['admin']}",
            brokers=sorted({h.name for h in hosted}), shared=shared)

    async def report(self) -> None:
        addresses = self.controller_addresses()
        if not addresses:
            return
        if self._client is None:
            from services.controller.client import ControllerClient
            # enough attempts to pass a dead leader (the client asks the last one it knew first, and
            # then every member in order) and follow one redirect: with 3 and three members, a
            # container whose last leader was killed never reached a new leader listed last, so
            # that leader could not carry a move on (test_reassign's controller-leader test)
            self._client = ControllerClient(addresses, call_timeout_s=1.0, attempts=2 * len(addresses) + 2,
                                            deadline_s=2.0)
        from services.controller.client import ControllerClientError
        try:
            reply = await self._client.call("ReportContainer", self.report_request())
        except ControllerClientError as failure:
            # every heartbeat interval while the controller is down: said once, not a traceback each time
            if self._unreported is None:
                log.warning("container report: %s (again every %d ms until one answers)", failure,
                            self.container.config.heartbeat_interval_ms)
            self._unreported = str(failure)
            return
        if self._unreported is not None:
            log.info("container report taken again (the controller answers)")
            self._unreported = None
        if reply.status.code != cpb.ControllerStatus.SUCCESS:
            log.debug("container report not taken: %s %s", reply.status.code, reply.status.remark)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
