"""Regenerate the committed protobuf modules from the .proto schema.

Run ``python -m spur.rpc.proto.generate`` after editing ``spur.proto``. Needs grpcio-tools
(a development dependency); the runtime needs only ``protobuf``.
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PROTOS = [
    "spur.proto",
    "raft.proto",
    "admission.proto",
    "accounting.proto",
    "auth.proto",
    "accounting_db.proto",
    "mesh.proto",
    "inventory.proto",
    "k0s.proto",
    "k8s.proto",
    "config_report.proto",
    "batch.proto",
]


def generate(out_dir: Path = PROTO_DIR) -> None:
    """Compile every schema in PROTOS into ``out_dir`` (``*_pb2.py`` and ``*_pb2.pyi``)."""
    from grpc_tools import protoc

    for name in PROTOS:
        rc = protoc.main(
            [
                "protoc",
                f"-I{PROTO_DIR}",
                f"--python_out={out_dir}",
                f"--pyi_out={out_dir}",
                str(PROTO_DIR / name),
            ]
        )
        if rc != 0:
            raise SystemExit(f"protoc failed on {name} (exit {rc})")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PROTO_DIR)
