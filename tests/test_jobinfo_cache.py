"""The controller's per-job cache of encoded JobInfo: exactly what a fresh conversion gives, always.

The cache key (:func:`spur.rpc.jobinfo_cache.job_info_key`) must change whenever anything that reaches
the wire changes, whichever code path mutated the job in place; these tests change every field of the
job, its spec and its allocation one at a time and compare with a fresh conversion.
"""

from __future__ import annotations

import copy
from dataclasses import fields

import pytest

from spur.core.job import Job, JobSpec, JobState, NodeAllocation, Step, StepSpec
from spur.rpc.convert import job_to_proto
from spur.rpc.jobinfo_cache import JobInfoCache, job_info_key
from spur.rpc.proto import spur_pb2 as pb


def sample_job(job_id: int = 7) -> Job:
    spec = JobSpec(
        name="train",
        script="#!/bin/sh\ntrue\n",
        argv=["a"],
        work_dir="/tmp",
        environment={"SLURM_SUBMIT_HOST": "login1", "X": "1"},
        num_tasks=2,
        gres=["gpu:1"],
        nodelist=["n1"],
        constraint=["fast"],
        dependency="afterok:3",
    )
    return Job(
        job_id=job_id,
        spec=spec,
        user="alice",
        uid=1000,
        gid=1000,
        group="alice",
        state=JobState.RUNNING,
        reason="None",
        partition="debug",
        time_limit_secs=600,
        priority=5,
        submit_time=100.0,
        start_time=110.0,
        allocation=[NodeAllocation("n1", 2, 100, [0], 2)],
        array_job_id=job_id,
        array_task_id=0,
    )


def fresh(jobs: list[Job]) -> bytes:
    return pb.GetJobsResponse(jobs=[job_to_proto(j, include_script=False) for j in jobs]).SerializeToString()


def changed(value: object) -> object:
    """A different value of the same type (for every field type Job/JobSpec/NodeAllocation use)."""
    if isinstance(value, JobState):
        return JobState.PENDING if value is not JobState.PENDING else JobState.FAILED
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 3
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return value + [changed(value[0]) if value else "n9"]
    if isinstance(value, dict):
        return {**value, "SLURM_SUBMIT_HOST": "elsewhere"}
    if isinstance(value, NodeAllocation):
        return NodeAllocation("n7", 1)
    if value is None:
        return 4
    raise AssertionError(f"no changed value for {value!r}")


def test_response_matches_a_fresh_conversion_and_reuses_entries() -> None:
    cache = JobInfoCache()
    jobs = [sample_job(i) for i in range(1, 6)]
    jobs[1].steps.append(Step(0, StepSpec(argv=["hostname"])))
    assert cache.response(jobs).SerializeToString() == fresh(jobs)
    assert cache.response(jobs).SerializeToString() == fresh(jobs)
    assert len(cache) == 4  # the job with a step is converted every time, not stored
    assert cache.hits == 4 and cache.misses == 6


@pytest.mark.parametrize("part", ["job", "spec", "allocation"])
def test_every_field_that_reaches_the_wire_invalidates_the_entry(part: str) -> None:
    """Change each field in place; whenever a fresh conversion differs, so does the cached answer."""
    base = sample_job()
    target = {"job": base, "spec": base.spec, "allocation": base.allocation[0]}[part]
    names = [f.name for f in fields(type(target)) if f.name not in ("steps", "spec")]
    reached = 0
    for name in names:
        job = copy.deepcopy(base)
        cache = JobInfoCache()
        before = cache.response([job]).SerializeToString()
        obj = {"job": job, "spec": job.spec, "allocation": job.allocation[0]}[part]
        value = getattr(obj, name)
        if isinstance(value, list | dict):  # mutate the container itself, as in-place code would
            new = changed(value)
            if isinstance(value, list):
                value.append(new[-1])  # type: ignore[index]
            else:
                value.update(new)  # type: ignore[arg-type]
        else:
            setattr(obj, name, changed(value))
        expected = fresh([job])
        assert cache.response([job]).SerializeToString() == expected, f"{part}.{name} served stale"
        if expected != before:
            reached += 1
    assert reached >= len(names) // 2  # most fields do reach the wire (guards the test itself)


def test_state_change_and_dependency_display_follow_the_job() -> None:
    job = sample_job()
    job.state, job.reason, job.allocation = JobState.PENDING, "Dependency", []
    cache = JobInfoCache()
    first = cache.response([job]).jobs[0]
    assert (first.state, first.dependency) == ("PENDING", "afterok:3(unfulfilled)")
    job.reason = "DependencyNeverSatisfied"
    assert cache.response([job]).jobs[0].dependency == "afterok:3(failed)"
    job.state, job.reason = JobState.CANCELLED, "None"
    shown = cache.response([job]).jobs[0]
    assert (shown.state, shown.dependency) == ("CANCELLED", "(null)")


def test_entries_of_departed_jobs_are_pruned() -> None:
    cache = JobInfoCache()
    jobs = [sample_job(i) for i in range(1, 1202)]
    live = {j.job_id: j for j in jobs}
    cache.response(jobs, live)
    assert len(cache) == 1201
    del live[1]
    cache.response(jobs[1:2], live)  # 1201 entries, 1200 live jobs: within the slack, kept
    assert len(cache) == 1201
    cache.response(jobs[1:2], {2: jobs[1]})
    assert len(cache) == 1


def test_key_is_none_only_for_jobs_with_steps() -> None:
    job = sample_job()
    assert job_info_key(job) is not None
    job.steps.append(Step(1, StepSpec()))
    assert job_info_key(job) is None
