"""Time one backfill pass over a synthetic busy cluster (default 10k pending jobs x 1k nodes).

Run: .venv/bin/python plugins/spur-sched-backfill/bench/bench_backfill.py [--jobs N] [--nodes N]
"""

from __future__ import annotations

import argparse
import random
import time

from spur.core.job import NodeAllocation
from spur.core.scheduling import NodeView, PartitionView, PendingView, RunningView, SchedSnapshot

from spur_sched_backfill import plan


def make_snapshot(jobs: int, nodes: int, busy: float, seed: int) -> SchedSnapshot:
    rng = random.Random(seed)
    now = 1_000_000.0
    gpu_nodes = nodes // 5
    views: list[NodeView] = []
    running: list[RunningView] = []
    next_id = 1
    for k in range(nodes):
        name = f"n{k + 1:04d}"
        gpus = 8 if k < gpu_nodes else 0
        cpus_free, mem_free, gpus_free = 64, 256_000, list(range(gpus))
        count = 0
        while cpus_free > 64 * (1 - busy):
            c = min(cpus_free, rng.choice([1, 2, 4, 8, 16, 32]))
            g = [gpus_free.pop() for _ in range(min(len(gpus_free), rng.choice([0, 1, 2])))]
            end = float("inf") if rng.random() < 0.02 else now + rng.choice([60, 600, 3600, 7200, 86400])
            running.append(RunningView(next_id, end, (NodeAllocation(name, c, c * 2000, g, 1),)))
            next_id += 1
            count += 1
            cpus_free -= c
            mem_free -= c * 2000
        views.append(
            NodeView(
                name=name,
                cpus_total=64,
                cpus_free=cpus_free,
                mem_total_mb=256_000,
                mem_free_mb=mem_free,
                gpus_free=tuple(sorted(gpus_free)),
                gpus_total=gpus,
                gpu_models=("a100",) * 4 + ("h100",) * 4 if gpus else (),
                partitions=("cpu", "gpu") if gpus else ("cpu",),
                running_jobs=count,
            )
        )
    parts = (
        PartitionView("cpu", tuple(v.name for v in views)),
        PartitionView("gpu", tuple(v.name for v in views[:gpu_nodes])),
    )
    pending = []
    for _ in range(jobs):
        gpu = rng.random() < 0.2
        pending.append(
            PendingView(
                job_id=next_id,
                priority=rng.randint(0, 1000),
                submit_time=now - rng.randint(0, 86400),
                partition="gpu" if gpu else "cpu",
                num_nodes=1 if rng.random() < 0.85 else rng.choice([2, 4, 8, 16]),
                cpus_per_task=rng.choice([1, 2, 4, 8, 16, 32, 64]),
                mem_per_cpu_mb=rng.choice([0, 1000, 2000]),
                gpus_per_node=rng.choice([1, 2, 4, 8]) if gpu else 0,
                gpu_type=rng.choice(["", "a100", "h100"]) if gpu else "",
                time_limit_secs=rng.choice([600, 3600, 14400, 86400, -1]),
                exclusive=rng.random() < 0.03,
            )
        )
        next_id += 1
    return SchedSnapshot(
        now=now, pending=tuple(pending), nodes=tuple(views), running=tuple(running), partitions=parts
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=1_000)
    ap.add_argument("--busy", type=float, default=0.9, help="fraction of CPUs already in use")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--depth", type=int, default=None, help="reservation_depth option")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    snap = make_snapshot(args.jobs, args.nodes, args.busy, args.seed)
    options = {} if args.depth is None else {"reservation_depth": args.depth}
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        result = plan(snap, options)
        took = time.perf_counter() - t0
        print(
            f"{args.jobs} jobs x {args.nodes} nodes ({len(snap.running)} running, busy {args.busy}): "
            f"{took:.3f} s, started {len(result.assignments)}, tested {result.jobs_tested}"
        )


if __name__ == "__main__":
    main()
