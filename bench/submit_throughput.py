"""Submission throughput of one controller over the gRPC API.

    python -m bench.submit_throughput [--jobs 500] [--clients 1,8,64] [--repeat 3] [--fsync on,off]
                                      [--modes separate,pipelined] [--profile] [--compare-auth]

Starts a real spurctld (no agents, so jobs stay pending) for every run, so each run starts from an
empty queue. For each WAL setting (``controller.wal_fsync``), mode and client count it submits ``--jobs``
jobs and prints jobs/s, median over ``--repeat`` runs:

- ``separate``: that many concurrent clients, each with its own connection (as many CLIs would);
- ``pipelined``: that many concurrent calls multiplexed on ONE connection. The API has no batch submit
  RPC, so this is the batched case: many requests in flight on one HTTP/2 connection, and the
  controller's Raft group commit writes all proposals that arrived during one fsync as one append.

A ``GetControllers`` row (a unary call that touches no state) gives the bare RPC round trip for
comparison. ``--compare-auth`` instead runs every setting twice, with ``[auth] mode = "disabled"`` and
with ``mode = "required"`` (every call carries a JWT, as the CLI does), alternating the runs, and prints
both rates and the overhead of authentication. ``--profile`` samples the controller with py-spy (``pip install py-spy``) while one client
submits, and prints where its CPU goes. Figures only; nothing here asserts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import trio

from bench.common import Profiler, controller, median, print_table
from spur.auth.identity import current_identity, identity_metadata
from spur.auth.tokens import mint
from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.stub import controller_stub

SPEC = pb.JobSpec(name="bench", script="#!/bin/sh\ntrue\n", work_dir="/tmp")


BENCH_KEY = b"bench-cluster-key-0123456789abcdef0123456789"


def _auth_setup(auth: str, tmp: Path) -> tuple[str, dict[str, str]]:
    """Config lines and client metadata for ``[auth] mode = auth`` ("" leaves the default)."""
    if not auth:
        return "", {}
    key = tmp / "jwt.key"
    key.write_bytes(BENCH_KEY)
    key.chmod(0o600)
    conf = f'[auth]\nmode = "{auth}"\njwt_key_file = "{key}"\nbroker_socket = "{tmp / "auth.sock"}"\n'
    if auth == "disabled":
        return conf, {}
    me = current_identity()
    token = mint(BENCH_KEY, me.user, me.uid, now=time.time(), ttl_secs=3600)
    return conf, {"authorization": f"Bearer {token}"}


async def submit_all(
    address: str,
    jobs: int,
    clients: int,
    mode: str,
    method: str = "SubmitJob",
    extra_md: dict[str, str] | None = None,
) -> float:
    """Submit ``jobs`` jobs from ``clients`` concurrent callers; returns jobs/s."""
    md = {**identity_metadata(), **(extra_md or {})}
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


def one_run(
    fsync: bool, jobs: int, clients: int, mode: str, method: str = "SubmitJob", auth: str = ""
) -> float:
    return measured_run(fsync, jobs, clients, mode, method, auth)[0]


def measured_run(
    fsync: bool, jobs: int, clients: int, mode: str, method: str = "SubmitJob", auth: str = ""
) -> tuple[float, float]:
    """(calls/s, controller CPU ms per call); the CPU figure is the one a busy machine distorts least."""
    with tempfile.TemporaryDirectory(prefix="spur-bench-auth-") as tmp:
        conf, md = _auth_setup(auth, Path(tmp))
        with controller(wal_fsync=fsync, extra=conf) as ctl:
            before = ctl.cpu_secs()
            rate = trio.run(submit_all, ctl.address, jobs, clients, mode, method, md)
            return rate, (ctl.cpu_secs() - before) * 1000 / jobs


def compare_auth(args: argparse.Namespace, fsyncs: list[str], clients: list[int]) -> None:
    """Required vs disabled, alternating runs so machine noise hits both alike."""
    rows = []
    for fs in fsyncs:
        for mode in args.modes.split(","):
            for n in clients:
                rates: dict[str, list[float]] = {"disabled": [], "required": []}
                cpu: dict[str, list[float]] = {"disabled": [], "required": []}
                for _ in range(args.repeat):
                    for auth in ("disabled", "required"):
                        rate, ms = measured_run(fs == "on", args.jobs, n, mode, auth=auth)
                        rates[auth].append(rate)
                        cpu[auth].append(ms)
                off, on = median(rates["disabled"]), median(rates["required"])
                cpu_off, cpu_on = median(cpu["disabled"]), median(cpu["required"])
                rows.append(
                    (
                        fs,
                        mode,
                        n,
                        off,
                        on,
                        f"{on / off:.3f}",
                        f"{cpu_off:.3f}",
                        f"{cpu_on:.3f}",
                        f"{(cpu_on / cpu_off - 1) * 100:+.1f}%",
                        _fmt(rates["disabled"]) + " | " + _fmt(rates["required"]),
                    )
                )
    print_table(
        [
            "fsync",
            "mode",
            "clients",
            "disabled/s",
            "required/s",
            "rate ratio",
            "ctl CPU ms/call (off)",
            "(on)",
            "CPU overhead",
            "runs/s (off | on)",
        ],
        rows,
        title=f"SubmitJob throughput, [auth] disabled vs required, {args.jobs} jobs per run (medians)",
    )


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
    ap.add_argument(
        "--compare-auth", action="store_true", help='[auth] mode "disabled" vs "required" (JWT on every call)'
    )
    args = ap.parse_args(argv)
    fsyncs = ["off"] if args.no_fsync else args.fsync.split(",")
    clients = [int(c) for c in args.clients.split(",")]
    if args.compare_auth:
        compare_auth(args, fsyncs, clients)
        return
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
