"""The rendered-jobs cache gives the answer the uncached path gives (v0.0.38: byte for byte; v0.0.4x:
the same JSON, the fields every job shares placed last), for every version, and renders a job again
when anything about it (or the cluster name) changed."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from spur.rest import mapping, v004x
from spur.rest.jobcache import PLACEHOLDER, RenderedJobs, RenderedList, render_answer, splice
from spur.rest.openapi import VERSIONS
from spur.rpc.proto import spur_pb2 as pb

V4 = VERSIONS[1:]


def _job(job_id: int, state: str, **spec: Any) -> pb.JobInfo:
    job = pb.JobInfo(job_id=job_id, user="alice", uid=1000, gid=1000, group="alice", state=state, reason="None",
                     partition="debug", time_limit_secs=300, priority=100, submit_time=1796282544.2,
                     eligible_time=1796282544)  # fmt: skip
    job.spec.name = f"job{job_id}"
    job.spec.work_dir = "/tmp"
    job.spec.MergeFrom(pb.JobSpec(**spec))
    if state != "PENDING":
        job.start_time = 1796282544
        job.nodelist = "vm[1-2]"
        job.allocation.add(node="vm1", cpus=2, mem_mb=100, tasks=1, gpus=[0, 1])
        job.allocation.add(node="vm2", cpus=1, mem_mb=100, tasks=1)
    if state in ("COMPLETED", "CANCELLED", "FAILED"):
        job.end_time = 1796282600
        job.signal = 15 if state == "CANCELLED" else 0
        job.exit_code = 3 if state == "FAILED" else 0
    return job


def _jobs() -> list[pb.JobInfo]:
    jobs = [
        _job(1, "RUNNING", exclusive=True, gpus_total=2),
        _job(2, "PENDING", cpus_per_task=2, hold=True, mem_per_cpu_mb=512, nice=5),
        _job(3, "COMPLETED", num_tasks=2, mem_per_node_mb=1000, comment="c"),
        _job(4, "CANCELLED"),
        _job(5, "FAILED", constraint=["a", "b"], exclude=["vm3"]),
        _job(6, "PENDING"),
    ]
    jobs[5].time_limit_secs = -1
    task = _job(7, "PENDING")
    task.array_job_id, task.array_task_id = 7, 0
    parent = _job(8, "PENDING")
    parent.array_job_id, parent.array_task_count, parent.array_task_min, parent.array_task_max = 8, 4, 0, 3
    return [*jobs, task, parent]


def _uncached(version: str, jobs: list[pb.JobInfo], cluster: str) -> bytes:
    d = v004x.Dialect(version)
    layout = d.job_resources_layout()
    shaper = d.response_shaper(f"/slurm/{version}/jobs/", "get")
    return orjson.dumps(shaper({"jobs": [v004x.job_info(j, cluster, layout) for j in jobs], "last_update": 1}))


def _cached(version: str, cache: RenderedJobs, jobs: list[pb.JobInfo], cluster: str, chunk: int = 1 << 20) -> bytes:
    shaper = v004x.Dialect(version).response_shaper(f"/slurm/{version}/jobs/", "get")
    return b"".join(render_answer({"jobs": cache.fragments(jobs, cluster, True), "last_update": 1}, shaper, chunk))


def _cache(version: str) -> RenderedJobs:
    d = v004x.Dialect(version)
    return RenderedJobs(d.job_renderer(d.job_resources_layout()))


@pytest.mark.parametrize("version", V4)
def test_cached_v004x_answers_are_the_uncached_answers(version: str) -> None:
    jobs = _jobs()
    cache = _cache(version)
    expected = _uncached(version, jobs, "spur")
    rendered = _cached(version, cache, jobs, "spur")
    assert orjson.loads(rendered) == orjson.loads(expected)
    assert (cache.misses, cache.hits) == (len(jobs), 0)
    assert _cached(version, cache, jobs, "spur") == rendered  # from the cache, byte for byte
    assert (cache.misses, cache.hits) == (len(jobs), len(jobs))
    assert b'"job_id":1,' in rendered and b'"job_id":8,' in rendered
    assert _cached(version, cache, jobs, "spur", chunk=1) == rendered  # one chunk per job


def test_fixed_fields_are_what_the_v0038_mapping_writes_for_every_job() -> None:
    """The fields the v0.0.4x renderer shapes once: job_to_slurm writes exactly those values."""
    for job in _jobs():
        d = mapping.job_to_slurm(job, "spur")
        assert {k: d[k] for k in mapping.JOB_FIXED} == mapping.JOB_FIXED


@pytest.mark.parametrize("layout", ["nodes", "allocated_nodes"])
def test_job_info_without_the_fixed_fields_holds_the_same_keys_for_every_job(layout: str) -> None:
    """The renderer's shaper looks up only these keys (SchemaShapers.for_keys)."""
    for job in _jobs():
        assert set(v004x.job_info(job, "spur", layout, fixed=False)) == v004x.VARIABLE_KEYS
        whole = v004x.job_info(job, "spur", layout)
        assert set(whole) == v004x.VARIABLE_KEYS | set(v004x.fixed_job_fields())
    # a key written per job is never also appended as a fixed one (the JSON would hold it twice)
    assert not v004x.VARIABLE_KEYS & set(v004x.fixed_job_fields())


@pytest.mark.parametrize("version", V4)
def test_the_job_renderer_gives_the_shaped_job_info(version: str) -> None:
    d = v004x.Dialect(version)
    layout = d.job_resources_layout()
    render, shape = d.job_renderer(layout), d.job_info_shaper()
    for job in _jobs():
        whole = orjson.dumps(shape(v004x.job_info(job, "spur", layout)))
        assert orjson.loads(render(job, "spur")) == orjson.loads(whole)
        assert len(render(job, "spur")) == len(whole)


def test_splice_places_the_items_where_the_placeholder_list_is() -> None:
    envelope = orjson.dumps({"meta": {"a": "x"}, "jobs": [PLACEHOLDER], "errors": []})
    items = [b'{"id":1}', b'{"id":2}', b'{"id":3}']
    for chunk in (1, 8, 9, 17, 1 << 20):
        chunks = splice(envelope, items, chunk)
        assert b"".join(chunks) == b'{"meta":{"a":"x"},"jobs":[{"id":1},{"id":2},{"id":3}],"errors":[]}'
        assert all(chunks)
    assert len(splice(envelope, items, 1)) == 4  # a chunk ends after each item reaching the size, then the tail
    assert b"".join(splice(envelope, [], 1)) == b'{"meta":{"a":"x"},"jobs":[],"errors":[]}'
    with pytest.raises(ValueError):
        splice(b'{"jobs":[]}', items)


def test_render_answer_is_orjson_of_the_items_as_fragments() -> None:
    items = RenderedList([b'{"id":1}', rb'"a\u0000b"'])  # an escaped NUL inside an item is no placeholder
    data = {"jobs": items, "meta": {"plugin": "x"}, "n": 2}
    expected = orjson.dumps({"jobs": [orjson.Fragment(i) for i in items], "meta": {"plugin": "x"}, "n": 2})
    assert b"".join(render_answer(data)) == expected
    assert render_answer({"a": [1]}) == [b'{"a":[1]}']
    with pytest.raises(ValueError):
        render_answer({"a": RenderedList(), "b": RenderedList()})


def test_cached_v0038_answers_are_the_uncached_answers_byte_for_byte() -> None:
    jobs = _jobs()
    cache = RenderedJobs(lambda job, cluster: orjson.dumps(mapping.job_to_slurm(job, cluster)))
    expected = orjson.dumps({"jobs": [mapping.job_to_slurm(j, "spur") for j in jobs]})
    for _ in range(2):
        assert b"".join(render_answer({"jobs": cache.fragments(jobs, "spur")})) == expected
    assert (cache.misses, cache.hits) == (len(jobs), len(jobs))


@pytest.mark.parametrize("version", V4)
def test_a_changed_job_or_cluster_is_rendered_again(version: str) -> None:
    jobs = _jobs()
    cache = _cache(version)
    _cached(version, cache, jobs, "spur")
    jobs[1].state = "RUNNING"
    jobs[1].reason = "None"
    jobs[2].spec.comment = "changed"
    assert orjson.loads(_cached(version, cache, jobs, "spur")) == orjson.loads(_uncached(version, jobs, "spur"))
    assert cache.misses == len(jobs) + 2
    assert b'"comment":"changed"' in _cached(version, cache, jobs, "spur")
    assert orjson.loads(_cached(version, cache, jobs, "other")) == orjson.loads(_uncached(version, jobs, "other"))
    assert cache.misses == 2 * len(jobs) + 2


def test_a_complete_listing_drops_entries_of_jobs_no_longer_listed() -> None:
    cache = RenderedJobs(lambda job, cluster: orjson.dumps(mapping.job_to_slurm(job, cluster)))
    many = [_job(i, "PENDING") for i in range(1, 1203)]
    cache.fragments(many, "spur", complete=True)
    assert len(cache) == 1202
    cache.fragments(many[:100], "spur")  # a partial listing (one job's GET) drops nothing
    assert len(cache) == 1202
    cache.fragments(many[:100], "spur", complete=True)
    assert len(cache) == 100
    cache.fragments(many[:100], "spur", complete=True)
    assert (len(cache), cache.hits, cache.misses) == (100, 300, 1202)


def _state_with_jobs(n: int) -> Any:
    from spur.core.job import JobSpec
    from spur.state import commands as c
    from spur.state.machine import ClusterState

    state = ClusterState()
    for i in range(n):
        spec = JobSpec(name=f"j{i}", script="#!/bin/sh\ntrue\n", work_dir="/tmp")
        state.apply(i + 1, c.encode(c.SubmitJob(spec, "alice", 1000, 1000, "alice", 1796282544.0 + i)))
    return state


@pytest.mark.parametrize("version", ["v0.0.38", *V4])
def test_frames_from_the_getjobs_cache_render_changed_jobs_again(version: str) -> None:
    """The leader's path: the controller's kept encodings (the same bytes objects while a job is
    unchanged) key the rendered JSON; a job changed by a state command gets a new encoding, so it
    is rendered again, and the answer is always the uncached one."""
    from spur.rpc.jobinfo_cache import JobInfoCache
    from spur.state import commands as c

    state = _state_with_jobs(5)
    getjobs = JobInfoCache()
    if version == "v0.0.38":
        cache = RenderedJobs(lambda job, cluster: orjson.dumps(mapping.job_to_slurm(job, cluster)))
        shaper = None
    else:
        cache = _cache(version)
        shaper = v004x.Dialect(version).response_shaper(f"/slurm/{version}/jobs/", "get")

    def listing(cluster: str = "spur") -> bytes:
        frames = [getjobs.framed(j) for j in state.jobs.values()]
        return b"".join(render_answer({"jobs": cache.render_frames(frames, cluster, True)}, shaper))

    def uncached(cluster: str = "spur") -> bytes:
        jobs = getjobs.response(state.jobs.values()).jobs
        if version == "v0.0.38":
            return orjson.dumps({"jobs": [mapping.job_to_slurm(j, cluster) for j in jobs]})
        assert shaper is not None
        layout = v004x.Dialect(version).job_resources_layout()
        return orjson.dumps(shaper({"jobs": [v004x.job_info(j, cluster, layout) for j in jobs]}))

    first = listing()
    assert orjson.loads(first) == orjson.loads(uncached())
    assert (cache.hits, cache.misses) == (0, 5)
    assert listing() == first
    assert (cache.hits, cache.misses) == (5, 5)
    state.apply(10, c.encode(c.UpdateJob(2, 0, 1796282600.0, comment="changed", admin=True)))
    state.apply(11, c.encode(c.CancelJob(4, 0, 1796282601.0, admin=True)))
    after = listing()
    assert orjson.loads(after) == orjson.loads(uncached())
    assert (cache.hits, cache.misses) == (8, 7)  # jobs 2 and 4 rendered again
    assert b"changed" in after and b"CANCELLED" in after
    assert orjson.loads(listing("other")) == orjson.loads(uncached("other"))  # another cluster: every job again
    assert (cache.hits, cache.misses) == (8, 12)
