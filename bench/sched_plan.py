"""Backfill plan time and the controller's snapshot cost for large queues and clusters.

    python -m bench.sched_plan [--full] [--sizes 1000x100,10000x1000] [--repeat 3] [--no-state]
    python -m bench.sched_plan --curve [--nodes 10000] [--pending 1000,3000,10000,30000,100000]
    python -m bench.sched_plan --idle [--idle-nodes 1000,5000,10000] [--repeat 3] [--baseline DIR]

For each ``JOBSxNODES`` size, a synthetic busy cluster (about 90% of CPUs used by running jobs; a fifth
of the nodes have 8 GPUs) and a pending queue of mixed jobs: 1-16 nodes, 1-64 CPUs, time limits from
10 minutes to unlimited, a fifth asking for GPUs (some of a given model), a few exclusive, and about
half of them in array-like groups (consecutive ids, same shape, priority and submit time).

- ``plan``: one ``spur_sched_backfill.plan`` pass, with the controller's default ``max_job_test`` of
  1000 and uncapped (0). The plugin gives reservations to the first ``reservation_depth`` (default 100)
  blocked jobs only; later jobs can start now but hold nothing (see the plugin's README).
- ``build_snapshot``: ``spur.state.sched_view.build_snapshot`` over a ClusterState holding the same
  nodes, running and pending jobs: the from-scratch build the controller used to pay before every pass.
- ``pass``: the controller's whole scheduler pass on that ClusterState (``SchedulerLoop.cycle``
  without the Raft proposals): eligibility over every pending job, priorities, the ``max_job_test``
  cut, the incrementally maintained snapshot (``spur.state.sched_view.snapshot``) and the plan, with
  a little churn between passes (a few jobs end and a few are submitted, so the views have something
  to refresh). CPU seconds of this process (the 2-core machine is shared; wall time varies more).
- ``--curve``: the pass at ``--nodes`` nodes for a growing pending queue (one state, pending jobs
  added between points); writes ``bench/results/plan_vs_pending.{csv,png}``.
- ``--idle``: the fixed cost of a pass, an "idle pass": the controller's pass repeated over a state
  where nothing changed in between (ten one-CPU jobs pending, which the pass would start; nothing is
  committed), on an idle cluster (no job running) and on the busy one above, for each of
  ``--idle-nodes``. Median CPU ms of 21 passes per process, median of ``--repeat`` processes. With
  ``--baseline DIR`` (another checkout) its code is measured too, in processes taking turns with
  this tree's (``PYTHONPATH``; the same interpreter), so both see the same machine load.

Default sizes fit in a few minutes on 2 cores; ``--full`` runs the whole matrix 1k/10k/100k jobs x
100/1k/10k nodes. Figures are medians over ``--repeat`` runs; nothing here asserts.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass

from bench.common import median, print_table
from spur.core.job import GpuDevice, JobSpec, Node, NodeAllocation
from spur.core.scheduling import NodeView, PartitionView, PendingView, RunningView, SchedSnapshot

DEFAULT_SIZES = "1000x100,1000x1000,10000x1000,10000x10000,100000x1000"
FULL_SIZES = ",".join(f"{j}x{n}" for j in (1000, 10_000, 100_000) for n in (100, 1000, 10_000))
NOW = 1_000_000.0
CPUS, MEM = 64, 256_000


@dataclass(frozen=True)
class Shape:
    """One pending job's request (shared by the members of an array-like group)."""

    gpu: bool
    num_nodes: int
    cpus: int
    mem_per_cpu: int
    gpus_per_node: int
    gpu_type: str
    time_limit: int
    exclusive: bool
    priority: int
    submit_time: float


def _shapes(jobs: int, rng: random.Random) -> list[Shape]:
    out: list[Shape] = []
    while len(out) < jobs:
        gpu = rng.random() < 0.2
        shape = Shape(
            gpu=gpu,
            num_nodes=1 if rng.random() < 0.85 else rng.choice([2, 4, 8, 16]),
            cpus=rng.choice([1, 2, 4, 8, 16, 32, 64]),
            mem_per_cpu=rng.choice([0, 1000, 2000]),
            gpus_per_node=rng.choice([1, 2, 4, 8]) if gpu else 0,
            gpu_type=rng.choice(["", "a100", "h100"]) if gpu else "",
            time_limit=rng.choice([600, 3600, 14400, 86400, -1]),
            exclusive=rng.random() < 0.03,
            priority=rng.randint(1, 1000),
            submit_time=NOW - rng.randint(0, 86400),
        )
        group = rng.choice([1, 1, 1, 10, 100]) if rng.random() < 0.5 else 1  # array-like groups
        out.extend([shape] * min(group, jobs - len(out)))
    return out


def _running(nodes: int, rng: random.Random) -> list[tuple[str, int, list[int], float]]:
    """(node, cpus, gpus, end_time) of running jobs filling about 90% of the CPUs."""
    out = []
    gpu_nodes = nodes // 5
    for k in range(nodes):
        name = f"n{k + 1:05d}"
        free = CPUS
        gpus_free = list(range(8 if k < gpu_nodes else 0))
        while free > CPUS * 0.1:
            c = min(free, rng.choice([1, 2, 4, 8, 16, 32]))
            g = [gpus_free.pop() for _ in range(min(len(gpus_free), rng.choice([0, 1, 2])))]
            end = float("inf") if rng.random() < 0.02 else NOW + rng.choice([60, 600, 3600, 7200, 86400])
            out.append((name, c, g, end))
            free -= c
    return out


def plugin_snapshot(jobs: int, nodes: int, seed: int, max_job_test: int) -> SchedSnapshot:
    rng = random.Random(seed)
    gpu_nodes = nodes // 5
    used: dict[str, tuple[int, set[int], int]] = {}
    running = []
    next_id = 1
    for name, c, g, end in _running(nodes, rng):
        cpus, gpus, count = used.get(name, (0, set(), 0))
        used[name] = (cpus + c, gpus | set(g), count + 1)
        running.append(RunningView(next_id, end, (NodeAllocation(name, c, c * 2000, g, 1),)))
        next_id += 1
    views = []
    for k in range(nodes):
        name = f"n{k + 1:05d}"
        cpus, gpus, count = used.get(name, (0, set(), 0))
        total_gpus = 8 if k < gpu_nodes else 0
        views.append(
            NodeView(
                name=name,
                cpus_total=CPUS,
                cpus_free=CPUS - cpus,
                mem_total_mb=MEM,
                mem_free_mb=MEM - cpus * 2000,
                gpus_free=tuple(i for i in range(total_gpus) if i not in gpus),
                gpus_total=total_gpus,
                gpu_models=("a100",) * 4 + ("h100",) * 4 if total_gpus else (),
                partitions=("cpu", "gpu") if total_gpus else ("cpu",),
                running_jobs=count,
            )
        )
    pending = []
    for s in _shapes(jobs, rng):
        pending.append(
            PendingView(
                job_id=next_id,
                priority=s.priority,
                submit_time=s.submit_time,
                partition="gpu" if s.gpu else "cpu",
                num_nodes=s.num_nodes,
                cpus_per_task=s.cpus,
                mem_per_cpu_mb=s.mem_per_cpu,
                gpus_per_node=s.gpus_per_node,
                gpu_type=s.gpu_type,
                time_limit_secs=s.time_limit,
                exclusive=s.exclusive,
            )
        )
        next_id += 1
    parts = (
        PartitionView("cpu", tuple(v.name for v in views)),
        PartitionView("gpu", tuple(v.name for v in views[:gpu_nodes])),
    )
    return SchedSnapshot(
        now=NOW,
        pending=tuple(pending),
        nodes=tuple(views),
        running=tuple(running),
        partitions=parts,
        max_job_test=max_job_test,
    )


def cluster_state(jobs: int, nodes: int, seed: int):
    """A ClusterState with the same cluster, built by applying commands (pure, no I/O)."""
    from spur.core.job import Partition
    from spur.state import commands as c
    from spur.state.machine import ClusterState

    rng = random.Random(seed)
    state = ClusterState(history_max_jobs=1000)
    gpu_nodes = nodes // 5
    names = [f"n{k + 1:05d}" for k in range(nodes)]
    state.apply_command(
        c.ConfigurePartitions(
            [
                Partition("cpu", is_default=True, nodes_expr="ALL"),
                Partition("gpu", nodes_expr=",".join(names[:gpu_nodes]) or "n00001"),
            ]
        )
    )
    for k, name in enumerate(names):
        gpus = [GpuDevice(i, "nvidia", "a100" if i < 4 else "h100") for i in range(8 if k < gpu_nodes else 0)]
        state.apply_command(c.RegisterNode(Node(name, "127.0.0.1", 6818, CPUS, MEM, gpus), NOW))
    for name, cpus, gpus, _end in _running(nodes, rng):
        spec = JobSpec(
            name="r", script="#!/bin/sh\n", work_dir="/tmp", cpus_per_task=cpus, time_limit_secs=3600
        )
        job_id = state.apply_command(c.SubmitJob(spec, "u", 1000, 1000, "g", NOW))
        state.apply_command(c.StartJob(job_id, [NodeAllocation(name, cpus, cpus * 2000, gpus, 1)], NOW, 0))
    _submit_shapes(state, _shapes(jobs, rng))
    return state


def _submit_shapes(state, shapes) -> None:  # noqa: ANN001 (a ClusterState; the bench's shape records)
    """Submit one pending job per shape, as ``sbatch`` would have."""
    from spur.state import commands as c

    for s in shapes:
        spec = JobSpec(
            name="p",
            script="#!/bin/sh\n",
            work_dir="/tmp",
            partition="gpu" if s.gpu else "cpu",
            num_nodes=s.num_nodes,
            cpus_per_task=s.cpus,
            mem_per_cpu_mb=s.mem_per_cpu,
            gres=[f"gpu:{s.gpu_type}:{s.gpus_per_node}" if s.gpu_type else f"gpu:{s.gpus_per_node}"]
            if s.gpu
            else [],
            time_limit_secs=s.time_limit,
            exclusive=s.exclusive,
        )
        state.apply_command(c.SubmitJob(spec, "u", 1000, 1000, "g", s.submit_time))


def churn(state, rng: random.Random, now: float, count: int = 10) -> None:
    """Between passes: ``count`` running jobs end and as many small jobs are submitted."""
    from spur.state import commands as c

    running = [state.jobs[i] for i in list(state.sched_index.holding)[:count]]
    for job in running:
        state.apply_command(c.JobExited(job.job_id, job.allocation[0].node, 0, 0, now))
    for _ in range(count):
        spec = JobSpec(name="p", script="#!/bin/sh\n", work_dir="/tmp", cpus_per_task=rng.choice([1, 4, 16]))
        state.apply_command(c.SubmitJob(spec, "u", 1000, 1000, "g", now))


def controller_pass(state, now: float, cap: int) -> tuple[dict[str, float], object]:
    """One scheduler pass as ``SchedulerLoop.cycle`` runs it, minus Raft: CPU seconds per phase."""
    from spur_sched_backfill import plan

    from spur.accounting.priority import PriorityWeights
    from spur.state.sched_view import eligible_jobs, snapshot

    acct = state.domains["accounting"]
    t0 = time.process_time()
    eligible, _reasons = eligible_jobs(state, now)
    prio = acct.priorities(eligible, PriorityWeights(), now)
    if cap and len(eligible) > cap:
        eligible.sort(key=lambda j: (-prio.get(j.job_id, j.priority), j.submit_time, j.job_id))
        eligible = eligible[:cap]
    t1 = time.process_time()
    snap = snapshot(
        state, now, max_job_test=cap, eligible=eligible, priorities=prio, limits=acct.scheduling_gate()
    )
    t2 = time.process_time()
    result = plan(snap, {})
    t3 = time.process_time()
    return {"eligible": t1 - t0, "snapshot": t2 - t1, "plan": t3 - t2, "pass": t3 - t0}, result


def time_passes(state, repeat: int, cap: int = 1000, seed: int = 1) -> tuple[dict[str, float], object]:
    """Median CPU seconds per phase over ``repeat`` passes (churn between them; the first, which
    builds every view, is not counted)."""
    rng = random.Random(seed)
    controller_pass(state, NOW, cap)
    runs, result = [], None
    for _ in range(repeat):
        churn(state, rng, NOW)
        times, result = controller_pass(state, NOW, cap)
        runs.append(times)
    return {k: median([r[k] for r in runs]) for k in runs[0]}, result


def curve(nodes: int, sizes: list[int], repeat: int, seed: int) -> None:
    """The pass at ``nodes`` nodes for each pending queue size; writes CSV + PNG."""
    import os

    from bench.series import RESULTS, write_series

    rng = random.Random(seed)
    state = cluster_state(0, nodes, seed)
    have = 0
    rows = []
    for size in sizes:
        _submit_shapes(state, _shapes(size - have, rng))
        have = size
        times, result = time_passes(state, repeat, seed=seed)
        rows.append([size] + [round(times[k] * 1000, 1) for k in ("pass", "eligible", "snapshot", "plan")])
        print(
            f"{size:>7} pending x {nodes} nodes: pass {times['pass'] * 1000:.0f} ms (eligible+priority "
            f"{times['eligible'] * 1000:.0f}, snapshot {times['snapshot'] * 1000:.0f}, plan "
            f"{times['plan'] * 1000:.0f}), {len(result.assignments)} started",  # type: ignore[attr-defined]
            flush=True,
        )
    paths = write_series(
        os.path.join(RESULTS, "plan_vs_pending"),
        "pending jobs",
        "CPU ms per pass",
        ["pending jobs", "whole pass", "eligibility+priority", "snapshot", "plan"],
        rows,
        title=f"scheduler pass, {nodes} nodes, max_job_test 1000, median of {repeat}, {os.cpu_count()} cores",
        log_x=True,
    )
    print("wrote " + ", ".join(paths))


IDLE_PASSES = 21


def idle_state(nodes: int, busy: bool, seed: int = 1):
    """A state for idle passes: ``nodes`` nodes (busy: ~90% of CPUs held) and ten one-CPU jobs pending."""
    from spur.state import commands as c

    rng = random.Random(seed)
    if busy:
        state = cluster_state(0, nodes, seed)
    else:
        state = cluster_state(0, 0, seed)
        for k in range(nodes):
            node = Node(f"n{k + 1:05d}", "127.0.0.1", 6818, CPUS, MEM, [])
            state.apply_command(c.RegisterNode(node, NOW))
    for _ in range(10):
        spec = JobSpec(name="p", script="#!/bin/sh\n", work_dir="/tmp", cpus_per_task=rng.choice([1, 2]))
        state.apply_command(c.SubmitJob(spec, "u", 1000, 1000, "g", NOW))
    return state


def idle_worker(sizes: list[int]) -> None:
    """Print one JSON line per (cluster, nodes): median CPU ms per phase of ``IDLE_PASSES`` idle passes."""
    import json

    for busy in (False, True):
        for nodes in sizes:
            state = idle_state(nodes, busy)
            controller_pass(state, NOW, 1000)  # the first pass builds every view
            runs = [controller_pass(state, NOW, 1000)[0] for _ in range(IDLE_PASSES)]
            times = {k: median([r[k] for r in runs]) * 1000 for k in runs[0]}
            print(json.dumps({"busy": busy, "nodes": nodes, **times}), flush=True)


def idle(sizes: list[int], repeat: int, baseline: str | None) -> None:
    """Run ``idle_worker`` processes for this tree (and ``baseline``), taking turns; print the table."""
    import json
    import os
    import subprocess
    from pathlib import Path

    here = Path(__file__).resolve().parent.parent
    trees = {"this tree": here}
    if baseline:
        trees = {"baseline": Path(baseline).resolve(), "this tree": here}
    found: dict[tuple[str, bool, int], list[dict[str, float]]] = {}
    for r in range(repeat):
        for name, tree in trees.items():
            path = os.pathsep.join([str(tree), str(tree / "plugins" / "spur-sched-backfill")])
            env = {**os.environ, "PYTHONPATH": path}
            argv = [sys.executable, str(Path(__file__).resolve()), "--idle-worker", "--idle-nodes", ",".join(map(str, sizes))]
            out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                row = json.loads(line)
                found.setdefault((name, row["busy"], row["nodes"]), []).append(row)
            print(f"  round {r + 1}/{repeat}: {name} done", file=sys.stderr, flush=True)
    rows = []
    for busy in (False, True):
        for nodes in sizes:
            row: list[object] = ["busy (~90% CPUs held)" if busy else "idle (no job running)", nodes]
            for name in trees:
                runs = found[(name, busy, nodes)]
                row += [f"{median([x[k] for x in runs]):.2f}" for k in ("pass", "eligible", "snapshot", "plan")]
            rows.append(row)
    headers = ["cluster", "nodes"]
    for name in trees:
        headers += [f"{name}: pass ms", "eligible", "snapshot", "plan"]
    load = os.getloadavg()
    print_table(
        headers,
        rows,
        title=f"idle pass (nothing changed since the last pass; 10 jobs pending), CPU ms, median of {IDLE_PASSES} "
        f"passes x {repeat} processes; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
    )


def _time(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return median(times), result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help="comma list of JOBSxNODES")
    ap.add_argument("--full", action="store_true", help=f"all of {FULL_SIZES}")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-state", action="store_true", help="skip the build_snapshot timing")
    ap.add_argument("--depth", type=int, default=None, help="reservation_depth option (plugin default 100)")
    ap.add_argument("--curve", action="store_true", help="pass time vs pending jobs (CSV + PNG)")
    ap.add_argument("--nodes", type=int, default=10_000, help="nodes for --curve")
    ap.add_argument("--pending", default="1000,3000,10000,30000,100000", help="queue sizes for --curve")
    ap.add_argument("--idle", action="store_true", help="the fixed cost of a pass when nothing changed")
    ap.add_argument("--idle-nodes", default="1000,5000,10000", help="cluster sizes for --idle")
    ap.add_argument("--baseline", help="another checkout measured beside this one (--idle)")
    ap.add_argument("--idle-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.idle_worker:
        idle_worker([int(x) for x in args.idle_nodes.split(",")])
        return None
    if args.idle:
        idle([int(x) for x in args.idle_nodes.split(",")], args.repeat, args.baseline)
        return None
    if args.curve:
        curve(args.nodes, [int(x) for x in args.pending.split(",")], args.repeat, args.seed)
        return None
    from spur_sched_backfill import plan

    from spur.state.sched_view import build_snapshot

    options = {} if args.depth is None else {"reservation_depth": args.depth}
    rows = []
    for size in (FULL_SIZES if args.full else args.sizes).split(","):
        jobs, nodes = (int(x) for x in size.lower().split("x"))
        row: list[object] = [jobs, nodes]
        for cap in (1000, 0):
            snap = plugin_snapshot(jobs, nodes, args.seed, cap)
            took, result = _time(lambda snap=snap: plan(snap, options), args.repeat)
            row += [took * 1000, f"{len(result.assignments)}/{result.jobs_tested}"]  # type: ignore[attr-defined]
        if args.no_state:
            row += ["-", "-", "-"]
        else:
            t0 = time.perf_counter()
            state = cluster_state(jobs, nodes, args.seed)
            setup = time.perf_counter() - t0
            took, snap = _time(lambda state=state: build_snapshot(state, NOW, max_job_test=1000), args.repeat)
            times, _result = time_passes(state, args.repeat, seed=args.seed)
            row += [took * 1000, times["pass"] * 1000, f"{setup:.1f}"]
        rows.append(row)
        print(f"  done {jobs}x{nodes}", file=sys.stderr, flush=True)
    print_table(
        [
            "pending",
            "nodes",
            "plan ms (max_job_test 1000)",
            "started/tested",
            "plan ms (uncapped)",
            "started/tested",
            "build_snapshot ms",
            "controller pass CPU ms",
            "state setup s",
        ],
        rows,
        title=f"backfill plan per cycle, reservation_depth {args.depth or '100 (default)'}, ~90% CPUs busy, "
        f"median of {args.repeat}",
    )


if __name__ == "__main__":
    sys.exit(main())
