"""A fake agent that records the credential a controller sends it: a loopback capture, made simple.

``python -m integration.capture_agent PORT OUTFILE`` serves the Agent and AgentBatch services on
127.0.0.1:PORT; every call's ``authorization`` header is appended to OUTFILE (one per line) and the
call is refused with UNAVAILABLE, so nothing is ever launched.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from spur.rpc.proto import batch_pb2, spur_pb2
from spur.rpc.server import Server
from spur.rpc.status import RpcError, StatusCode


def main(port: int, out: Path) -> None:
    async def capture(context) -> None:
        with out.open("a") as f:
            f.write(f"{context.method} {context.metadata.get('authorization', '')}\n")
        raise RpcError(StatusCode.UNAVAILABLE, "capture agent: nothing runs here")

    server = Server(interceptor=capture)
    server.add_service(spur_pb2.DESCRIPTOR.services_by_name["Agent"], object())
    server.add_service(batch_pb2.DESCRIPTOR.services_by_name["AgentBatch"], object())
    trio.run(server.serve, "127.0.0.1", port)


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]))
