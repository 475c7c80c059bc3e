"""The pre-online driver: carries out ``ha.role.pre_online``'s actions for one returning master.

Rules (the decisions are the core's; this only does the I/O, in the core's order):
- Created with the broker when :func:`ha.role.pre_online.pre_online_needed` says so, before the
  broker starts (so no special service starts), and started once the container serves (its
  replication listener and internal port are up).  Until it is done the container does not
  register the broker or heartbeat for it, and the broker holds pop calls.
- The member set comes from the nameserver (``GetBrokerMemberGroup``); the offer is the
  member's container's ``ActingService.OfferMaster``; the pull is ``ActingService.HandOver``
  (the member stops acting, then answers its versioned consumer offsets, timer checkpoint,
  transaction checkpoint and pop state); the adoption is
  ``services.broker.acting_mode.adopt_handover`` (the one rule, ``metadata.pre_online_merge``),
  which writes each adopted table before it is used.  Each call's deadline is
  ``preOnlineSyncTimeoutMillis``.
- Connections: the replication master's set of slaves in TRANSFER, read at every step and
  whenever it changes (its listener wakes this driver); deadlines come from the core.
- Online: the driver marks the group's state as taken back (``handoverDone``) and calls
  ``on_online`` (the container registers the broker, starts its member watch and its special
  services).  ``status()`` is what ``relaymq admin ha-status --json`` shows as ``preOnline``.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from ha.role.pre_online import Action, Member, OnlineReason, PreOnline, Settings
from proto import acting_pb2 as pb
from services.acting.client import ActingClient, ActingError, ActingUnavailable
from services.acting.handover import hand_over_from_proto
from services.broker.acting_mode import adopt_handover

log = logging.getLogger(__name__)

OnOnline = Callable[[OnlineReason], Awaitable[None]]


class PreOnlineDriver:
    def __init__(self, broker, replica, clock):
        config = broker.config
        self.broker, self.replica, self.clock = broker, replica, clock
        self.settings = Settings(config.broker_id, config.pre_online_transfer_timeout_ms,
                                 config.pre_online_retry_interval_ms, config.pre_online_max_attempts)
        self.timeout_ms = config.pre_online_sync_timeout_ms
        self.core = PreOnline(self.settings, clock.monotonic_ms())
        self._changed = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._pulled = None
        self.adoptions: dict[int, dict] = {}  # member id -> item -> "adopt"/"keep" (status, tests)

    @property
    def done(self) -> bool:
        return self.core.done

    def status(self) -> dict:
        return {**self.core.status(self.clock.monotonic_ms()), "adoptions": {str(k): v for k, v in self.adoptions.items()}}

    def start(self, nameserver, client: ActingClient, own_address: str, on_online: OnOnline) -> None:
        """``nameserver``: a NameserverClient; ``own_address``: this container's internal address."""
        assert self._task is None
        self.core = PreOnline(self.settings, self.clock.monotonic_ms())
        self._task = asyncio.get_running_loop().create_task(
            self._run(nameserver, client, own_address, on_online), name=f"pre-online {self.broker.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self, nameserver, client: ActingClient, own_address: str, on_online: OnOnline) -> None:
        master = self.replica.master
        master.add_transfer_listener(self._changed.set)
        name = f"{self.broker.name}-{self.broker.config.broker_id}"
        log.info("%s: pre-online: taking the group's tables back from its slaves before going online", name)
        try:
            action = self.core.start(self.clock.monotonic_ms())
            while action.online is None:
                try:
                    action = await self._carry_out(action, nameserver, client, own_address)
                except Exception as exc:  # a bug or a full disk: this attempt fails, the next one retries
                    log.exception("%s: pre-online step %s failed", name, self.core.step.value)
                    action = self.core.driver_failed(f"{type(exc).__name__}: {exc}", self.clock.monotonic_ms())
        finally:
            master.remove_transfer_listener(self._changed.set)
        status = self.core.status(self.clock.monotonic_ms())
        log.info("%s: pre-online done after %d ms (%s, attempt %d, synced %s%s)", name, status["onlineAfterMs"],
                 action.online.value, status["attempt"], status["synced"],
                 f"; last failure: {status['lastFailure']}" if status["lastFailure"] else "")
        self.broker.acting.handover_done = True
        self.broker.went_online()
        await on_online(action.online)

    async def _carry_out(self, action: Action, nameserver, client: ActingClient, own_address: str) -> Action:
        core, now = self.core, self.clock.monotonic_ms
        if action.fetch_members:
            try:
                group = await nameserver.broker_member_group(self.broker.name, self.broker.cluster)
            except Exception as exc:  # the nameserver is needed to go online: the core retries
                return core.members_unavailable(str(exc), now())
            core.connections(self.replica.master.transferring_slaves(), now())
            return core.members_fetched(dict(group.members), now())
        if action.offer is not None:
            return await self._offer(action.offer, client, own_address)
        if action.pull is not None:
            return await self._pull(action.pull, client)
        if action.adopt is not None:
            return self._adopt(action.adopt)
        return await self._wait()

    async def _offer(self, member: Member, client: ActingClient, own_address: str) -> Action:
        request = pb.ActingOfferMasterRequest(broker_name=self.broker.name, broker_id=member.broker_id,
                                              master_address=own_address, master_broker_id=self.broker.config.broker_id)
        try:
            await client.call(member.address, "OfferMaster", request, self.timeout_ms)
        except ActingError as exc:  # unreachable, or it is no slave of ours there: not a peer to sync
            return self.core.offer_answered(member.broker_id, False, self.clock.monotonic_ms(), str(exc))
        self.core.connections(self.replica.master.transferring_slaves(), self.clock.monotonic_ms())
        return self.core.offer_answered(member.broker_id, True, self.clock.monotonic_ms())

    async def _pull(self, member: Member, client: ActingClient) -> Action:
        request = pb.ActingHandOverRequest(broker_name=self.broker.name, broker_id=member.broker_id)
        try:
            reply = await client.call(member.address, "HandOver", request, self.timeout_ms)
            self._pulled = await asyncio.to_thread(hand_over_from_proto, reply)  # a million keys: off the loop
            ok, detail = True, ""
        except (ActingError, ValueError) as exc:
            ok, detail = False, ("unreachable: " if isinstance(exc, ActingUnavailable) else "") + str(exc)
        self.core.connections(self.replica.master.transferring_slaves(), self.clock.monotonic_ms())
        return self.core.pulled(member.broker_id, ok, self.clock.monotonic_ms(), detail)

    def _adopt(self, member: Member) -> Action:
        state, self._pulled = self._pulled, None
        try:
            decisions = adopt_handover(self.broker, state)
        except (ValueError, KeyError, TypeError) as exc:  # a malformed answer: nothing of it was used
            return self.core.adopted(member.broker_id, False, self.clock.monotonic_ms(), f"malformed tables: {exc}")
        self.adoptions[member.broker_id] = {item: type(d).__name__.lower() for item, d in decisions.items()}
        log.info("%s: pre-online took member %d's tables (%s): %s", self.broker.name, member.broker_id,
                 "acted" if state.acted else "did not act",
                 ", ".join(f"{item} {type(d).__name__.lower()} {d.remote_version.to_json()}" for item, d in decisions.items()))
        return self.core.adopted(member.broker_id, True, self.clock.monotonic_ms())

    async def _wait(self) -> Action:
        """Until the core's deadline or a change of the slaves in TRANSFER, whichever is first."""
        deadline = self.core.next_deadline_ms()
        loop = asyncio.get_running_loop()
        timer = None
        if deadline is not None:
            timer = loop.call_later(max(0.0, (deadline - self.clock.monotonic_ms()) / 1000), self._changed.set)
        try:
            await self._changed.wait()
        finally:
            if timer is not None:
                timer.cancel()
        self._changed.clear()
        action = self.core.connections(self.replica.master.transferring_slaves(), self.clock.monotonic_ms())
        return action if action != Action() else self.core.tick(self.clock.monotonic_ms())
