"""The committed generated code of our protos is what ``proto.generate`` produces now."""
from __future__ import annotations


from proto.generate import PROTO_DIR, generate

OURS = tuple(sorted(p.stem for p in PROTO_DIR.glob("*.proto")))


def test_committed_generated_code_of_every_proto_is_fresh(tmp_path):
    assert {"admin", "ha", "nameserver", "controller", "messaging_service"} <= set(OURS)
    produced = {p.name: p for p in generate(tmp_path)}
    for stem in OURS:
        for suffix in ("_pb2.py", "_pb2_grpc.py", "_pb2.pyi"):
            name = stem + suffix
            assert name in produced, f"{name} was not generated"
            committed = PROTO_DIR / name
            assert committed.exists(), f"{name} is not committed; run python -m proto.generate"
            assert committed.read_bytes() == produced[name].read_bytes(), f"{name} is stale; run python -m proto.generate"
