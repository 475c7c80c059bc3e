"""The standard gRPC health service, complete.

grpcio-health-checking's asyncio servicer answers Check and Watch but not List, which its
generated base class registers anyway: a List call raised NotImplementedError, a logged
traceback and UNKNOWN.  :class:`HealthService` answers List from the statuses it was set.
"""
from __future__ import annotations

from grpc_health.v1 import health, health_pb2


class HealthService(health.aio.HealthServicer):
    def __init__(self) -> None:
        super().__init__()
        self._statuses: dict[str, int] = {"": health_pb2.HealthCheckResponse.SERVING}

    async def set(self, service: str, status) -> None:
        self._statuses[service] = status
        await super().set(service, status)

    async def List(self, request, context):
        return health_pb2.HealthListResponse(
            statuses={name: health_pb2.HealthCheckResponse(status=status) for name, status in self._statuses.items()})
