"""Encoded ``JobInfo`` messages kept per job, so listing the queue does not convert every job per call.

``squeue`` and ``scontrol show job`` ask the controller for ``GetJobs``; building the answer ran
:func:`spur.rpc.convert.job_to_proto` (Python-level message construction, tens of microseconds a job)
for every listed job on every call, which was most of a 600-job ``squeue``'s wait. Jobs are mutated
in place by the state machine, so there is no cheap per-job version to key a cache on. Instead each
entry is keyed by the job's *fingerprint*: a tuple of every value ``job_to_proto(job,
include_script=False)`` reads (the job's scalars, the spec's fields but the script and environment,
the allocation, the submit host, the dependency display inputs). Conversion is a pure function of
those values, so an equal fingerprint means byte-identical output: the cache is exact by
construction, whatever code path changed the job. Computing and comparing a fingerprint costs a few
microseconds against the conversion's tens (see ``tests/test_jobinfo_cache.py``, which checks that
changing any field that reaches the wire changes the fingerprint).

Jobs with steps are converted every time (the fingerprint would have to cover every step; such jobs
are few and running). Entries of jobs no longer listed are dropped when the cache outgrows the state
(:meth:`JobInfoCache.prune`), so it holds at most about one entry per job in the state.

Pure: no I/O; part of the wire layer (it imports the protobuf module and the conversion).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import fields
from operator import attrgetter

from spur.core.job import Job, JobSpec
from spur.rpc.convert import embedded_field, job_to_proto
from spur.rpc.proto import spur_pb2 as pb

__all__ = ["JobInfoCache", "frame", "job_info_key"]

# Job attributes job_to_proto reads directly (plus array_task_id, whose presence matters).
_JOB_VALUES = attrgetter(
    "job_id", "user", "uid", "gid", "group", "state", "reason", "submit_time", "start_time",
    "end_time", "exit_code", "signal", "partition", "time_limit_secs", "priority", "array_job_id",
    "array_max_running", "array_task_count", "array_task_min", "array_task_max", "eligible_time",
    "restarts", "suspend_time", "suspended_secs", "array_task_id",
)  # fmt: skip
# JobSpec fields that reach the wire without the script (script and environment are left out).
_SPEC_NAMES = tuple(f.name for f in fields(JobSpec) if f.name not in ("script", "environment"))


def _list_fields(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for n in names if JobSpec.__dataclass_fields__[n].default_factory is list)


_SPEC_LISTS = _list_fields(_SPEC_NAMES)
_SPEC_SCALARS = attrgetter(*(n for n in _SPEC_NAMES if n not in _SPEC_LISTS))
_SPEC_LIST_VALUES = attrgetter(*_SPEC_LISTS)


def job_info_key(job: Job) -> tuple[object, ...] | None:
    """Every input of ``job_to_proto(job, include_script=False)``, copied out of mutable containers;
    None for a job that is not cached (one with steps). Equal keys mean equal encodings."""
    if job.steps:
        return None
    spec = job.spec
    return (
        _JOB_VALUES(job),
        _SPEC_SCALARS(spec),
        tuple(map(tuple, _SPEC_LIST_VALUES(spec))),
        spec.environment.get("SLURM_SUBMIT_HOST", ""),
        tuple((a.node, a.cpus, a.mem_mb, tuple(a.gpus), a.tasks) for a in job.allocation),
    )


def frame(data: bytes) -> bytes:
    """An encoded ``JobInfo`` as field 1 (``jobs``) of a ``GetJobsResponse``: tag, length, ``data``."""
    return embedded_field(1, data)


class JobInfoCache:
    """Per job id: (fingerprint, the job's ``JobInfo`` field of a ``GetJobsResponse``, framed)."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[tuple[object, ...], bytes]] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def framed(self, job: Job) -> bytes:
        """The job as field 1 (``jobs``) of a ``GetJobsResponse``: tag, length, encoded ``JobInfo``.
        An unchanged cached job gives the same ``bytes`` object each call."""
        key = job_info_key(job)
        if key is not None:
            hit = self._entries.get(job.job_id)
            if hit is not None and hit[0] == key:
                self.hits += 1
                return hit[1]
        framed = frame(job_to_proto(job, include_script=False).SerializeToString())
        self.misses += 1
        if key is not None:
            self._entries[job.job_id] = (key, framed)
        return framed

    def response(self, jobs: Iterable[Job], live: Collection[int] | None = None) -> pb.GetJobsResponse:
        """``GetJobsResponse(jobs=[job_to_proto(j, include_script=False) for j in jobs])``, built from
        cached encodings (one C-level parse of the joined bytes). ``live`` (the state's job mapping),
        when given, lets the cache drop entries of jobs that are gone."""
        return self.response_of([self.framed(j) for j in jobs], live)

    def response_of(self, frames: Iterable[bytes], live: Collection[int] | None = None) -> pb.GetJobsResponse:
        """The ``GetJobsResponse`` of jobs already :meth:`framed` (a caller building the frames in slices),
        in their order; ``live`` as in :meth:`response`."""
        data = b"".join(frames)
        if live is not None:
            self.prune(live)
        return pb.GetJobsResponse.FromString(data)

    def prune(self, live: Collection[int]) -> None:
        """Drop entries whose job id is not in ``live`` once the cache holds more than ``len(live)``
        (+1,000) entries: amortised O(1) per listed job, memory bounded by the state's size."""
        if len(self._entries) > len(live) + 1000:
            self._entries = {i: e for i, e in self._entries.items() if i in live}
