"""Submission throughput of one controller over the gRPC API.

    python -m bench.submit_throughput [--jobs 2000] [--clients 1,8,64] [--repeat 3] [--no-fsync]

Starts a real spurctld (no agents, so jobs stay pending), then for each client count submits
``--jobs`` jobs from that many concurrent clients (each its own connection) and prints jobs/s,
median over ``--repeat`` runs. Figures only; nothing here asserts.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from integration.harness import BIN, free_port, wait_for
from spur.auth.identity import identity_metadata
from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.stub import controller_stub

SPEC = pb.JobSpec(name="bench", script="#!/bin/sh\ntrue\n", work_dir="/tmp")


async def submit_all(address: str, jobs: int, clients: int) -> float:
    md = identity_metadata()
    per_client = [jobs // clients + (1 if i < jobs % clients else 0) for i in range(clients)]

    async def client(n: int) -> None:
        async with open_channel(address, metadata_provider=lambda: md) as ch:
            stub = controller_stub(ch)
            for _ in range(n):
                await stub.SubmitJob(pb.SubmitJobRequest(spec=SPEC), timeout=60)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for n in per_client:
            nursery.start_soon(client, n)
    return jobs / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--clients", default="1,8,64")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-fsync", action="store_true", help="controller.wal_fsync = false")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        conf = Path(tmp) / "spur.conf"
        conf.write_text(
            f"[controller]\nwal_fsync = {'false' if args.no_fsync else 'true'}\n"
            "[scheduler]\ninterval_secs = 3600\n"
        )
        ctl = subprocess.Popen(
            [
                str(BIN / "spurctld"),
                "-f",
                str(conf),
                "--state-dir",
                f"{tmp}/state",
                "--listen",
                f"127.0.0.1:{port}",
            ],
            stderr=subprocess.DEVNULL,
        )
        try:
            import socket

            wait_for(lambda: socket.create_connection(("127.0.0.1", port), 0.5), what="spurctld")
            print(
                f"{'clients':>8} {'jobs/s (median)':>16} {'runs':>30}   fsync={'off' if args.no_fsync else 'on'}"
            )
            for clients in [int(c) for c in args.clients.split(",")]:
                runs = [
                    trio.run(submit_all, f"127.0.0.1:{port}", args.jobs, clients) for _ in range(args.repeat)
                ]
                print(
                    f"{clients:>8} {statistics.median(runs):>16.0f} {' '.join(f'{r:.0f}' for r in runs):>30}"
                )
        finally:
            ctl.kill()
            ctl.wait()


if __name__ == "__main__":
    sys.exit(main())
