"""What one immediate-grant decision costs the leader on a big cluster, with no RPC or Raft around it.

    python -m bench.immediate_grant [--nodes 5000] [--running 500] [--decisions 5000] [--in-flight 0,64,256]

Builds a cluster state of ``--nodes`` 8-CPU nodes through the state machine (commands encoded and
applied as Raft applies them), then runs a steady stream like ``bench.fleet``'s: each round decides
the grant of a 1-CPU job (``spur.state.immediate.decide_grant`` with the backfill plugin's
``place_now``), applies its ``SubmitJob`` with that grant, and ends the oldest running job
(``--ends random``: any running job, as the fleet's exponential run times end them) once
``--running`` jobs hold CPUs, so every decision follows changed node views, as on a loaded
controller. With ``--in-flight K`` each submission is applied only K decisions after it was decided
(as Raft applies it on a loaded leader, which holds up to ``max_submit_queue`` = 256 in flight), and
the decisions between see it through ``spur.state.immediate.Flying``. Prints CPU microseconds per
decision and per applied command for each K (median of 3 repeats).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import deque

from spur.core.job import JobSpec, Node
from spur.state import commands as c
from spur.state.immediate import Flying, InFlight, decide_grant
from spur.state.machine import ClusterState


def _build(nodes: int) -> tuple[ClusterState, list[int]]:
    state = ClusterState()
    index = [0]

    def apply(cmd: object) -> object:
        index[0] += 1
        return state.apply(index[0], c.encode(cmd))

    for i in range(nodes):
        apply(c.RegisterNode(Node(name=f"n{i:05d}", address="127.0.0.1", cpus=8, memory_mb=32000), 1.0))
    return state, index


def run_once(
    nodes: int, running: int, decisions: int, in_flight: int = 0, random_ends: bool = False
) -> tuple[float, float]:
    """(CPU µs per decision, CPU µs per applied command) over ``decisions`` steady rounds, each
    submission applied ``in_flight`` decisions after its own. ``random_ends``: the job that ends is any
    running one (as with the fleet's exponential run times), not the oldest."""
    from spur_sched_backfill.planner import place_now

    state, index = _build(nodes)
    spec = JobSpec(name="fleet", script="#!/bin/sh\ntrue\n", work_dir="/tmp", cpus_per_task=1)
    holding: list[int] = []
    rng = random.Random(1)
    flying = Flying()
    proposed: deque[tuple[int, c.SubmitJob]] = deque()
    decide_cpu = apply_cpu = 0.0
    applied = 0
    now = 10.0
    for _ in range(running + decisions + in_flight):
        now += 0.002
        t0 = time.process_time()
        decision = decide_grant(
            state,
            spec,
            "alice",
            now,
            place=place_now,
            priorities=lambda jobs: {},
            limits=None,
            in_flight=flying,
        )
        key = flying.add(decision.in_flight or InFlight("", (), False))
        t1 = time.process_time()
        proposed.append(
            (key, c.SubmitJob(spec, "alice", 1000, 1000, "alice", now, list(decision.allocation)))
        )
        if len(proposed) <= in_flight:
            continue
        key, cmd = proposed.popleft()
        index[0] += 1
        job_id = state.apply(index[0], c.encode(cmd))
        flying.remove(key)
        applied += 1
        holding.append(job_id)
        if len(holding) > running:
            if random_ends:
                at = rng.randrange(len(holding))
                holding[at], holding[-1] = holding[-1], holding[at]
                gone = state.jobs[holding.pop()]
            else:
                gone = state.jobs[holding.pop(0)]
            index[0] += 1
            state.apply(index[0], c.encode(c.JobExited(gone.job_id, gone.allocation[0].node, 0, 0, now)))
            applied += 1
        t2 = time.process_time()
        if len(holding) >= running:  # steady state only
            decide_cpu += t1 - t0
            apply_cpu += t2 - t1
    return 1e6 * decide_cpu / decisions, 1e6 * apply_cpu / max(1, applied - running)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--running", type=int, default=500)
    ap.add_argument("--decisions", type=int, default=5000)
    ap.add_argument("--in-flight", default="0,64,256", help="comma-separated: submissions in flight per run")
    ap.add_argument(
        "--ends", choices=("oldest", "random"), default="oldest", help="which running job ends each round"
    )
    args = ap.parse_args()
    print(
        f"{args.nodes} nodes, {args.running} running 1-CPU jobs, {args.decisions} decisions (median of 3),"
        f" the {args.ends} running job ending each round"
    )
    for k in (int(x) for x in args.in_flight.split(",")):
        runs = [run_once(args.nodes, args.running, args.decisions, k, args.ends == "random") for _ in range(3)]
        decide = statistics.median(r[0] for r in runs)
        apply = statistics.median(r[1] for r in runs)
        print(
            f"  {k:3d} in flight: decide_grant {decide:8.1f} µs CPU per decision, apply {apply:6.1f} µs per command"
        )


if __name__ == "__main__":
    main()
