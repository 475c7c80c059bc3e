"""``ControllerClient``: call the controller group's leader, found from any member.

Rules: addresses are RocketMQ's ``host:port;host:port``.  A call goes to the last known
leader (or the first address); a CONTROLLER_NOT_LEADER reply naming a leader redirects to
it, an unreachable member or an unknown leader moves on to the next address, until
``attempts`` calls have been made or ``deadline_s`` has passed.  The reply of the last
attempt is returned; ``ControllerClientError`` is raised only when nothing answered.
"""
from __future__ import annotations

import asyncio
import time

import grpc

from proto import controller_pb2 as pb
from proto import controller_pb2_grpc as pb_grpc
from services.cluster_auth import internal_channel

NOT_LEADER = pb.ControllerStatus.CONTROLLER_NOT_LEADER


class ControllerClientError(Exception):
    pass


def parse_addresses(text: str) -> list[str]:
    addresses = [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{address!r} is not host:port")
    if not addresses:
        raise ValueError("no controller address given")
    return addresses


class ControllerClient:
    def __init__(self, addresses: list[str], call_timeout_s: float = 6.0, attempts: int = 8,
                 deadline_s: float = 15.0, retry_pause_s: float = 0.2) -> None:
        self.addresses = list(addresses)
        self.call_timeout_s, self.attempts, self.deadline_s = call_timeout_s, attempts, deadline_s
        self.retry_pause_s = retry_pause_s
        self.leader: str | None = None
        self._channels: dict[str, grpc.aio.Channel] = {}

    def channel(self, address: str) -> grpc.aio.Channel:
        """The channel to one member (other services of the controller's port use it too)."""
        if address not in self._channels:
            self._channels[address] = internal_channel(address)
        return self._channels[address]

    def stub(self, address: str) -> pb_grpc.ControllerServiceStub:
        return pb_grpc.ControllerServiceStub(self.channel(address))

    async def call(self, method: str, request):
        """Call ``method`` on the leader, following NOT_LEADER redirects."""
        deadline = time.monotonic() + self.deadline_s
        order = [a for a in [self.leader] if a] + self.addresses
        # A redirect is tried next, once; it is not inserted into `order`: inserting at the
        # end made `cursor % len(order)` wrap to the first member, which was then asked
        # again and again (without a pause) and the new leader never.
        cursor, redirect, last, last_error = 0, None, None, None
        for attempt in range(self.attempts):
            if time.monotonic() >= deadline:
                break
            followed = redirect is not None
            if followed:
                address, redirect = redirect, None
            else:
                address = order[cursor % len(order)]
                cursor += 1
            try:
                reply = await getattr(self.stub(address), method)(
                    request, timeout=min(self.call_timeout_s, max(0.05, deadline - time.monotonic())))
            except grpc.aio.AioRpcError as exc:
                last_error = f"{address}: {exc.code().name} {exc.details() or ''}".strip()
                await asyncio.sleep(self.retry_pause_s if cursor % len(order) == 0 else 0)
                continue
            last = reply
            if reply.status.code != NOT_LEADER:
                self.leader = address
                return reply
            if reply.status.leader_address and reply.status.leader_address != address:
                if followed:  # members disagree on the leader (an election is on): pace the chase
                    await asyncio.sleep(self.retry_pause_s)
                redirect = reply.status.leader_address
            else:
                await asyncio.sleep(self.retry_pause_s)
        if last is not None:
            return last
        raise ControllerClientError(f"no controller answered ({last_error or 'deadline passed'})")

    async def metadata(self) -> pb.GetControllerMetadataResponse:
        """Metadata from the first member that answers; prefers one that knows the leader."""
        best, errors = None, []
        for address in self.addresses:
            try:
                reply = await self.stub(address).GetControllerMetadata(pb.GetControllerMetadataRequest(),
                                                                       timeout=self.call_timeout_s)
            except grpc.aio.AioRpcError as exc:
                errors.append(f"{address}: {exc.code().name}")
                continue
            if reply.leader_id:
                return reply
            best = best or reply
        if best is None:
            raise ControllerClientError("no controller answered (" + "; ".join(errors) + ")")
        return best

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
