"""Accounting records of finished jobs: what the outbox holds and PostgreSQL stores (pure, no I/O).

A record is JSON-ready data built from a terminal :class:`~spur.core.job.Job` inside the apply that
finished it, so every controller builds the same record. Its key is (cluster id, job id, submit time):
the PostgreSQL upsert key, stable across leader changes and flush retries.

The record keeps the whole job (ids, array ids, name, user/uid, account, partition, QOS, state, exit
code, times, allocation, steps, time limit, work dir) except the batch script and the environment,
which can be large and are not accounting data.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from spur.core.job import Job
from spur.core.serde import from_plain, to_plain

__all__ = ["JobRecord", "job_record", "record_job", "record_key", "key_text", "record_columns", "COLUMNS"]

JobRecord = dict[str, Any]


def job_record(job: Job, cluster_id: str) -> JobRecord:
    """The accounting record of ``job`` (which must be terminal) in ``cluster_id``.

    Fields still at their dataclass default are left out (``from_plain`` restores them): a typical
    record is a few hundred bytes instead of two kilobytes, which keeps the outbox, its snapshots and
    the database rows small (rows under PostgreSQL's TOAST threshold are not compressed out of line).
    """
    plain = _compact(job)
    spec = plain.setdefault("spec", {})
    spec.pop("script", None)
    spec.pop("environment", None)
    return {"cluster_id": cluster_id, "job_id": job.job_id, "submit_time": job.submit_time, "job": plain}


def _compact(value: Any) -> Any:
    """``to_plain`` without dataclass fields equal to their defaults."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            if f.default_factory is not dataclasses.MISSING and v == f.default_factory():
                continue
            out[f.name] = _compact(v)
        return out
    if isinstance(value, list | tuple):
        return [_compact(v) for v in value]
    if isinstance(value, dict):
        return {k: _compact(v) for k, v in value.items()}
    return to_plain(value)


def record_job(record: JobRecord) -> Job:
    """The job a record was built from (script and environment empty)."""
    return from_plain(Job, record["job"])


def record_key(record: JobRecord) -> tuple[int, float]:
    """(job id, submit time): the record's key within its cluster."""
    return int(record["job_id"]), float(record["submit_time"])


def key_text(job_id: int, submit_time: float) -> str:
    """The key as one string (dictionary key in the outbox and its snapshot)."""
    return f"{int(job_id)}@{float(submit_time)!r}"


# Columns of spur_jobs written from a record, in this order (see spur.accounting.migrations).
COLUMNS = (
    "cluster_id",
    "job_id",
    "submit_time",
    "array_job_id",
    "array_task_id",
    "name",
    "user_name",
    "uid",
    "account",
    "partition",
    "qos",
    "state",
    "exit_code",
    "start_time",
    "end_time",
    "nodelist",
    "cpus",
    "mem_mb",
    "gpus",
    "time_limit_secs",
    "work_dir",
)


def record_columns(record: JobRecord) -> tuple[Any, ...]:
    """Values for :data:`COLUMNS` (the JSON record itself is stored next to them)."""
    from spur.core.hostlist import compress

    job = record["job"]
    spec = job["spec"]
    alloc = job.get("allocation") or []
    return (
        record["cluster_id"],
        int(record["job_id"]),
        float(record["submit_time"]),
        int(job.get("array_job_id") or 0),
        job.get("array_task_id"),
        spec.get("name", ""),
        job.get("user", ""),
        int(job.get("uid", 0)),
        spec.get("account", ""),
        job.get("partition", ""),
        spec.get("qos", ""),
        job.get("state", "PENDING"),
        int(job.get("exit_code", 0)),
        float(job.get("start_time", 0.0)),
        float(job.get("end_time", 0.0)),
        compress([a["node"] for a in alloc]) if alloc else "",
        sum(int(a.get("cpus", 0)) for a in alloc),
        sum(int(a.get("mem_mb", 0)) for a in alloc),
        sum(len(a.get("gpus") or []) for a in alloc),
        int(job.get("time_limit_secs", -1)),
        spec.get("work_dir", ""),
    )
