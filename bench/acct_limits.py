"""Scheduler pass time with account limits (GrpTRES, MaxJobs) enforced vs the same pass without.

    python -m bench.acct_limits [--accounts 1000] [--users 10000] [--jobs 10000] [--nodes 1000] [--repeat 3]

Builds a ClusterState through its own commands: ``--nodes`` nodes of 64 CPUs, an account tree of
``--accounts`` accounts (50 departments, the rest under them), ``--users`` users each in one account,
a fifth of the CPUs already held by running jobs of those users, and ``--jobs`` pending jobs of 1-16
CPUs spread over the users. Then times what the controller's scheduler pass computes
(``SchedulerLoop.cycle`` without the Raft proposals): eligibility, multifactor priorities, the
limit gate (charging every running job), the snapshot and the backfill plan, with

- no limits: ``[accounting] enforce = []`` (no limit checks at all);
- limits on every account, none reached: ``enforce = ["limits"]``, ``GrpTRES=cpu=10^9`` on every
  account and ``MaxJobs=100000`` on every department: the pure cost of checking and counting (the
  plan starts the same jobs); also as the first pass after a sacctmgr change (limit table rebuilt,
  every job's association resolved again);
- limits, a third at theirs: ``GrpTRES=cpu=N`` with N = what the account already runs for a third of
  the accounts (+64 CPUs for the others), ``MaxJobs=20`` per department: jobs are held with
  AssocGrpCpuLimit/AssocMaxJobsLimit (compared with a no-limits pass measured alongside).

Both with the controller's default ``max_job_test`` (1000) and uncapped (0). Prints the median CPU
time of a pass (process time: other load on the machine does not count) and the ratio to the pass
without limits. Nothing here asserts.
"""

from __future__ import annotations

import argparse
import random
import time

from bench.common import median, print_table
from spur.core.job import JobSpec, Node, NodeAllocation
from spur.state import commands as c
from spur.state.accounting import AcctAdd, AcctModify, ConfigureAccounting
from spur.state.machine import ClusterState
from spur.state.sched_view import build_snapshot, eligible_jobs

NOW = 1_000_000.0
CPUS = 64


def build(accounts: int, users: int, jobs: int, nodes: int, seed: int = 7) -> ClusterState:
    rng = random.Random(seed)
    state = ClusterState()
    state.apply_command(ConfigureAccounting("bench", [], 7 * 86400.0))
    for k in range(nodes):
        state.apply_command(c.RegisterNode(Node(f"n{k:05d}", cpus=CPUS, memory_mb=256_000), NOW - 1000))
    depts = min(50, accounts)
    names = []
    for d in range(depts):
        state.apply_command(AcctAdd("account", [f"dept{d}"], {}))
        names.append(f"dept{d}")
    for a in range(accounts - depts):
        name = f"acct{a}"
        state.apply_command(AcctAdd("account", [name], {"parent": f"dept{a % depts}"}))
        names.append(name)
    leaves = names[depts:] or names
    owner: list[tuple[str, str]] = []
    for u in range(users):
        account = leaves[u % len(leaves)]
        state.apply_command(AcctAdd("user", [f"user{u}"], {"account": account}))
        owner.append((f"user{u}", account))
    # Running jobs on a fifth of the CPUs, one 16-CPU job per slot.
    running_slots = nodes * CPUS // 5 // 16
    for r in range(running_slots):
        user, account = owner[rng.randrange(users)]
        spec = JobSpec(
            script="#!/bin/sh\n", work_dir="/tmp", cpus_per_task=16, account=account, time_limit_secs=3600
        )
        job_id = state.apply_command(c.SubmitJob(spec, user, 1000, 1000, "g", NOW - 500))
        node = f"n{(r * 16 // CPUS) % nodes:05d}"
        state.apply_command(c.StartJob(job_id, [NodeAllocation(node, 16)], NOW - 400, 1))
    for _ in range(jobs):
        user, account = owner[rng.randrange(users)]
        spec = JobSpec(
            script="#!/bin/sh\n",
            work_dir="/tmp",
            cpus_per_task=rng.choice([1, 2, 4, 8, 16]),
            account=account,
            time_limit_secs=rng.choice([600, 3600, 14400]),
        )
        state.apply_command(c.SubmitJob(spec, user, 1000, 1000, "g", NOW - rng.randint(0, 3600)))
    return state


def enforce_limits(state: ClusterState, accounts: int, *, binding: bool = True) -> None:
    acct = state.domains["accounting"]
    used: dict[str, int] = {}
    for job in state.active_jobs():
        used[job.spec.account] = used.get(job.spec.account, 0) + sum(a.cpus for a in job.allocation)
    for name in list(acct.accounts):
        if name == "root":
            continue
        if name.startswith("dept"):
            state.apply_command(
                AcctModify("account", {"name": name}, {"maxjobs": "20" if binding else "100000"})
            )
            continue
        cap = used.get(name, 0) + (0 if int(name[4:]) % 3 == 0 else 64) if binding else 10**9
        state.apply_command(AcctModify("account", {"name": name}, {"grptres": f"cpu={cap}"}))
    state.apply_command(ConfigureAccounting("bench", ["limits"], 7 * 86400.0))


def one_pass(state: ClusterState, cap: int, *, cold: bool = False) -> tuple[float, int, int]:
    """Seconds for one scheduler pass; jobs started; jobs held by a limit. ``cold``: as the first
    pass after a sacctmgr change (the limit table rebuilt, every job's association re-resolved)."""
    from spur_sched_backfill import plan

    from spur.accounting.priority import PriorityWeights

    acct = state.domains["accounting"]
    if cold:
        acct._table = None
        acct._generation += 1
    began = time.process_time()
    eligible, _reasons = eligible_jobs(state, NOW)
    prio = acct.priorities(eligible, PriorityWeights(), NOW)
    if cap and len(eligible) > cap:
        eligible.sort(key=lambda j: (-prio.get(j.job_id, j.priority), j.submit_time, j.job_id))
        eligible = eligible[:cap]
    snapshot = build_snapshot(
        state, NOW, max_job_test=cap, eligible=eligible, priorities=prio, limits=acct.scheduling_gate()
    )
    result = plan(snapshot, {})
    elapsed = time.process_time() - began
    limited = sum(1 for r in result.reasons.values() if r.startswith(("Assoc", "QOS")))
    return elapsed, len(result.assignments), limited


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accounts", type=int, default=1000)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    state = build(args.accounts, args.users, args.jobs, args.nodes)
    print(f"built state in {time.perf_counter() - t0:.1f}s: {len(state.jobs)} jobs, {args.nodes} nodes")
    # Modes alternate within each repeat (the machine's load drifts); "off" flips the domain's
    # enforce list in place so the caches of the limits modes survive.
    acct = state.domains["accounting"]
    runs: dict[tuple[str, int], list[tuple[float, int, int]]] = {}
    for binding, modes in ((False, ("off", "loose", "loose-cold")), (True, ("off-tight", "tight"))):
        enforce_limits(state, args.accounts, binding=binding)
        for cap in (1000, 0):
            for _ in range(args.repeat):
                for mode in modes:
                    acct.enforce = [] if mode.startswith("off") else ["limits"]
                    runs.setdefault((mode, cap), []).append(one_pass(state, cap, cold=mode.endswith("-cold")))
        acct.enforce = ["limits"]
    results = {k: (median([r[0] for r in v]), v[0][1], v[0][2]) for k, v in runs.items()}
    rows = []
    for cap in (1000, 0):
        off = results[("off", cap)][0]
        for mode, label in (
            ("off", "no limits (enforce = [])"),
            ("loose", "limits on every account, none reached"),
            ("loose-cold", "same, first pass after a sacctmgr change"),
            ("tight", "limits, a third of the accounts at theirs"),
        ):
            secs, started, held = results[(mode, cap)]
            base = results[("off-tight", cap)][0] if mode == "tight" else off
            rows.append([cap or "none", label, f"{secs * 1000:.0f} ms", f"{secs / base:.2f}", started, held])
    print_table(
        ["max_job_test", "pass", "time", "ratio to no limits", "started", "held by a limit"],
        rows,
        title=f"{args.accounts} accounts, {args.users} users, {args.jobs} pending jobs, {args.nodes} nodes",
    )


if __name__ == "__main__":
    main()
