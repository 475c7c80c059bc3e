"""Generate the Python modules for every ``proto/*.proto`` file with grpcio-tools.

Run from anywhere: ``python -m proto.generate``.  The generated ``*_pb2.py``,
``*_pb2_grpc.py`` and ``*_pb2.pyi`` files are committed; ``tests/unit/test_proto_fresh.py``
fails when they differ from what this script produces now.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
ROOT = PROTO_DIR.parent


def generate(out_root: Path) -> list[Path]:
    """Compile every proto file into ``out_root/proto/``; return the generated files."""
    import grpc_tools
    from grpc_tools import protoc

    sources = sorted(PROTO_DIR.glob("*.proto"))
    include = Path(grpc_tools.__file__).parent / "_proto"
    (out_root / "proto").mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{ROOT}",
        f"-I{include}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *[str(source.relative_to(ROOT)) for source in sources],
    ]
    if sources and protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted(p for p in (out_root / "proto").iterdir() if p.name.endswith(("_pb2.py", "_pb2_grpc.py", "_pb2.pyi")))


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        produced = generate(Path(tmp))
        for path in produced:
            (PROTO_DIR / path.name).write_bytes(path.read_bytes())
    print(f"generated {len(produced)} files in {PROTO_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
