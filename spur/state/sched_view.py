"""Build the scheduler plugin's immutable snapshot from the cluster state (pure)."""

from __future__ import annotations

from spur.core.job import Job, JobState, PartitionState
from spur.core.scheduling import (
    LimitGate,
    NodeView,
    PartitionView,
    PendingView,
    RunningView,
    SchedSnapshot,
    end_time_of,
)
from spur.state.machine import ClusterState


def pending_view(job: Job, priority: int | None = None) -> PendingView:
    """The plugin's view of a pending job; ``priority`` overrides the stored one (multifactor)."""
    from spur.core.resources import gpus_per_node

    spec = job.spec
    gpn, gtype = gpus_per_node(list(spec.gres)) if spec.gres else (0, "")
    return PendingView(
        job_id=job.job_id,
        priority=job.priority if priority is None else priority,
        submit_time=job.submit_time,
        partition=job.partition,
        num_nodes=spec.num_nodes,
        num_tasks=spec.tasks,
        cpus_per_task=spec.cpus_per_task,
        ntasks_per_node=spec.ntasks_per_node,
        mem_per_node_mb=spec.mem_per_node_mb,
        mem_per_cpu_mb=spec.mem_per_cpu_mb,
        gpus_per_node=gpn,
        gpus_total=spec.gpus_total,
        gpu_type=gtype,
        time_limit_secs=job.time_limit_secs,
        nodelist=tuple(spec.nodelist),
        exclude=tuple(spec.exclude),
        exclusive=spec.exclusive,
        features=tuple(spec.constraint),
    )


def eligible_jobs(state: ClusterState, now: float) -> tuple[list[Job], dict[int, str]]:
    """Pending jobs the scheduler may start now, and Slurm's reason for every other pending job.

    An array with a ``%N`` limit offers at most N minus its running tasks, lowest task ids first.
    """
    from spur.state.eligibility import ARRAY_LIMIT, ineligible_reason

    running_per_array: dict[int, int] = {}
    for job in state.jobs.values():
        if job.array_job_id and job.state.holds_resources:
            running_per_array[job.array_job_id] = running_per_array.get(job.array_job_id, 0) + 1
    offered = dict(running_per_array)
    from spur.state.feasibility import partition_reason

    summaries = {name: state.partition_summary(p) for name, p in state.partitions.items()}
    eligible: list[Job] = []
    blocked: dict[int, str] = {}
    for job in sorted(
        (j for j in state.jobs.values() if j.state is JobState.PENDING), key=lambda j: j.job_id
    ):
        reason = ineligible_reason(job, state.jobs, state.array_tasks, running_per_array, now)
        if reason is None:
            # Beyond its partition's nodes or CPUs: pends with Slurm's reason until the partition grows.
            summary = summaries.get(job.partition)
            reason = partition_reason(job.spec, summary) if summary is not None else None
        if reason is None and job.array_max_running:
            if offered.get(job.array_job_id, 0) >= job.array_max_running:
                reason = ARRAY_LIMIT
            else:
                offered[job.array_job_id] = offered.get(job.array_job_id, 0) + 1
        if reason is None:
            eligible.append(job)
        else:
            blocked[job.job_id] = reason
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
    """The plugin's view; ``eligible`` defaults to ``eligible_jobs(state, now)[0]``.

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
    nodes = []
    for name in sorted(state.nodes):
        node = state.nodes[name]
        used = state.usage(name)
        all_gpus = sorted(g.index for g in node.gpus)
        models = {g.index: g.model for g in node.gpus}
        nodes.append(
            NodeView(
                name=name,
                cpus_total=node.cpus,
                cpus_free=0 if used.exclusive else max(0, node.cpus - used.cpus),
                mem_total_mb=node.memory_mb,
                mem_free_mb=0 if used.exclusive else max(0, node.memory_mb - used.mem_mb),
                gpus_free=() if used.exclusive else tuple(i for i in all_gpus if i not in used.gpus),
                gpus_total=len(all_gpus),
                gpu_models=tuple(models.get(i, "") for i in range(max(all_gpus, default=-1) + 1)),
                partitions=tuple(node_parts.get(name, ())),
                features=tuple(node.features),
                available=state.node_available(name),
                running_jobs=len(used.jobs),
            )
        )
    running = tuple(
        RunningView(
            job_id=j.job_id,
            end_time=end_time_of(j.start_time, j.time_limit_secs),
            allocation=tuple(j.allocation),
            exclusive=j.spec.exclusive,
        )
        for j in state.jobs.values()
        if j.state.holds_resources
    )
    prio = priorities or {}
    pending = tuple(pending_view(j, prio.get(j.job_id)) for j in eligible)
    partitions = tuple(
        PartitionView(name=p.name, nodes=tuple(part_nodes[p.name]), up=p.state is PartitionState.UP)
        for p in state.partitions.values()
    )
    return SchedSnapshot(
        now=now,
        pending=pending,
        nodes=tuple(nodes),
        running=running,
        partitions=partitions,
        max_job_test=max_job_test,
        limits=limits,
    )
