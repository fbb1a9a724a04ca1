"""Build the scheduler plugin's immutable snapshot from the cluster state (pure)."""

from __future__ import annotations

from spur.core.job import Job, JobState, PartitionState
from spur.core.scheduling import LimitGate, PartitionView, SchedSnapshot, natural_key
from spur.state.machine import ClusterState
from spur.state.sched_index import node_view, pending_view, running_view

__all__ = ["build_snapshot", "eligible_jobs", "pending_view", "snapshot"]


def eligible_jobs(state: ClusterState, now: float) -> tuple[list[Job], dict[int, str]]:
    """Pending jobs the scheduler may start now, and Slurm's reason for every other pending job.

    An array with a ``%N`` limit offers at most N minus its running tasks, lowest task ids first.
    """
    from spur.core.eligibility import ARRAY_LIMIT, ineligible_reason
    from spur.state.feasibility import partition_reason

    jobs = state.jobs
    index = state.sched_index
    running_per_array = index.array_running  # kept as jobs take and give back resources
    offered = dict(running_per_array)
    summaries = {name: state.partition_summary(p) for name, p in state.partitions.items()}
    # A one-node, one-task job fits a partition whose biggest node has its CPUs (partition_reason's
    # verdict, without its arithmetic: this loop runs over every pending job of every pass).
    small_ok = {name: (s.nodes == 0 or s.max_cpus) for name, s in summaries.items()}
    eligible: list[Job] = []
    blocked: dict[int, str] = {}
    pending = index.pending
    for job_id in sorted(pending):
        job = jobs.get(job_id)
        if job is None or job.state is not JobState.PENDING:
            pending.discard(job_id)
            continue
        spec = job.spec
        if job.priority == 0 or spec.begin_time or spec.dependency or job.array_max_running:
            reason = ineligible_reason(job, jobs, state.array_tasks, running_per_array, now)
        else:
            reason = None  # ineligible_reason's checks, all of them trivially passed
        if reason is None:
            limit = small_ok.get(job.partition)
            if (
                limit is True
                or (limit and spec.num_nodes <= 1 and not (spec.num_tasks or spec.ntasks_per_node))
                and spec.cpus_per_task <= limit
            ):
                pass
            else:
                # Beyond its partition's nodes or CPUs: pends with Slurm's reason until it grows.
                summary = summaries.get(job.partition)
                reason = partition_reason(spec, summary) if summary is not None else None
        if reason is None and job.array_max_running:
            if offered.get(job.array_job_id, 0) >= job.array_max_running:
                reason = ARRAY_LIMIT
            else:
                offered[job.array_job_id] = offered.get(job.array_job_id, 0) + 1
        if reason is None:
            eligible.append(job)
        else:
            blocked[job_id] = reason
    return eligible, blocked


def build_snapshot(
    state: ClusterState,
    now: float,
    *,
    max_job_test: int = 0,
    eligible: list[Job] | None = None,
    priorities: dict[int, int] | None = None,
    limits: LimitGate | None = None,
) -> SchedSnapshot:
    """The plugin's view built from scratch; ``eligible`` defaults to ``eligible_jobs(state, now)[0]``.

    The scheduler loop uses ``snapshot`` (the same views, maintained incrementally); this one is the
    reference the tests compare it with.

    ``priorities`` (job id -> multifactor priority) replaces the jobs' stored priorities;
    ``limits`` is the pass's account/QOS limit gate (see ``SchedSnapshot.limits``).
    """
    if eligible is None:
        eligible = eligible_jobs(state, now)[0]
    part_nodes = {p.name: state.partition_nodes(p) for p in state.partitions.values()}
    node_parts: dict[str, list[str]] = {}
    for pname, names in part_nodes.items():
        for n in names:
            node_parts.setdefault(n, []).append(pname)
    nodes = tuple(
        node_view(state, name, tuple(node_parts.get(name, ()))) for name in sorted(state.nodes, key=natural_key)
    )
    running = tuple(running_view(j) for j in state.jobs.values() if j.state.holds_resources)
    prio = priorities or {}
    pending = tuple(pending_view(j, prio.get(j.job_id)) for j in eligible)
    partitions = tuple(
        PartitionView(name=p.name, nodes=tuple(part_nodes[p.name]), up=p.state is PartitionState.UP)
        for p in state.partitions.values()
    )
    return SchedSnapshot(
        now=now,
        pending=pending,
        nodes=nodes,
        running=running,
        partitions=partitions,
        max_job_test=max_job_test,
        limits=limits,
    )


def snapshot(
    state: ClusterState,
    now: float,
    *,
    max_job_test: int = 0,
    eligible: list[Job] | None = None,
    priorities: dict[int, int] | None = None,
    limits: LimitGate | None = None,
) -> SchedSnapshot:
    """``build_snapshot``'s result from the state's incrementally maintained views (see
    ``spur.state.sched_index``): only what changed since the last call is rebuilt. It also carries the
    index's ``layout`` (the same object while the cluster's shape holds) and ``running_by_node``."""
    if eligible is None:
        eligible = eligible_jobs(state, now)[0]
    index = state.sched_index
    nodes, running, partitions = index.views(state)
    prio = priorities or {}
    pending = tuple(index.pending_view(j, prio.get(j.job_id)) for j in eligible)
    return SchedSnapshot(
        now=now,
        pending=pending,
        nodes=nodes,
        running=running,
        partitions=partitions,
        max_job_test=max_job_test,
        limits=limits,
        layout=index.layout,
        node_running=index.running_by_node(),
    )
