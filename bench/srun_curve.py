"""Latency of ``srun true`` against the length of the pending queue and against the number of nodes.

    python -m bench.srun_curve [--queue 0,2000,5000,10000] [--nodes 0,1000,5000] [--repeat 5]

Queue curve: one spurctld (WAL fsync on, scheduler interval 2 s) and one real spurd (2 CPUs, process
backend); held jobs are added to the queue (SubmitJob with ``hold``, 16 calls in flight) up to each
``--queue`` length, and at each length ``srun -w bench1 true`` runs ``--repeat`` times.

Nodes curve: for each ``--nodes`` count a fresh spurctld, the real spurd and that many simulated
nodes (``integration.fleet``, heartbeats every 30 s) registered beside it; ``srun -w bench1 true`` runs
``--repeat`` times once all have registered. ``-w`` keeps the job on the real node, whose agent runs it.

The commands run with their bytecode compiled and without ``PYTHONDONTWRITEBYTECODE``, as an installed
Spur's do. Prints the medians and writes ``bench/results/srun_vs_queue.{csv,png}`` and
``bench/results/srun_vs_nodes.{csv,png}``. Figures only; nothing here asserts.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from bench.common import BenchController, controller, print_table
from bench.latency import start_agent
from bench.series import RESULTS, write_series
from integration.harness import BIN, wait_for

ROOT = Path(__file__).resolve().parent.parent
SRUN = [str(BIN / "srun"), "-w", "bench1", "true"]


def _env(address: str) -> dict[str, str]:
    env = dict(os.environ, SPUR_CONTROLLER=address)
    env.pop("SPUR_CONF", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _srun_ms(env: dict[str, str], work: str, repeat: int) -> tuple[float, float, float]:
    """(median, min, max) wall ms of ``repeat`` runs of srun true."""
    took = []
    for _ in range(repeat):
        began = time.perf_counter()
        out = subprocess.run(SRUN, env=env, cwd=work, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise SystemExit(f"srun exited {out.returncode}: {out.stderr.strip()}")
        took.append(1000 * (time.perf_counter() - began))
    return statistics.median(took), min(took), max(took)


def _wait_idle(env: dict[str, str]) -> None:
    wait_for(
        lambda: "idle" in subprocess.run(
            [str(BIN / "sinfo"), "-h", "-n", "bench1", "-o", "%t"], env=env, capture_output=True, text=True
        ).stdout,
        timeout=60,
        what="the real node to be idle",
    )


async def _add_held(address: str, count: int) -> None:
    """Submit ``count`` held one-CPU jobs (16 calls in flight on one channel)."""
    from spur.auth.identity import identity_metadata
    from spur.rpc.channel import open_channel
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.stub import controller_stub

    spec = pb.JobSpec(name="held", script="#!/bin/sh\ntrue\n", work_dir="/tmp", cpus_per_task=1, hold=True)
    md = identity_metadata()
    async with open_channel(address, metadata_provider=lambda: md) as ch:
        stub = controller_stub(ch)

        async def worker(n: int) -> None:
            for _ in range(n):
                await stub.SubmitJob(pb.SubmitJobRequest(spec=spec), timeout=60)

        async with trio.open_nursery() as nursery:
            for i in range(16):
                nursery.start_soon(worker, count // 16 + (i < count % 16))


def queue_curve(lengths: list[int], repeat: int, work: str) -> list[tuple[float, ...]]:
    rows: list[tuple[float, ...]] = []
    with controller() as ctl:
        agent = start_agent(ctl, cpus=2)
        try:
            env = _env(ctl.address)
            _wait_idle(env)
            queued = 0
            for length in sorted(lengths):
                if length > queued:
                    trio.run(_add_held, ctl.address, length - queued)
                    queued = length
                med, low, high = _srun_ms(env, work, repeat)
                rows.append((length, round(med, 1), round(low, 1), round(high, 1)))
                print(f"queue {length}: srun true {med:.0f} ms", flush=True)
        finally:
            agent.kill()
    return rows


def _with_fleet(ctl: BenchController, nodes: int) -> subprocess.Popen[bytes]:
    import json

    stats = ctl.root / "fleet.json"
    fleet = subprocess.Popen(
        [sys.executable, "-m", "integration.fleet", "--controller", ctl.address, "--nodes", str(nodes),
         "--heartbeat", "30", "--stats-file", str(stats)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def registered() -> bool:
        try:
            return bool(json.loads(stats.read_text()).get("registered") == nodes)
        except (OSError, ValueError):
            return False

    wait_for(registered, timeout=600, interval=0.5, what=f"{nodes} simulated nodes to register")
    return fleet


def nodes_curve(counts: list[int], repeat: int, work: str) -> list[tuple[float, ...]]:
    rows: list[tuple[float, ...]] = []
    for count in sorted(counts):
        with controller() as ctl:
            agent = start_agent(ctl, cpus=2)
            fleet = _with_fleet(ctl, count) if count else None
            try:
                env = _env(ctl.address)
                _wait_idle(env)
                med, low, high = _srun_ms(env, work, repeat)
                rows.append((count + 1, round(med, 1), round(low, 1), round(high, 1)))
                print(f"nodes {count + 1}: srun true {med:.0f} ms", flush=True)
            finally:
                if fleet is not None:
                    fleet.kill()
                    fleet.wait()
                agent.kill()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.srun_curve", description=__doc__.split("\n\n")[0])
    ap.add_argument("--queue", default="0,2000,5000,10000", help="pending (held) queue lengths")
    ap.add_argument("--nodes", default="0,1000,5000", help="simulated nodes beside the real one")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    compileall.compile_dir(str(ROOT / "spur"), quiet=1)
    work = tempfile.mkdtemp(prefix="spur-srun-curve-")
    header = ["", "median ms", "min ms", "max ms"]
    if args.queue:
        rows = queue_curve([int(x) for x in args.queue.split(",")], args.repeat, work)
        print_table(["pending jobs", *header[1:]], rows, title=f"srun true vs queue length ({args.repeat} runs)")
        write_series(os.path.join(RESULTS, "srun_vs_queue"), "pending jobs (held)", "srun true, ms",
                     ["pending jobs", *header[1:]], rows, title="srun true vs pending queue length")  # fmt: skip
    if args.nodes:
        rows = nodes_curve([int(x) for x in args.nodes.split(",")], args.repeat, work)
        print_table(["nodes", *header[1:]], rows, title=f"srun true vs nodes ({args.repeat} runs)")
        write_series(os.path.join(RESULTS, "srun_vs_nodes"), "nodes (1 real + simulated)", "srun true, ms",
                     ["nodes", *header[1:]], rows, title="srun true vs number of nodes", log_x=True)  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
