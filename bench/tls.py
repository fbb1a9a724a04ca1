"""TLS cost on Spur's gRPC transport: TLS vs plaintext in one run (compare ratios, not absolute figures).

1. CPU per unary call over a reused connection, client and server in one process (``time.process_time``,
   exact; 12 alternating rounds of 400 calls on two open connections, plain and TLS: the headline
   figure). Then the same split by side: a real ``spur.rpc.server.Server`` in its own process
   (plaintext on one port, ``[tls] required`` on another), the Trio client ``open_channel`` in this one;
   sequential calls, two payloads (a small SubmitJob, a GetJobs answer of 100 jobs, ~20 KB). Rounds
   alternate plain/TLS; the figures are medians of the rounds. Server CPU from /proc, client CPU from
   ``time.process_time``.
2. Handshake cost: a blocking client connects, handshakes (full, or resuming the previous session),
   reads the server's HTTP/2 preface and closes; CPU per connection on both sides, minus the same for a
   plaintext connection.

Usage: ``.venv/bin/python -m bench.tls [--calls 2000] [--rounds 5] [--handshakes 300] [--csv FILE]``
(default CSV: bench/results/tls.csv). The fleet comparison (5,000 simulated nodes with and without TLS)
is ``bench.fleet --tls``.
"""

from __future__ import annotations

import argparse
import csv
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import median, print_table, proc_cpu_secs

SUBMIT = "/spur.v1.Controller/SubmitJob"
GETJOBS = "/spur.v1.Controller/GetJobs"


# ---------------------------------------------------------------------- the server process


def serve(pki: Path, port_file: Path) -> None:
    """Run two servers (plaintext, TLS required) until killed; write their ports to ``port_file``."""
    import trio

    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.server import Server
    from spur.rpc.tls import TlsContexts, TlsSettings

    jobs = _jobs()
    answer = pb.GetJobsResponse(jobs=jobs)

    class Controller:
        async def SubmitJob(self, request: Any, context: Any) -> Any:
            return pb.SubmitJobResponse(job_id=len(request.spec.script))

        async def GetJobs(self, request: Any, context: Any) -> Any:
            return answer

    tls = TlsContexts(
        TlsSettings(
            mode="required", cert_file=pki / "node.crt", key_file=pki / "node.key", ca_file=pki / "ca.crt"
        )
    )

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            ports = []
            for server_tls in (None, tls.server()):
                server = Server()
                server.add_service(pb.DESCRIPTOR.services_by_name["Controller"], Controller())
                ports.append(await nursery.start(partial(server.serve, tls=server_tls), "127.0.0.1", 0))
            port_file.write_text(" ".join(map(str, ports)))

    trio.run(main)


# ---------------------------------------------------------------------- measurements


def inprocess(pki: Path, method: str, rounds: int, calls: int) -> tuple[float, float]:
    """(plain, TLS) median CPU us per call, client and server in this process on loopback."""
    import statistics

    import trio

    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.server import Server
    from spur.rpc.tls import TlsContexts, TlsSettings, user_client_tls

    tls = TlsContexts(
        TlsSettings(
            mode="required", cert_file=pki / "node.crt", key_file=pki / "node.key", ca_file=pki / "ca.crt"
        )
    )
    user = user_client_tls(TlsSettings(mode="required", ca_file=pki / "ca.crt"))
    answer = pb.GetJobsResponse(jobs=_jobs())

    class Controller:
        async def SubmitJob(self, request: Any, context: Any) -> Any:
            return pb.SubmitJobResponse(job_id=len(request.spec.script))

        async def GetJobs(self, request: Any, context: Any) -> Any:
            return answer

    if method == SUBMIT:
        request, response = (
            pb.SubmitJobRequest(spec=pb.JobSpec(script="#!/bin/sh\ntrue\n")),
            pb.SubmitJobResponse,
        )
    else:
        request, response = pb.GetJobsRequest(), pb.GetJobsResponse

    async def main() -> tuple[float, float]:
        got: dict[str, list[float]] = {"plain": [], "tls": []}
        async with trio.open_nursery() as nursery:
            ports = []
            for server_tls in (None, tls.server()):
                server = Server()
                server.add_service(pb.DESCRIPTOR.services_by_name["Controller"], Controller())
                ports.append(await nursery.start(partial(server.serve, tls=server_tls), "127.0.0.1", 0))
            async with (
                open_channel(f"127.0.0.1:{ports[0]}") as plain,
                open_channel(f"127.0.0.1:{ports[1]}", tls=user) as encrypted,
            ):
                for ch in (plain, encrypted):
                    for _ in range(200):
                        await ch.unary(method, request, response, timeout=10)
                for _ in range(rounds):
                    for name, ch in (("plain", plain), ("tls", encrypted)):
                        t0 = time.process_time()
                        for _ in range(calls):
                            await ch.unary(method, request, response, timeout=10)
                        got[name].append((time.process_time() - t0) / calls * 1e6)
            nursery.cancel_scope.cancel()
        return statistics.median(got["plain"]), statistics.median(got["tls"])

    return trio.run(main)


def _jobs() -> list[Any]:
    from spur.rpc.proto import spur_pb2 as pb

    return [
        pb.JobInfo(job_id=i, user="alice", state="RUNNING", nodelist="n[001-004]", partition="batch",
                   spec=pb.JobSpec(name=f"job-{i}", script="#!/bin/sh\necho hello\n" * 4))
        for i in range(100)
    ]  # fmt: skip


def unary_round(port: int, tls: Any, method: str, calls: int, server_pid: int) -> tuple[float, float, float]:
    """(server CPU us/call, client CPU us/call, wall us/call) for ``calls`` sequential calls on one
    connection (after 100 warm-up calls)."""
    import trio

    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb

    if method == SUBMIT:
        request, response = (
            pb.SubmitJobRequest(spec=pb.JobSpec(script="#!/bin/sh\ntrue\n")),
            pb.SubmitJobResponse,
        )
    else:
        request, response = pb.GetJobsRequest(), pb.GetJobsResponse

    async def run() -> tuple[float, float, float]:
        async with open_channel(f"127.0.0.1:{port}", tls=tls) as ch:
            for _ in range(100):
                await ch.unary(method, request, response, timeout=10)
            s0, c0, w0 = proc_cpu_secs(server_pid), time.process_time(), time.perf_counter()
            for _ in range(calls):
                await ch.unary(method, request, response, timeout=10)
            s1, c1, w1 = proc_cpu_secs(server_pid), time.process_time(), time.perf_counter()
        return ((s1 - s0) / calls * 1e6, (c1 - c0) / calls * 1e6, (w1 - w0) / calls * 1e6)

    return trio.run(run)


def handshake_round(
    port: int, ctx: ssl.SSLContext | None, n: int, resume: bool, server_pid: int
) -> tuple[float, float, bool]:
    """(server CPU us/connection, client CPU us/connection, every handshake resumed?) for ``n``
    connections that each read the server's HTTP/2 preface and close."""
    session = None
    if ctx is not None and resume:  # a first connection to get a session ticket
        session = _connect(port, ctx, None)[1]
    reused = True
    s0, c0 = proc_cpu_secs(server_pid), time.process_time()
    for _ in range(n):
        was_reused, new = _connect(port, ctx, session if resume else None)
        reused = reused and was_reused
        if resume:
            session = new
    s1, c1 = proc_cpu_secs(server_pid), time.process_time()
    return ((s1 - s0) / n * 1e6, (c1 - c0) / n * 1e6, reused)


def _connect(port: int, ctx: ssl.SSLContext | None, session: Any) -> tuple[bool, Any]:
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    if ctx is None:
        raw.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        raw.recv(4096)
        raw.close()
        return False, None
    s = ctx.wrap_socket(raw, server_hostname="localhost", session=session)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
    s.recv(4096)  # the server's SETTINGS (and, with TLS 1.3, the session tickets before it)
    reused, new = s.session_reused, s.session
    s.close()
    return reused, new


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000, help="calls per round and mode")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--handshakes", type=int, default=300, help="connections per handshake round")
    ap.add_argument("--csv", default="bench/results/tls.csv")
    ap.add_argument("--serve", nargs=2, metavar=("PKI", "PORTFILE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve(Path(args.serve[0]), Path(args.serve[1]))
        return 0

    from spur.rpc.certs import ensure_ca, issue
    from spur.rpc.tls import ClientTLS, TlsSettings, client_context

    with tempfile.TemporaryDirectory(prefix="spur-bench-tls-") as tmp:
        pki = Path(tmp) / "pki"
        ensure_ca(pki, cluster_name="bench")
        issue(pki, "node", dns=["localhost"], ips=["127.0.0.1"])
        port_file = Path(tmp) / "ports"
        server = subprocess.Popen(
            [sys.executable, "-m", "bench.tls", "--serve", str(pki), str(port_file)], env=dict(os.environ)
        )
        try:
            deadline = time.monotonic() + 30
            while not (port_file.exists() and port_file.read_text()):
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the benchmark server did not start")
                time.sleep(0.05)
            plain_port, tls_port = map(int, port_file.read_text().split())
            ctx = client_context(TlsSettings(mode="required", ca_file=pki / "ca.crt"), present_cert=False)
            rows: list[list[Any]] = []
            csv_rows: list[dict[str, Any]] = []
            for label, method in (("SubmitJob (small)", SUBMIT), ("GetJobs (100 jobs)", GETJOBS)):
                p, t = inprocess(pki, method, 12, max(100, args.calls // 5))
                rows.append([label, p, t, t / p])
                csv_rows.append({"test": label, "metric": "client+server CPU us/call (one process)",
                                 "plain": p, "tls": t, "ratio": t / p})  # fmt: skip
            print_table(["call", "plaintext", "TLS", "TLS/plain"], rows,
                        title="client + server CPU us per call, one process, reused connections (medians of 12 rounds)")  # fmt: skip
            rows = []
            for label, method in (("SubmitJob (small)", SUBMIT), ("GetJobs (100 jobs)", GETJOBS)):
                got: dict[str, list[tuple[float, float, float]]] = {"plain": [], "tls": []}
                for _ in range(args.rounds):
                    got["plain"].append(unary_round(plain_port, None, method, args.calls, server.pid))
                    got["tls"].append(
                        unary_round(tls_port, ClientTLS(lambda: ctx), method, args.calls, server.pid)
                    )
                med = {m: [median([r[i] for r in got[m]]) for i in range(3)] for m in got}
                for i, what in enumerate(("server CPU us/call", "client CPU us/call", "wall us/call")):
                    p, t = med["plain"][i], med["tls"][i]
                    rows.append([label, what, p, t, t / p if p else float("nan")])
                    csv_rows.append(
                        {"test": label, "metric": what, "plain": p, "tls": t, "ratio": t / p if p else ""}
                    )
            print_table(["call", "metric", "plaintext", "TLS", "TLS/plain"], rows,
                        title=f"unary calls on one reused connection ({args.calls} calls x {args.rounds} rounds, medians)")  # fmt: skip

            hs: dict[str, list[tuple[float, float, bool]]] = {"plain": [], "full": [], "resumed": []}
            for _ in range(args.rounds):
                hs["plain"].append(handshake_round(plain_port, None, args.handshakes, False, server.pid))
                hs["full"].append(handshake_round(tls_port, ctx, args.handshakes, False, server.pid))
                hs["resumed"].append(handshake_round(tls_port, ctx, args.handshakes, True, server.pid))
            base = [median([r[i] for r in hs["plain"]]) for i in range(2)]
            rows = []
            for kind in ("plain", "full", "resumed"):
                s, c = (median([r[i] for r in hs[kind]]) for i in range(2))
                reused = all(r[2] for r in hs[kind]) if kind == "resumed" else ""
                rows.append([kind, s, c, s - base[0], c - base[1], reused])
                csv_rows.append({"test": f"connection ({kind})", "metric": "server/client CPU us",
                                 "plain": base[0], "tls": s, "ratio": f"client {c:.0f}"})  # fmt: skip
            print_table(["connection", "server CPU us", "client CPU us", "server extra", "client extra", "resumed"], rows,
                        title=f"connection set-up ({args.handshakes} connections x {args.rounds} rounds, medians)")  # fmt: skip
        finally:
            server.kill()
            server.wait()
    if args.csv:
        out = Path(args.csv)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["test", "metric", "plain", "tls", "ratio"])
            writer.writeheader()
            writer.writerows(csv_rows)
        print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
