"""Raw-byte calls to any of our gRPC services, and what a bad request must be answered with.

A :class:`Method` is one RPC, described from its proto descriptor: its path, request type,
whether the request or the response streams, and a well-formed request whose truncations
make good garbage.  :func:`call` sends bytes as they are (no serializer);
:func:`check_answer` asserts the rules of ``services.request_guard``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message as pb_message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st

CLIENT_METADATA = (("x-mq-client-id", "fuzz@bad-bytes"), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "GRPC_V2"))
BAD_REQUEST = 40000


@dataclass(frozen=True)
class Method:
    path: str
    request: type
    response: type
    request_streaming: bool
    response_streaming: bool
    example: bytes  # a well-formed request

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[1]


def filled(message_class: type, depth: int = 0) -> pb_message.Message:
    """A message with every string, bytes, number and nested field set (names that exist nowhere)."""
    message = message_class()
    for field in message_class.DESCRIPTOR.fields:
        if field.containing_oneof is not None and message.WhichOneof(field.containing_oneof.name):
            continue
        value: Any = None
        if field.type == field.TYPE_STRING:
            value = f"nosuch-{field.name}"
        elif field.type == field.TYPE_BYTES:
            value = b"\x01\x02nosuch"
        elif field.type in (field.TYPE_INT32, field.TYPE_INT64, field.TYPE_UINT32, field.TYPE_UINT64):
            value = 7
        elif field.type == field.TYPE_MESSAGE and depth < 2 and not field.message_type.GetOptions().map_entry:
            nested = filled(GetMessageClass(field.message_type), depth + 1)
            target = getattr(message, field.name)
            (target.add() if field.is_repeated else target).CopyFrom(nested)
            continue
        if value is None:
            continue
        if field.is_repeated:
            getattr(message, field.name).append(value)
        else:
            setattr(message, field.name, value)
    return message


def methods_of(module, service: str, examples: dict[str, pb_message.Message] | None = None) -> list[Method]:
    """Every method of ``service`` in the generated ``module`` (``*_pb2``)."""
    found = []
    descriptor = module.DESCRIPTOR.services_by_name[service]
    for method in descriptor.methods:
        request, response = GetMessageClass(method.input_type), GetMessageClass(method.output_type)
        example = (examples or {}).get(method.name) or filled(request)
        found.append(Method(f"/{descriptor.full_name}/{method.name}", request, response, method.client_streaming,
                            method.server_streaming, example.SerializeToString()))
    return found


def payloads(method: Method):
    """Arbitrary bytes, truncations of a well-formed request, and junk after one."""
    example = method.example
    return st.one_of(st.binary(max_size=200),
                     st.integers(0, max(0, len(example) - 1)).map(lambda n: example[:n]),
                     st.binary(min_size=1, max_size=12).map(lambda junk: example + junk),
                     st.binary(min_size=1, max_size=12).map(lambda junk: junk + example))


def parses(method: Method, raw: bytes) -> bool:
    try:
        method.request.FromString(raw)
    except Exception:  # noqa: BLE001 - any failure to parse
        return False
    return True


@dataclass
class Outcome:
    code: grpc.StatusCode
    details: str
    responses: list[bytes]


def call(channel: grpc.Channel, method: Method, raw: bytes, timeout_s: float = 3.0, metadata=()) -> Outcome:
    kind = (method.request_streaming, method.response_streaming)
    try:
        if kind == (False, False):
            responses = [channel.unary_unary(method.path)(raw, timeout=timeout_s, metadata=metadata)]
        elif kind == (False, True):
            responses = list(channel.unary_stream(method.path)(raw, timeout=timeout_s, metadata=metadata))
        elif kind == (True, False):
            responses = [channel.stream_unary(method.path)(iter([raw]), timeout=timeout_s, metadata=metadata)]
        else:
            responses = list(channel.stream_stream(method.path)(iter([raw]), timeout=timeout_s, metadata=metadata))
    except grpc.RpcError as error:
        return Outcome(error.code(), error.details() or "", [])
    return Outcome(grpc.StatusCode.OK, "", responses)


def check_answer(method: Method, raw: bytes, outcome: Outcome, status_in_response: bool = False) -> None:
    """What a request that does (not) parse must get; ``status_in_response``: the client protocol."""
    assert outcome.code is not grpc.StatusCode.UNKNOWN, (method.path, raw, outcome)
    if parses(method, raw):
        return  # the servicer answered, whatever it said; the test checks no traceback was logged
    type_name = method.request.DESCRIPTOR.full_name
    if status_in_response and not method.request_streaming:
        assert outcome.code is grpc.StatusCode.OK and outcome.responses, (method.path, outcome)
        status = method.response.FromString(outcome.responses[0]).status
        assert status.code == BAD_REQUEST, (method.path, status)
        assert status.message.startswith(f"{method.name}: the request is not a valid {type_name}"), status.message
        return
    assert outcome.code is grpc.StatusCode.INVALID_ARGUMENT, (method.path, raw, outcome)
    assert outcome.details.startswith(f"{method.name}: the request is not a valid {type_name}"), outcome.details
