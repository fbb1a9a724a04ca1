"""Whether a pending job may be offered to the scheduler now, and Slurm's reason when not (pure).

Order of reasons follows Slurm: held, begin time, dependency, array task limit.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

from spur.core.job import Job, JobState

if TYPE_CHECKING:
    from spur.core.job_options import Dependency, DependencyTarget

HELD_USER = "JobHeldUser"
HELD_ADMIN = "JobHeldAdmin"
BEGIN_TIME = "BeginTime"
DEPENDENCY = "Dependency"
NEVER = "DependencyNeverSatisfied"
ARRAY_LIMIT = "JobArrayTaskLimit"


class DepStatus(enum.Enum):
    SATISFIED = "satisfied"
    WAITING = "waiting"
    NEVER = "never"


@lru_cache(maxsize=4096)
def _parse(text: str) -> Dependency:
    from spur.core.job_options import parse_dependency

    return parse_dependency(text)


def dependency_error(text: str, known_ids: Iterable[int]) -> str | None:
    """At submit: why the dependency text is unacceptable (syntax, unknown job), or None."""
    try:
        dep = _parse(text)
    except ValueError as exc:
        return str(exc)
    known = set(known_ids)
    for cond in dep.conditions:
        for target in cond.targets:
            if target.job_id not in known:
                return f"Job dependency problem: job {target.job_id} is not known"
    return None


def _targets(
    jobs_by_array: Mapping[int, list[Job]], jobs: Mapping[int, Job], target: DependencyTarget
) -> list[Job]:
    if target.array_task_id is not None:
        return [j for j in jobs_by_array.get(target.job_id, []) if j.array_task_id == target.array_task_id]
    group = jobs_by_array.get(target.job_id)
    if group:
        return group
    job = jobs.get(target.job_id)
    return [job] if job is not None else []


def _one(kind: str, target_job: Job, delay_secs: float, now: float) -> DepStatus:
    state = target_job.state
    if kind == "after":
        began = target_job.start_time > 0
        if began and now >= target_job.start_time + delay_secs:
            return DepStatus.SATISFIED
        if state.is_terminal:
            return DepStatus.SATISFIED
        return DepStatus.WAITING
    if not state.is_terminal:
        return DepStatus.WAITING
    if kind == "afterany":
        return DepStatus.SATISFIED
    ok = state is JobState.COMPLETED
    if kind in ("afterok", "aftercorr"):
        return DepStatus.SATISFIED if ok else DepStatus.NEVER
    if kind == "afternotok":
        return DepStatus.NEVER if ok else DepStatus.SATISFIED
    return DepStatus.NEVER


def dependency_status(
    job: Job, jobs: Mapping[int, Job], jobs_by_array: Mapping[int, list[Job]], now: float
) -> DepStatus:
    """Evaluate ``job.spec.dependency`` against the current jobs."""
    try:
        dep = _parse(job.spec.dependency)
    except ValueError:
        return DepStatus.NEVER
    results: list[DepStatus] = []
    for cond in dep.conditions:
        if cond.type == "singleton":
            blocked = any(
                other.job_id < job.job_id
                and other.user == job.user
                and other.spec.name == job.spec.name
                and not other.state.is_terminal
                for other in jobs.values()
            )
            results.append(DepStatus.WAITING if blocked else DepStatus.SATISFIED)
            continue
        statuses: list[DepStatus] = []
        for target in cond.targets:
            if cond.type == "aftercorr" and target.array_task_id is None and job.array_task_id is not None:
                group = jobs_by_array.get(target.job_id, [])
                matches = [j for j in group if j.array_task_id == job.array_task_id]
            else:
                matches = _targets(jobs_by_array, jobs, target)
            if not matches:
                # The target aged out of the history: it finished long ago, so only its outcome is unknown.
                statuses.append(
                    DepStatus.SATISFIED if cond.type in ("after", "afterany") else DepStatus.NEVER
                )
                continue
            statuses.extend(_one(cond.type, m, target.delay_minutes * 60, now) for m in matches)
        if DepStatus.NEVER in statuses:
            results.append(DepStatus.NEVER)
        elif DepStatus.WAITING in statuses:
            results.append(DepStatus.WAITING)
        else:
            results.append(DepStatus.SATISFIED)
    if dep.any_of:
        if DepStatus.SATISFIED in results:
            return DepStatus.SATISFIED
        return DepStatus.WAITING if DepStatus.WAITING in results else DepStatus.NEVER
    if DepStatus.NEVER in results:
        return DepStatus.NEVER
    return DepStatus.WAITING if DepStatus.WAITING in results else DepStatus.SATISFIED


def ineligible_reason(
    job: Job,
    jobs: Mapping[int, Job],
    jobs_by_array: Mapping[int, list[Job]],
    running_per_array: Mapping[int, int],
    now: float,
) -> str | None:
    """Slurm's reason a PENDING job may not start now, or None when the scheduler may consider it."""
    if job.priority == 0:
        return HELD_ADMIN if job.held_by_admin else HELD_USER
    if job.spec.begin_time and job.spec.begin_time > now:
        return BEGIN_TIME
    if job.spec.dependency:
        status = dependency_status(job, jobs, jobs_by_array, now)
        if status is DepStatus.WAITING:
            return DEPENDENCY
        if status is DepStatus.NEVER:
            return NEVER
    if job.array_max_running and running_per_array.get(job.array_job_id, 0) >= job.array_max_running:
        return ARRAY_LIMIT
    return None


def dependency_display(job: Job) -> str:
    """``scontrol show job``'s Dependency= value."""
    if not job.spec.dependency or job.state is not JobState.PENDING:
        return "(null)"
    if job.reason == NEVER:
        return f"{job.spec.dependency}(failed)"
    if job.reason == DEPENDENCY:
        return f"{job.spec.dependency}(unfulfilled)"
    return "(null)"
