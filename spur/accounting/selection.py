"""Which jobs a sacct query selects, for records not (yet) in PostgreSQL (pure).

The controller answers sacct from PostgreSQL plus what the database cannot know yet: records still in
the outbox and jobs that have not finished. Both are filtered here with the same rules as the SQL in
:func:`spur.accounting.pgstore.build_job_query`.
"""

from __future__ import annotations

from spur.accounting.pgstore import JobQuery
from spur.core.job import Job

__all__ = ["job_matches"]


def job_matches(job: Job, q: JobQuery) -> bool:
    """True when ``job`` is selected by ``q`` (window: submitted by ``end``, not ended before ``start``)."""
    if job.submit_time > q.end:
        return False
    if job.end_time and job.end_time < q.start:
        return False
    if q.users and job.user not in q.users:
        return False
    if q.accounts and job.spec.account not in q.accounts:
        return False
    if q.partitions and job.partition not in q.partitions:
        return False
    if q.names and job.spec.name not in q.names:
        return False
    if q.states and job.state.value not in q.states:
        return False
    if q.jobs:
        return any(
            (task is None and job_id in (job.job_id, job.array_job_id))
            or (
                task is not None
                and job.array_job_id == job_id
                and job.array_task_id is not None
                and job.array_task_id == task
            )
            for job_id, task in q.jobs
        )
    return True
