"""``ActingClient``: calls other processes' ActingService (``proto/acting.proto``).

Rules: one channel per address, kept until :meth:`close`; every call has a deadline given by
the caller; an unreachable process raises :class:`ActingUnavailable`, a refusal
:class:`ActingRejected` with the gRPC code and the named reason (the details' first word).
"""
from __future__ import annotations

from typing import Any

import grpc

from proto import acting_pb2_grpc as pb_grpc
from services.cluster_auth import internal_channel

_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}


class ActingError(Exception):
    """An ActingService call failed."""


class ActingUnavailable(ActingError):
    pass


class ActingRejected(ActingError):
    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code = code
        self.details = details

    @property
    def reason(self) -> str:
        return self.details.split(":", 1)[0]


class ActingClient:
    def __init__(self, max_message_bytes: int = 64 << 20):
        # a container that comes back is reached within a second (gRPC's default backoff grows to 2 minutes)
        self._options = [("grpc.max_send_message_length", max_message_bytes),
                         ("grpc.max_receive_message_length", max_message_bytes),
                         ("grpc.max_reconnect_backoff_ms", 1000)]
        self._stubs: dict[str, tuple[grpc.aio.Channel, pb_grpc.ActingServiceStub]] = {}

    def _stub(self, address: str) -> pb_grpc.ActingServiceStub:
        if address not in self._stubs:
            channel = internal_channel(address, options=self._options)
            self._stubs[address] = (channel, pb_grpc.ActingServiceStub(channel))
        return self._stubs[address][1]

    async def call(self, address: str, method: str, request: Any, timeout_ms: int) -> Any:
        assert timeout_ms > 0
        try:
            return await getattr(self._stub(address), method)(request, timeout=timeout_ms / 1000)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in _UNREACHABLE:
                raise ActingUnavailable(f"{address}: {exc.code().name} ({exc.details()})") from None
            raise ActingRejected(exc.code(), exc.details() or exc.code().name) from None

    async def close(self) -> None:
        stubs, self._stubs = self._stubs, {}
        for channel, _ in stubs.values():
            await channel.close()
