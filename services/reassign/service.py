"""The containers' side of a broker move (issue 26, docs/reassign.md): ``ReassignService`` on the
internal port.

Rules:
- ``CheckStore`` (before a move commits): the target sees the source's store and it takes a
  durable atomic rename (store.ownership_files.check_shared_store).
- ``Resume`` (a cancelled move): the source serves the broker again (container.moves).
- ``Release`` (the source): the broker must be served here on shared storage; it stops taking
  calls, is unregistered, and its store is flushed and closed (a clean close: the target's
  scan from the handed end finds nothing more).  Answers the commit log's end and the broker's
  configuration keys.  Asked again for the same move, it answers the same.
- ``Open`` (the target): takes the store over at the move's epoch (``store.takeover``: from
  then on the source can acknowledge nothing), opens it as this container's and serves the
  broker (registered like an added broker).  A takeover the claims refuse (a newer owner)
  is FAILED_PRECONDITION naming the owner.
- The decisions are the runtime's (:class:`Moves`); this only checks requests and maps errors.
"""
from __future__ import annotations

import json
from typing import Protocol

import grpc

from metadata.names import is_valid_group_name
from proto import reassign_pb2 as pb
from proto import reassign_pb2_grpc as pb_grpc

MAX_ENTRY_BYTES = 64 * 1024


class MoveRefused(Exception):
    """A move step this container cannot do; ``code`` is the gRPC status."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code


class Moves(Protocol):
    async def release(self, broker_name: str, epoch: int, target_endpoint: str = "") -> tuple[int, dict]: ...

    async def open(self, broker_name: str, epoch: int, values: dict, handed_end: int | None = None) -> tuple[int, int]: ...

    async def resume(self, broker_name: str, epoch: int, values: dict) -> tuple[int, int]: ...

    async def check_store(self, broker_name: str, values: dict, owner: str) -> None: ...


class ReassignServicer(pb_grpc.ReassignServiceServicer):
    def __init__(self, moves: Moves):
        self._moves = moves

    async def Release(self, request, context):
        await _check(context, request.broker_name, request.epoch)
        try:
            sealed_end, values = await self._moves.release(request.broker_name, request.epoch, request.target_endpoint)
        except MoveRefused as refused:
            await context.abort(refused.code, str(refused))
        return pb.ReleaseResponse(sealed_end=sealed_end, broker_entry_json=json.dumps(values, sort_keys=True))

    async def Open(self, request, context):
        values = await _entry(context, request)
        try:
            handed = request.handed_end if request.HasField("handed_end") and request.handed_end >= 0 else None
            sealed_end, starts_at = await self._moves.open(request.broker_name, request.epoch, values, handed)
        except MoveRefused as refused:
            await context.abort(refused.code, str(refused))
        return pb.OpenResponse(sealed_end=sealed_end, starts_at=starts_at)

    async def Resume(self, request, context):
        if request.broker_entry_json:
            values = await _entry(context, request)
        else:  # a source still serving the broker needs no keys
            await _check(context, request.broker_name, request.epoch)
            values = {}
        try:
            sealed_end, starts_at = await self._moves.resume(request.broker_name, request.epoch, values)
        except MoveRefused as refused:
            await context.abort(refused.code, str(refused))
        return pb.OpenResponse(sealed_end=sealed_end, starts_at=starts_at)

    async def CheckStore(self, request, context):
        request_with_epoch = pb.OpenRequest(broker_name=request.broker_name, epoch=1,
                                            broker_entry_json=request.broker_entry_json)
        values = await _entry(context, request_with_epoch)
        if not request.owner or len(request.owner) > 255:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "owner must be the owning container's endpoint")
        try:
            await self._moves.check_store(request.broker_name, values, request.owner)
        except MoveRefused as refused:
            await context.abort(refused.code, str(refused))
        return pb.CheckStoreResponse()


async def _entry(context, request) -> dict:
    """The broker's keys of an Open or Resume, checked."""
    await _check(context, request.broker_name, request.epoch)
    values = None
    if len(request.broker_entry_json) <= MAX_ENTRY_BYTES:
        try:
            values = json.loads(request.broker_entry_json)
        except ValueError:
            values = None
    if not isinstance(values, dict) or values.get("brokerName") != request.broker_name:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "broker_entry_json must be the broker's keys "
                            f"as a JSON object (at most {MAX_ENTRY_BYTES} bytes) naming broker {request.broker_name}")
    return values


async def _check(context, broker_name: str, epoch: int) -> None:
    if not is_valid_group_name(broker_name):  # a broker name takes the same characters, at most 255
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"broker_name {broker_name[:100]!r} is not a broker name")
    if epoch < 1:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"epoch must be at least 1, got {epoch}")
