"""A broker's view of its group's live members, kept fresh for the special-service switch.

Rules (reference 2.4; the decision is ``ha.acting.special_services``'s):
- Every ``syncBrokerMemberGroupPeriod`` the broker asks the nameserver for its group's member
  set (``GetBrokerMemberGroup``) and records the smallest live id with the time it learned it;
  then the broker re-decides its special services (:meth:`Broker.apply_role`), so a change of
  its replication connection is also acted on within one period.
- A push from the nameserver (``NotifyMinBrokerId``) records the new smallest id at once,
  re-decides, and polls now for the member set itself (the push carries only the minimum).
- A poll that fails leaves the last view as it is: it grows old, and an acting slave whose
  view is older than ``memberGroupStaleMillis`` stops acting (it may have missed its
  master's return).  Failures are logged when they start and when they end.
"""
from __future__ import annotations

import asyncio
import logging
from types import MappingProxyType
from typing import Callable, Mapping

from ha.acting.special_services import MemberView
from scheduler.periodic import PeriodicTasks

log = logging.getLogger(__name__)


class MemberWatch:
    def __init__(self, broker, nameserver: Callable[[], object | None], clock):
        """``nameserver()``: the container's NameserverClient, None until it has one."""
        self.broker, self.nameserver, self.clock = broker, nameserver, clock
        self.tasks = PeriodicTasks(f"acting {broker.name}-{broker.config.broker_id}")
        self._failing = False
        self._soon: asyncio.Task | None = None

    def start(self) -> None:
        period = self.broker.config.sync_broker_member_group_period_ms
        self.tasks.declare("member-group", period, self.poll, initial_delay_ms=0)
        self.tasks.start()

    async def stop(self) -> None:
        await self.tasks.stop()
        if self._soon is not None:
            self._soon.cancel()
            await asyncio.gather(self._soon, return_exceptions=True)

    def learn(self, members: Mapping[int, str]) -> None:
        state = self.broker.acting
        state.members = MappingProxyType(dict(members))
        state.view = MemberView(min(members) if members else None, self.clock.now_ms())

    async def poll(self) -> None:
        client = self.nameserver()
        if client is not None:
            try:
                group = await client.broker_member_group(self.broker.name, self.broker.cluster)
            except Exception as exc:  # the view ages; the switch stops an acting slave when it is stale
                if not self._failing:
                    log.warning("%s-%d: member set unavailable (%s); acting on the last one while it is fresh",
                                self.broker.name, self.broker.config.broker_id, exc)
                self._failing = True
            else:
                if self._failing:
                    log.info("%s-%d: member set available again", self.broker.name, self.broker.config.broker_id)
                self._failing = False
                self.learn(group.members)
        await self.broker.apply_role()

    async def notified(self, min_broker_id: int, offline_address: str) -> None:
        log.info("%s-%d: the nameserver says the group's smallest live id is %d%s", self.broker.name,
                 self.broker.config.broker_id, min_broker_id, f" ({offline_address} went offline)" if offline_address else "")
        self.broker.acting.view = MemberView(min_broker_id, self.clock.now_ms())
        await self.broker.apply_role()
        if self._soon is None or self._soon.done():
            self._soon = asyncio.get_running_loop().create_task(self.poll())
