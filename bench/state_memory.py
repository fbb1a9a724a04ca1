"""Memory and snapshot cost of the replicated state at large job counts.

    python -m bench.state_memory [--jobs 100000] [--finished 0.5] [--repeat 3] [--no-snapshot]
    python -m bench.state_memory --curve [--sizes 1000,10000,30000,100000]

Applies ``--jobs`` SubmitJob commands (sbatch-sized scripts and environments) to a fresh ClusterState
exactly as the Raft log would, finishes a fraction of them (history), then reports the process RSS
growth, the bytes per job (and per pending job), and the time and size of a snapshot and of restoring
it (what a Raft snapshot, and InstallSnapshot to a new follower, cost at that size). ``--curve`` runs
each size of pending jobs in a fresh process and writes ``bench/results/rss_vs_jobs.{csv,png}``
(RSS growth in MiB and bytes per pending job against the number of pending jobs). Figures only;
nothing asserts. The target of issue 16 is <= 3 KiB per pending job.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

from spur.core.job import JobSpec, Node, NodeAllocation
from spur.state import commands as c
from spur.state.machine import ClusterState

SCRIPT = "#!/bin/bash\n#SBATCH -J work\n#SBATCH -t 10\nsrun python train.py --epochs 10 --lr 3e-4\n"


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def fill(jobs: int, finished: float) -> ClusterState:
    state = ClusterState(history_max_jobs=jobs)
    env = {f"VAR{i}": "x" * 20 for i in range(30)}  # a typical exported environment, ~30 variables
    state.apply(1, c.encode(c.RegisterNode(Node(name="n1", cpus=1_000_000, memory_mb=0), 0.0)))
    index = 2
    done = int(jobs * finished)
    for i in range(jobs):
        spec = JobSpec(name=f"job{i}", script=SCRIPT, work_dir="/home/u/run", environment=dict(env))
        state.apply(index, c.encode(c.SubmitJob(spec, "u", 1000, 1000, "u", float(i))))
        index += 1
        if i < done:
            state.apply(index, c.encode(c.StartJob(i + 1, [NodeAllocation("n1", 1)], float(i), 1)))
            state.apply(index + 1, c.encode(c.JobExited(i + 1, "n1", 0, 0, float(i) + 1)))
            index += 2
    return state


def curve(sizes: list[int], rows: list[tuple[int, float, int]] | None = None) -> None:
    """RSS growth per number of pending jobs, each size measured in a fresh interpreter (or the
    given ``rows``: pending jobs, MiB, bytes per job, to redraw a measured series)."""
    from bench.series import RESULTS, write_series

    measured = rows is None
    rows = rows or []
    for jobs in sizes if measured else ():
        out = subprocess.run(
            [sys.executable, "-m", "bench.state_memory", "--jobs", str(jobs), "--finished", "0", "--json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        got = json.loads(out.strip().splitlines()[-1])
        mib = got["rss_growth_mib"]
        rows.append((jobs, round(mib, 1), round(mib * 2**20 / jobs)))
        print(
            f"{jobs:>8} pending: RSS +{mib:.0f} MiB, {mib * 2**20 / jobs:,.0f} B per pending job", flush=True
        )
    paths = write_series(
        os.path.join(RESULTS, "rss_vs_jobs"),
        "pending jobs",
        "RSS growth (MiB)",
        ["pending jobs", "RSS growth MiB", "bytes per pending job"],
        rows,
        title="controller state: RSS growth vs pending jobs (target <= 3072 B per job)",
        right=["bytes per pending job"],
        right_label="bytes per pending job",
    )
    print("wrote " + ", ".join(paths))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--finished", type=float, default=0.5, help="fraction of jobs moved to history")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-snapshot", action="store_true", help="skip the snapshot/restore timing")
    ap.add_argument("--json", action="store_true", help="print one JSON line (used by --curve)")
    ap.add_argument("--curve", action="store_true", help="RSS vs pending jobs, one process per size")
    ap.add_argument("--sizes", default="1000,10000,30000,100000", help="pending job counts for --curve")
    args = ap.parse_args(argv)
    if args.curve:
        curve([int(x) for x in args.sizes.split(",")])
        return

    gc.collect()
    before = rss_mb()
    started = time.perf_counter()
    state = fill(args.jobs, args.finished)
    fill_secs = time.perf_counter() - started
    gc.collect()
    grown = rss_mb() - before

    pending = sum(1 for j in state.jobs.values() if not j.state.is_terminal)
    if args.json:
        print(json.dumps({"jobs": args.jobs, "pending": pending, "rss_growth_mib": grown}))
        return
    snap_times, restore_times = [], []
    data = b""
    for _ in range(0 if args.no_snapshot else args.repeat):
        t = time.perf_counter()
        data = state.snapshot()
        snap_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        ClusterState().restore(data)
        restore_times.append(time.perf_counter() - t)

    rows = [
        ("jobs in state (pending / history)", f"{len(state.jobs)} ({pending} / {len(state.jobs) - pending})"),
        ("apply rate (commands/s)", f"{(args.jobs * (1 + 2 * args.finished)) / fill_secs:,.0f}"),
        ("RSS growth", f"{grown:.0f} MiB ({grown * 2**20 / args.jobs / 1024:.1f} KiB per job)"),
        ("bytes per job", f"{grown * 2**20 / args.jobs:,.0f} B (target for pending jobs: <= 3,072 B)"),
    ]
    if snap_times:
        rows += [
            ("snapshot size", f"{len(data) / 2**20:.0f} MiB ({len(data) / args.jobs:.0f} B per job)"),
            ("snapshot time (median)", f"{statistics.median(snap_times):.2f} s"),
            ("restore time (median)", f"{statistics.median(restore_times):.2f} s"),
        ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
