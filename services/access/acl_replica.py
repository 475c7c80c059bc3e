"""The users and ACLs a container enforces under a controller: a copy of the controller's.

A driver around :func:`metadata.acl_replication.decide_sync` (which decides what to do with
each answer).  Rules:
- The container's brokers run in ``enableControllerMode``: the users and ACLs live in the
  controller's Raft state, and this container enforces a copy.  Every
  ``authorizationMetadataWatchIntervalMillis`` it asks the controller's leader (SyncAcl) with
  the stamp (origin, version) it enforces; at steady state the reply is a few bytes, and it
  carries the whole document only when the stamp moved.  The first sync runs before the
  container serves (:meth:`start_sync`), so a container that was down enforces what changed
  meanwhile from its first call, when the controller answers.
- What the container enforces at start, before any answer: its cache
  (``{storePathRootDir}/acl/replicated-acl.json``: the last version it adopted), else its
  ``authorizationMetadataFile`` (version 0, not confirmed).  The file is then only the seed an
  empty controller takes (the first container to offer wins); it is not watched.
- An adopted version is written to the cache (atomically, fsync) before it is enforced;
  a bad or stale answer keeps what is enforced and is logged once per answer stamp.
- Changes (the admin commands) are forwarded to the controller's AclAdmin, which commits them;
  the container then syncs before answering, so the caller's container already enforces
  the version the change made.
- Lookups used on every call read one attribute: the state is replaced whole.
"""
from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any, Callable

import grpc

from metadata.acl_files import dump_acl_toml, parse_acl_toml
from metadata.acl_model import UserStatus
from metadata.acl_replication import (UNSEEDED, AclStamp, EnforcerReport, SyncStep, check_origin, decide_sync)
from metadata.acl_state import AclState
from metadata.config import ConfigError
from proto import acl_admin_pb2_grpc
from proto import controller_pb2 as cpb
from services.access.acl_store import AclUnavailable, read_acl_text, write_atomically
from services.controller.client import ControllerClient, ControllerClientError

log = logging.getLogger(__name__)
CACHE_NAME = "replicated-acl.json"
MAX_CACHE_BYTES = 8 << 20
FORWARD_TIMEOUT_S = 10.0


def _read_cache(path: Path) -> tuple[AclStamp, AclState] | None:
    """The cached copy, None when there is none; a bad cache is logged and ignored."""
    try:
        data = path.read_bytes()[:MAX_CACHE_BYTES + 1]
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.error("%s: cannot be read (%s); starting from authorizationMetadataFile", path, exc.strerror)
        return None
    try:
        body = json.loads(data)
        stamp = AclStamp(body["origin"], int(body["version"]))
        if check_origin(stamp.origin) is not None or stamp.version < 1:
            raise ValueError(f"not a stamp: {stamp}")
        return stamp, parse_acl_toml(body["document"], str(path), version=stamp.version)
    except (ValueError, KeyError, TypeError, ConfigError) as exc:
        log.error("%s: not a valid copy (%s); starting from authorizationMetadataFile", path, exc)
        return None


class ReplicatedAclStore:
    replicated = True
    def __init__(self, seed_path: Path, cache_path: Path, state: AclState, stamp: AclStamp,
                 controller_addresses: list[str]):
        self.seed_path, self.cache_path = seed_path, cache_path
        self._state, self.stamp = state, stamp
        self.client = ControllerClient(controller_addresses, call_timeout_s=2.0, attempts=3, deadline_s=3.0,
                                       retry_pause_s=0.1)
        self.container = ""  # this container's internal address and brokers: set once it listens
        self.brokers: Callable[[], tuple[str, ...]] = tuple
        self._lock = asyncio.Lock()
        self._logged: AclStamp | None = None  # the answer last logged as bad or stale

    @staticmethod
    def open(seed_path: Path, store_root: Path, controller_addresses: list[str]) -> "ReplicatedAclStore":
        """The cache when there is a good one, else the seed file (ConfigError naming its line)."""
        cache_path = store_root / "acl" / CACHE_NAME
        cached = _read_cache(cache_path)
        if cached is not None:
            stamp, state = cached
            log.info("%s: %s: %d users, %d ACL entries", cache_path, stamp, len(state.users), state.entry_count)
        else:
            state, stamp = parse_acl_toml(read_acl_text(seed_path), str(seed_path), version=0), UNSEEDED
            log.info("%s: %d users, %d ACL entries, until the controller answers", seed_path, len(state.users),
                     state.entry_count)
        return ReplicatedAclStore(seed_path, cache_path, state, stamp, controller_addresses)

    # ---- read on every call

    @property
    def state(self) -> AclState:
        return self._state

    @property
    def origin(self) -> str:
        return self.stamp.origin

    @property
    def source(self) -> str:
        return f"controller {';'.join(self.client.addresses)} ({self.stamp})"

    def secret_key(self, access_key: str) -> str | None:
        user = self._state.users.get(access_key)
        return None if user is None else user.password

    def disabled(self, access_key: str) -> bool:
        user = self._state.users.get(access_key)
        return user is not None and user.status is UserStatus.DISABLED

    def enforcers(self) -> list[EnforcerReport]:
        return [EnforcerReport(self.container, self.brokers(), self.stamp)]

    # ---- the sync

    async def start_sync(self, timeout_s: float) -> None:
        """The first sync, before the container serves; the controller may be away (then later)."""
        try:
            async with asyncio.timeout(timeout_s):
                await self.sync()
        except TimeoutError:
            log.warning("no controller answered within %.1f s; %s is enforced until one does", timeout_s, self.stamp)

    async def sync(self) -> bool:
        """The periodic task: True when a new version is enforced."""
        async with self._lock:
            reply = await self._ask(None)
            if reply is None:
                return False
            outcome = self._decide(reply)
            if outcome.step is SyncStep.SEED:
                reply = await self._ask(dump_acl_toml(self._state))
                if reply is None:
                    return False
                if reply.seed_refused:
                    log.warning("the controller did not take this container's users and ACLs: %s", reply.seed_refused)
                outcome = self._decide(reply)
            return await self._carry_out(outcome, AclStamp(reply.origin, reply.version))

    async def _ask(self, seed: str | None) -> Any:
        request = cpb.SyncAclRequest(origin=self.stamp.origin, version=self.stamp.version, container=self.container,
                                     brokers=list(self.brokers()), seed_document=seed or "")
        try:
            reply = await self.client.call("SyncAcl", request)
        except ControllerClientError as exc:
            log.debug("users and ACLs not synced: %s", exc)
            return None
        if reply.status.code != cpb.ControllerStatus.SUCCESS:
            log.debug("users and ACLs not synced: %s %s", cpb.ControllerStatus.Code.Name(reply.status.code),
                      reply.status.remark)
            return None
        return reply

    def _decide(self, reply):
        offered = AclStamp(reply.origin, reply.version)
        return decide_sync(self.stamp, offered, reply.document if reply.HasField("document") else None)

    async def _carry_out(self, outcome, offered: AclStamp) -> bool:
        if outcome.step is SyncStep.ADOPT:
            document = {"origin": offered.origin, "version": offered.version, "document": dump_acl_toml(outcome.state)}
            await asyncio.to_thread(self._write_cache, json.dumps(document))  # persist, then enforce
            self._state, self.stamp = outcome.state, offered
            log.info("users and ACLs: %s: %d users, %d ACL entries", outcome.detail, len(self._state.users),
                     self._state.entry_count)
            return True
        if outcome.step in (SyncStep.BAD, SyncStep.KEEP, SyncStep.SEED) and self._logged != offered:
            self._logged = offered
            log.error("users and ACLs not adopted: %s", outcome.detail)
        return False

    def _write_cache(self, text: str) -> None:
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.cache_path, text)

    # ---- changes: committed by the controller

    async def forward(self, method: str, request: Any) -> Any:
        """``method`` of AclAdmin on the controller's leader; then this container syncs."""
        reply = None
        for attempt in range(2):
            if self.client.leader is None or attempt:
                await self._ask(None)  # follows redirects to the leader
            address = self.client.leader or self.client.addresses[0]
            stub = acl_admin_pb2_grpc.AclAdminStub(self.client.channel(address))
            try:
                reply = await getattr(stub, method)(request, timeout=FORWARD_TIMEOUT_S)
                break
            except grpc.aio.AioRpcError as exc:
                if exc.code() is grpc.StatusCode.UNAVAILABLE and "NOT_LEADER" in (exc.details() or "") and not attempt:
                    self.client.leader = None
                    continue
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and \
                        "NOT_" not in (exc.details() or ""):
                    raise AclUnavailable(f"CONTROLLER_UNAVAILABLE: the controller at {address} holds the users and "
                                         f"ACLs and did not answer ({exc.code().name}); nothing changed") from None
                raise
        await self.sync()
        return reply

    async def close(self) -> None:
        await self.client.close()
