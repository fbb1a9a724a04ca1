"""Submission throughput of one controller over the gRPC API.

    python -m bench.submit_throughput [--jobs 500] [--clients 1,8,64] [--repeat 3] [--fsync on,off]
                                      [--modes separate,pipelined] [--profile]

Starts a real spurctld (no agents, so jobs stay pending) for every run, so each run starts from an
empty queue. For each WAL setting (``controller.wal_fsync``), mode and client count it submits ``--jobs``
jobs and prints jobs/s, median over ``--repeat`` runs:

- ``separate``: that many concurrent clients, each with its own connection (as many CLIs would);
- ``pipelined``: that many concurrent calls multiplexed on ONE connection. The API has no batch submit
  RPC, so this is the batched case: many requests in flight on one HTTP/2 connection, and the
  controller's Raft group commit writes all proposals that arrived during one fsync as one append.

A ``GetControllers`` row (a unary call that touches no state) gives the bare RPC round trip for
comparison. ``--profile`` samples the controller with py-spy (``pip install py-spy``) while one client
submits, and prints where its CPU goes. Figures only; nothing here asserts.
"""

from __future__ import annotations

import argparse
import sys
import time

import trio

from bench.common import Profiler, controller, median, print_table
from spur.auth.identity import identity_metadata
from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.stub import controller_stub

SPEC = pb.JobSpec(name="bench", script="#!/bin/sh\ntrue\n", work_dir="/tmp")


async def submit_all(address: str, jobs: int, clients: int, mode: str, method: str = "SubmitJob") -> float:
    """Submit ``jobs`` jobs from ``clients`` concurrent callers; returns jobs/s."""
    md = identity_metadata()
    per_client = [jobs // clients + (1 if i < jobs % clients else 0) for i in range(clients)]
    request = pb.SubmitJobRequest(spec=SPEC) if method == "SubmitJob" else pb.Empty()

    async def caller(stub, n: int) -> None:
        rpc = getattr(stub, method)
        for _ in range(n):
            await rpc(request, timeout=120)

    async def own_connection(n: int) -> None:
        async with open_channel(address, metadata_provider=lambda: md) as ch:
            await caller(controller_stub(ch), n)

    async with open_channel(address, metadata_provider=lambda: md) as shared:
        stub = controller_stub(shared)
        await stub.GetControllers(pb.Empty(), timeout=10)  # connect before the clock starts
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for n in per_client:
                if mode == "pipelined":
                    nursery.start_soon(caller, stub, n)
                else:
                    nursery.start_soon(own_connection, n)
        return jobs / (time.perf_counter() - start)


def one_run(fsync: bool, jobs: int, clients: int, mode: str, method: str = "SubmitJob") -> float:
    with controller(wal_fsync=fsync) as ctl:
        return trio.run(submit_all, ctl.address, jobs, clients, mode, method)


def profile(jobs: int, seconds: float) -> None:
    with controller(wal_fsync=True) as ctl, Profiler(ctl.pid, seconds) as prof:
        time.sleep(1.0)
        rate = trio.run(submit_all, ctl.address, jobs, 1, "separate")
    print(f"\nprofile of spurctld (py-spy, 250 Hz) while 1 client submitted {jobs} jobs at {rate:.0f}/s")
    prof.print_top(30)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--clients", default="1,8,64")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fsync", default="on,off", help="WAL fsync settings to run: on, off or on,off")
    ap.add_argument("--modes", default="separate,pipelined")
    ap.add_argument("--no-fsync", action="store_true", help="same as --fsync off")
    ap.add_argument("--profile", action="store_true", help="py-spy profile of the controller (1 client)")
    args = ap.parse_args(argv)
    fsyncs = ["off"] if args.no_fsync else args.fsync.split(",")
    clients = [int(c) for c in args.clients.split(",")]
    rows = []
    for fs in fsyncs:
        runs = [one_run(fs == "on", args.jobs, 1, "separate", "GetControllers") for _ in range(args.repeat)]
        rows.append((fs, "GetControllers (bare RPC)", 1, median(runs), 1000 / median(runs), _fmt(runs)))
        for mode in args.modes.split(","):
            for n in clients:
                runs = [one_run(fs == "on", args.jobs, n, mode) for _ in range(args.repeat)]
                rows.append((fs, mode, n, median(runs), 1000 / median(runs), _fmt(runs)))
    print_table(
        ["fsync", "mode", "clients", "calls/s (median)", "ms per call (1/rate)", "runs"],
        rows,
        title=f"SubmitJob throughput, {args.jobs} jobs per run, fresh controller per run, no agents",
    )
    if args.profile:
        profile(3000, 8)


def _fmt(runs: list[float]) -> str:
    return " ".join(f"{r:.0f}" for r in runs)


if __name__ == "__main__":
    sys.exit(main())
