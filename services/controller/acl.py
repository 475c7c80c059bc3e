"""The users and ACLs in the controller's Raft state: seeds, changes and syncs, one at a time.

A driver around :mod:`metadata.acl_replication` (which decides) and the member's Raft driver
(which commits).  Rules:
- Only a serving leader commits (its applied value is then complete for its term); anything
  else raises :class:`AclNotCommitted` naming the leader it believes in.
- Seeds and changes are serialized by one lock: each is decided on the applied value,
  proposed, and answered only once applied, so the next one decides on it.  At most one
  proposal is in flight; that is the limit.
- Syncs (a container asking with the stamp it enforces) read the applied value; each
  container's last report is kept (in memory, bounded by :data:`MAX_REPORTS`) for
  ``list-acl`` against the controller.
- As a store for :class:`services.access.acl_admin.AclAdminServicer` it offers ``state``,
  ``source`` and ``change``: a container in controller mode forwards its users' commands here
  (after authorizing them), and ``relaymq admin ... --container CONTROLLER`` lands here
  directly.  The controller's ports check the cluster credential, not a user
  (docs/security.md).
"""
from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass
from typing import Callable

from ha.controller.events import encode_event
from ha.raft.errors import RaftError
from metadata.acl_replication import (AclDocument, AclStamp, EnforcerReport, Refused, ReplicatedAcl, answer_with_document,
                                      decide_change, decide_seed)
from metadata.acl_state import AclCommandDecision, AclState
from metadata.acl_files import dump_acl_toml
from services.access.acl_store import AclUnavailable

log = logging.getLogger(__name__)
MAX_REPORTS = 10_000


class AclNotCommitted(AclUnavailable):
    """This member cannot commit users and ACLs now (not the leader, or the commit failed)."""


@dataclass(frozen=True)
class SyncAnswer:
    stamp: AclStamp
    text: str | None  # the document, when the asker is not in step
    refused: Refused | None = None  # why an offered seed was not taken


class ControllerAcl:
    replicated = True
    def __init__(self, controller) -> None:
        """``controller``: the member (:class:`services.controller.controller.Controller`)."""
        self._controller = controller
        self._lock = asyncio.Lock()
        self.reports: dict[str, EnforcerReport] = {}

    @property
    def value(self) -> ReplicatedAcl:
        return self._controller.machine.acl

    # ---- as an AclAdmin store

    @property
    def state(self) -> AclState:
        return self.value.state

    @property
    def origin(self) -> str:
        return self.value.origin

    @property
    def source(self) -> str:
        config = self._controller.config
        return f"controller {config.group} ({self.value.stamp})"

    async def change(self, decide: Callable[[AclState], AclCommandDecision]) -> AclCommandDecision:
        async with self._lock:
            self._check_leader()
            current = self.value
            if not current.origin:
                raise AclNotCommitted("NOT_SEEDED: no container with authorizationEnabled has started under this "
                                      "controller yet (the first one seeds the users and ACLs from its file)")
            decision = decide(current.state)
            document = decide_change(current, decision)
            if isinstance(document, Refused):
                raise AclNotCommitted(f"{document.reason.value}: {document.detail}")
            if document is not None:
                await self._commit(document)
                log.info("users and ACLs: %s committed: %s", self.value.stamp, decision.reply.detail)
            return decision

    # ---- containers

    async def sync(self, known: AclStamp, seed_text: str | None, container: str, brokers: tuple[str, ...],
                   now_ms: int) -> SyncAnswer:
        """The answer to a container enforcing ``known`` (offering ``seed_text`` when it found the
        controller empty)."""
        refused = None
        if seed_text is not None and not self.value.origin:
            async with self._lock:
                self._check_leader()
                document = decide_seed(self.value, secrets.token_hex(8), seed_text)
                if isinstance(document, Refused):
                    refused = document
                    log.warning("users and ACLs offered by %s not taken: %s %s", container, document.reason.value,
                                document.detail)
                else:
                    await self._commit(document)
                    log.info("users and ACLs seeded by %s: %s", container, self.value.stamp)
        self._check_leader()
        current = self.value
        self._report(container, brokers, known, now_ms)
        text = dump_acl_toml(current.state) if answer_with_document(current, known) else None
        return SyncAnswer(current.stamp, text, refused)

    def enforcers(self) -> list[EnforcerReport]:
        return sorted(self.reports.values(), key=lambda r: r.container)

    def age_ms(self, report: EnforcerReport) -> int:
        return max(0, self._controller.clock.monotonic_ms() - report.at_ms)

    def _report(self, container: str, brokers: tuple[str, ...], known: AclStamp, now_ms: int) -> None:
        if container not in self.reports and len(self.reports) >= MAX_REPORTS:
            oldest = min(self.reports.values(), key=lambda r: r.at_ms)
            del self.reports[oldest.container]
        self.reports[container] = EnforcerReport(container, brokers, known, now_ms)

    # ---- commits

    def _check_leader(self) -> None:
        if not self._controller.machine.serving:
            raise AclNotCommitted(f"NOT_LEADER: {self._controller.not_leader().remark}")

    async def _commit(self, document: AclDocument) -> None:
        timeout_ms = self._controller.config.request_timeout_ms
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                await self._controller.driver.propose([encode_event(document)])
        except RaftError as exc:
            raise AclNotCommitted(f"NOT_COMMITTED: {exc}") from None
        except TimeoutError:
            raise AclNotCommitted(f"NOT_COMMITTED: not applied within controllerRequestTimeoutMills "
                                  f"({timeout_ms} ms); it may still commit") from None
