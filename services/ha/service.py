"""The HaService servicer: routes each slave stream to the master broker it names.

Rules: the stream's metadata ``relaymq-ha-broker`` names the broker group; a container
hosting no master of that name answers NOT_FOUND ("BROKER_NOT_MASTER: ..."), which the
slave logs and retries (its master may not have started yet, or moved).
"""
from __future__ import annotations

from typing import Callable

import grpc

from proto import ha_pb2_grpc as pb_grpc
from services.ha.converters import BROKER_METADATA_KEY
from services.ha.master import ReplicationMaster


class HaServicer(pb_grpc.HaServiceServicer):
    def __init__(self, masters: Callable[[str], ReplicationMaster | None]):
        self._masters = masters

    async def Replicate(self, request_iterator, context: grpc.aio.ServicerContext):
        metadata = dict(context.invocation_metadata() or ())
        name = metadata.get(BROKER_METADATA_KEY, "")
        master = self._masters(name) if name else None
        if master is None:
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"BROKER_NOT_MASTER: this container hosts no master broker named {name!r}")
        await master.serve(context)


def add_ha_service(server: grpc.aio.Server, masters: Callable[[str], ReplicationMaster | None]) -> None:
    pb_grpc.add_HaServiceServicer_to_server(HaServicer(masters), server)
