"""``AdminClient``: calls one container's BrokerAdmin service (used by the admin CLI and tools).

Rules: every call has a deadline; an unreachable container raises :class:`AdminUnavailable`,
a refusal raises :class:`AdminRejected` carrying the gRPC code and the named reason.
"""
from __future__ import annotations

from typing import Any

import grpc

from proto import admin_pb2_grpc as pb_grpc

_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}


class AdminError(Exception):
    """An admin call failed."""


class AdminUnavailable(AdminError):
    pass


class AdminRejected(AdminError):
    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code = code
        self.details = details


class AdminClient:
    def __init__(self, address: str, timeout_ms: int = 10_000):
        assert timeout_ms > 0
        self.address = address
        self.timeout_s = timeout_ms / 1000
        # reconnect within a second once the container is back (gRPC's default backoff grows to 2 minutes);
        # a master's tables (metadata sync: a million offset keys is about 13 MB) within the internal port's limit
        self._channel = grpc.aio.insecure_channel(address, options=[("grpc.max_reconnect_backoff_ms", 1000),
                                                                    ("grpc.max_receive_message_length", 64 << 20),
                                                                    ("grpc.max_send_message_length", 64 << 20)])
        self._stub = pb_grpc.BrokerAdminStub(self._channel)

    async def call(self, method: str, request: Any) -> Any:
        try:
            return await getattr(self._stub, method)(request, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in _UNREACHABLE:
                raise AdminUnavailable(f"container {self.address} is unreachable ({exc.code().name})") from None
            raise AdminRejected(exc.code(), exc.details() or exc.code().name) from None

    async def close(self) -> None:
        await self._channel.close()
