"""Server CPU per unary call through the whole RPC stack: socket, Trio, HTTP/2, dispatch, handler.

    python -m bench.rpc_call [--rates 200,1000,4000] [--duration 5] [--connections 8] [--profile out.txt]

``bench.h2_server`` times the HTTP/2 engine alone (tens of microseconds a call); a heartbeat at a
5,000-node controller costs several times that. This benchmark measures what a call costs the server
process as a whole: a :class:`spur.rpc.server.Server` in its own process (``spur.v1.Controller``
registered, one trivial ``Heartbeat`` handler answering a constant, no authenticator, as a
controller's server is set up otherwise), offered ``--rates`` calls/s open-loop from ``--connections``
connections taken in turn (so, like a fleet's heartbeats, each call at low rates arrives alone).
The client is sans-coroutine (the CLI's HTTP/2 codec under one ``selectors`` loop). Per rate it
prints calls answered and the server's CPU per call from ``/proc/<pid>/stat`` over the window.
``--profile`` records the server with py-spy (``--gil``) at the last rate.
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench.common import print_table
from bench.submitter import grpc_body, request_headers
from spur.rpc.h2_unary import H2Connection, Headers
from spur.rpc.hpack_codec import encode_block
from spur.rpc.proto import spur_pb2 as pb

PATH = "/spur.v1.Controller/Heartbeat"

SERVER = r"""
import sys, trio
from spur.rpc.server import Server
from spur.rpc.proto import spur_pb2 as pb

ANSWER = pb.HeartbeatResponse(known=True, heartbeat_interval_secs=30)

class Servicer:
    async def Heartbeat(self, request, context):
        return ANSWER

async def main():
    server = Server()
    server.add_service(pb.DESCRIPTOR.services_by_name["Controller"], Servicer())
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.serve, "127.0.0.1", 0)
        print(port, flush=True)

trio.run(main)
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.h2 = H2Connection()
        self.open: set[int] = set()
        self.flush()

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)


def offer(port: int, rate: float, duration: float, connections: int) -> int:
    """Offer ``rate`` calls/s for ``duration`` s; returns the calls answered with status 0."""
    block = encode_block(request_headers(f"127.0.0.1:{port}", {}, PATH))
    body = grpc_body(pb.HeartbeatRequest(name="n1").SerializeToString())
    conns = [_Conn(port) for _ in range(connections)]
    selector = selectors.DefaultSelector()
    for conn in conns:
        selector.register(conn.sock, selectors.EVENT_READ, conn)
    answered = issued = 0
    total = int(rate * duration)
    t0 = time.monotonic()
    while answered < total and time.monotonic() < t0 + duration + 10:
        now = time.monotonic()
        while issued < total and t0 + issued / rate <= now:
            conn = conns[issued % connections]
            sid = conn.h2.start_encoded(block)
            conn.h2.send_data(sid, body)
            conn.open.add(sid)
            conn.flush()
            issued += 1
        due = t0 + issued / rate if issued < total else now + 0.05
        for key, _ in selector.select(max(0.0, min(due - time.monotonic(), 0.05))):
            conn = key.data
            data = conn.sock.recv(1 << 20)
            if not data:
                raise SystemExit("bench.rpc_call: the server closed the connection")
            for event in conn.h2.receive_data(data):
                if isinstance(event, Headers) and event.end_stream and event.stream_id in conn.open:
                    conn.open.discard(event.stream_id)
                    conn.h2.forget(event.stream_id)
                    if (b"grpc-status", b"0") in event.headers:
                        answered += 1
            conn.flush()
    for conn in conns:
        conn.sock.close()
    return answered


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="200,1000,4000")
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--profile", default="", help="write py-spy's raw samples of the last rate here")
    args = ap.parse_args(argv)
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        offer(port, 200, 1.0, args.connections)  # warm-up: connections, imports, caches
        rows = []
        rates = [float(r) for r in args.rates.split(",")]
        for i, rate in enumerate(rates):
            spy = None
            if args.profile and i == len(rates) - 1:
                spy = subprocess.Popen(
                    ["py-spy", "record", "--gil", "-r", "500", "-f", "raw", "-o", args.profile,
                     "-p", str(server.pid), "-d", str(int(args.duration))],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
            cpu0 = cpu_seconds(server.pid)
            answered = offer(port, rate, args.duration, args.connections)
            used = cpu_seconds(server.pid) - cpu0
            if spy is not None:
                spy.wait()
            rows.append(
                (
                    f"{rate:g}",
                    str(answered),
                    f"{100 * used / args.duration:.0f}%",
                    f"{1e6 * used / max(answered, 1):.0f}",
                )
            )
        print_table(["offered calls/s", "answered", "server CPU (one core)", "us CPU/call"], rows)
    finally:
        server.kill()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
