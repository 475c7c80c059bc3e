"""``AdminClient``: calls one container's BrokerAdmin service (used by the admin CLI and tools).

Rules: every call has a deadline; an unreachable container raises :class:`AdminUnavailable`,
a refusal raises :class:`AdminRejected` carrying the gRPC code and the named reason.  With
credentials (given, or the caller's :data:`CALLER_CREDENTIALS`, which ``relaymq admin`` sets
from ``--access-key/--secret-key`` or the environment) every call is signed as the RocketMQ
clients sign theirs (``metadata.authentication``: MQv2-HMAC-SHA1 over the current UTC
date-time), which a container with ``authorizationEnabled`` requires.  ``service`` picks the
stub: BrokerAdmin, or AclAdmin for the user and ACL commands.
"""
from __future__ import annotations

import contextvars
import datetime
from dataclasses import dataclass
from typing import Any

import grpc

from metadata.authentication import SIGNED_HEADER, authorization_value
from proto import acl_admin_pb2_grpc as acl_grpc
from proto import admin_pb2_grpc as pb_grpc
from services.cluster_auth import internal_channel

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


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str

    def metadata(self) -> tuple[tuple[str, str], ...]:
        date_time = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        return ((SIGNED_HEADER, date_time), ("authorization", authorization_value(self.access_key, self.secret_key, date_time)))


CALLER_CREDENTIALS: contextvars.ContextVar[Credentials | None] = contextvars.ContextVar("admin_credentials", default=None)


class AdminClient:
    def __init__(self, address: str, timeout_ms: int = 10_000, credentials: Credentials | None = None,
                 service: str = "BrokerAdmin"):
        assert timeout_ms > 0
        assert service in ("BrokerAdmin", "AclAdmin"), service
        self.address = address
        self.timeout_s = timeout_ms / 1000
        self.credentials = credentials or CALLER_CREDENTIALS.get()
        # reconnect within a second once the container is back (gRPC's default backoff grows to 2 minutes);
        # a master's tables (metadata sync: a million offset keys is about 13 MB) within the internal port's limit
        self._channel = internal_channel(address, options=[("grpc.max_reconnect_backoff_ms", 1000),
                                                                    ("grpc.max_receive_message_length", 64 << 20),
                                                                    ("grpc.max_send_message_length", 64 << 20)])
        self._stub = (pb_grpc.BrokerAdminStub if service == "BrokerAdmin" else acl_grpc.AclAdminStub)(self._channel)

    async def call(self, method: str, request: Any) -> Any:
        metadata = self.credentials.metadata() if self.credentials is not None else None
        try:
            return await getattr(self._stub, method)(request, timeout=self.timeout_s, metadata=metadata)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in _UNREACHABLE:
                raise AdminUnavailable(f"container {self.address} is unreachable ({exc.code().name})") from None
            raise AdminRejected(exc.code(), exc.details() or exc.code().name) from None

    async def close(self) -> None:
        await self._channel.close()
