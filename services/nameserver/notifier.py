"""Pushing a group's new smallest broker id to its members (``notifyMinBrokerIdChanged``).

Rules (reference 2.3; the decision is ``metadata.member_group.decide_min_id_notice``):
- A push is one call per target member to the ActingService on the internal address the
  member registered with, with a deadline of ``notifyMinBrokerIdTimeoutMillis``.  It is fire
  and forget, as upstream's one-way call: a member that misses it learns the change at its
  next poll (``syncBrokerMemberGroupPeriod``).
- Pushes run as tasks of the nameserver's event loop, at most ``MAX_IN_FLIGHT`` at once (more
  are dropped and logged: the members poll); :meth:`close` cancels the ones still running.
"""
from __future__ import annotations

import asyncio
import logging

from metadata.member_group import MinBrokerIdNotice
from proto import acting_pb2 as pb
from services.acting.client import ActingClient, ActingError

log = logging.getLogger(__name__)
MAX_IN_FLIGHT = 1024


class MinBrokerIdNotifier:
    def __init__(self, timeout_ms: int):
        self.timeout_ms = timeout_ms
        self.client = ActingClient()
        self._tasks: set[asyncio.Task] = set()
        self.sent = 0

    def push(self, notice: MinBrokerIdNotice) -> None:
        log.info("nameserver: %s's smallest live id is now %d (offline: %s); telling %s", notice.broker_name,
                 notice.min_broker_id, notice.offline_broker_address or "-", sorted(notice.targets))
        for broker_id, address in notice.targets.items():
            if len(self._tasks) >= MAX_IN_FLIGHT:
                log.warning("nameserver: %d min-id pushes in flight; %s-%d will learn it by polling",
                            len(self._tasks), notice.broker_name, broker_id)
                continue
            request = pb.ActingNotifyMinBrokerIdRequest(
                cluster=notice.cluster, broker_name=notice.broker_name, broker_id=broker_id,
                min_broker_id=notice.min_broker_id, min_broker_address=notice.min_broker_address,
                offline_broker_address=notice.offline_broker_address)
            task = asyncio.get_running_loop().create_task(self._send(address, request))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, address: str, request: pb.ActingNotifyMinBrokerIdRequest) -> None:
        try:
            await self.client.call(address, "NotifyMinBrokerId", request, self.timeout_ms)
            self.sent += 1
        except ActingError as exc:
            log.debug("nameserver: min-id push to %s-%d at %s failed: %s", request.broker_name, request.broker_id,
                      address, exc)

    async def close(self) -> None:
        tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.client.close()
