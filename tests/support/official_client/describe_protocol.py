"""Print a JSON description of a protocol: message fields (number, type, repeated, presence,
type name), enum values and RPC shapes.

``python describe_protocol.py theirs`` describes the official client's generated modules;
``python describe_protocol.py ours`` (run from the repository root) describes ours.  The two
must never be imported in one process (duplicate symbols), hence two runs.
"""
from __future__ import annotations

import json
import os
import sys


def _field(f) -> list:
    type_name = f.message_type.full_name if f.message_type else f.enum_type.full_name if f.enum_type else ""
    return [f.number, f.type, bool(f.is_repeated), bool(f.has_presence), type_name]


def describe(files) -> dict:
    out: dict = {}
    for file in files:
        stack = list(file.message_types_by_name.values())
        while stack:
            message = stack.pop()
            stack.extend(message.nested_types)
            out[message.full_name] = {f.name: _field(f) for f in message.fields}
            for enum in message.enum_types:
                out[enum.full_name] = sorted(v.number for v in enum.values)
        for enum in file.enum_types_by_name.values():
            out[enum.full_name] = sorted(v.number for v in enum.values)
        for service in file.services_by_name.values():
            out[service.full_name] = {m.name: [m.input_type.full_name, m.output_type.full_name,
                                               bool(m.client_streaming), bool(m.server_streaming)] for m in service.methods}
    return out


def main() -> int:
    if sys.argv[1] == "theirs":
        from rocketmq.grpc_protocol import definition_pb2, service_pb2
        files = [definition_pb2.DESCRIPTOR, service_pb2.DESCRIPTOR]
    else:
        sys.path.insert(0, os.getcwd())
        from proto import messaging_definition_pb2, messaging_service_pb2
        files = [messaging_definition_pb2.DESCRIPTOR, messaging_service_pb2.DESCRIPTOR]
    print(json.dumps(describe(files), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
