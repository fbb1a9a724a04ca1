"""The committed protobuf modules are exactly what the schema generates."""

from __future__ import annotations

from pathlib import Path

import pytest

from spur.rpc.proto import generate

pytest.importorskip("grpc_tools")


@pytest.mark.parametrize("suffix", ["_pb2.py", "_pb2.pyi"])
def test_committed_modules_match_the_schema(tmp_path: Path, suffix: str) -> None:
    generate.generate(tmp_path)
    for proto in generate.PROTOS:
        name = Path(proto).stem + suffix
        committed = (generate.PROTO_DIR / name).read_bytes()
        fresh = (tmp_path / name).read_bytes()
        assert fresh == committed, f"{name} is stale: run `python -m spur.rpc.proto.generate` and commit"
