"""JobsPrerender: a pass renders every listed job into the caches of the versions named or listed
during this leadership, and no other (exactly what a request would render), stops at the first
change between chunks or while a request renders a job list (and is tried again later), waits for a
quiet state, and does nothing where ``listed()`` is None."""

from __future__ import annotations

import trio
import trio.testing

from spur.config.model import RestConfig
from spur.rest.jobcache import RenderedJobs
from spur.rest.openapi import VERSIONS
from spur.rest.prerender import JobsPrerender
from spur.rpc.jobinfo_cache import frame
from spur.rpc.proto import spur_pb2 as pb


def _render(job: pb.JobInfo, cluster: str) -> bytes:
    return f'{{"id":{job.job_id},"state":"{job.state}","cluster":"{cluster}"}}'.encode()


def _jobs(n: int) -> list[pb.JobInfo]:
    return [pb.JobInfo(job_id=i, state="PENDING") for i in range(1, n + 1)]


def _framed(job: pb.JobInfo) -> bytes:
    return frame(job.SerializeToString())


class _Changes:
    """A fake ``wait_change``: ``change()`` wakes every waiter."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def change(self) -> None:
        self._event.set()
        self._event = trio.Event()

    async def wait_change(self) -> None:
        await self._event.wait()


def _prerender(jobs: list[pb.JobInfo] | None, caches: list[RenderedJobs], changes: _Changes,
               chunk: int = 3, busy: list[bool] | None = None) -> JobsPrerender[pb.JobInfo]:  # fmt: skip
    """Every cache's version named (``v0``, ``v1``, ...)."""
    flag = busy if busy is not None else [False]
    versions = {f"v{i}": cache for i, cache in enumerate(caches)}
    return JobsPrerender(versions, lambda: "c1", lambda: jobs, _framed, changes.wait_change, lambda: flag[0],
                         named=versions, chunk=chunk)  # fmt: skip


async def test_a_pass_fills_every_cache_with_what_a_request_renders() -> None:
    jobs = _jobs(10)
    caches = [RenderedJobs(_render), RenderedJobs(lambda j, c: _render(j, c) + b" ")]
    ahead = _prerender(jobs, caches, _Changes())
    assert await ahead.prerender() is True
    frames = [_framed(j) for j in jobs]
    for cache in caches:
        assert cache.missing(frames) == []
        fresh = RenderedJobs(cache._render)
        assert cache.render_frames(frames, "c1") == fresh.render_frames(frames, "c1")
        assert cache.misses == 10 and cache.hits == 10  # the request after the pass rendered nothing
    assert ahead.rendered == 20
    assert await ahead.prerender() is True and ahead.rendered == 20  # nothing left to render


async def test_a_pass_stops_at_the_first_change_between_chunks() -> None:
    jobs = _jobs(10)
    cache = RenderedJobs(_render)
    ahead = _prerender(jobs, [cache], _Changes(), chunk=3)
    calls = 0

    def changed() -> bool:
        nonlocal calls
        calls += 1
        return calls > 5  # a change after the 4 framing chunks and the first rendering chunk

    assert await ahead.prerender(changed) is False
    assert len(cache) == 3 and ahead.rendered == 3


async def test_no_listing_no_pass() -> None:
    cache = RenderedJobs(_render)
    ahead = _prerender(None, [cache], _Changes())
    assert await ahead.prerender() is True
    assert len(cache) == 0


async def test_run_waits_for_a_quiet_state(autojump_clock: trio.testing.MockClock) -> None:
    jobs = _jobs(4)
    cache = RenderedJobs(_render)
    changes = _Changes()
    ahead = _prerender(jobs, [cache], changes)
    async with trio.open_nursery() as nursery:
        await nursery.start(ahead.run)
        await trio.sleep(5)
        assert ahead.passes == 0  # nothing changed: no pass
        for _ in range(10):  # a change every 0.1 s: never quiet for 0.2 s
            changes.change()
            await trio.sleep(0.1)
        assert ahead.passes == 0 and len(cache) == 0
        await trio.sleep(1)
        assert ahead.passes == 1 and len(cache) == 4
        jobs.append(pb.JobInfo(job_id=5, state="PENDING"))
        changes.change()
        await trio.sleep(60)
        assert ahead.passes == 2 and len(cache) == 5 and ahead.rendered == 5
        nursery.cancel_scope.cancel()


async def test_a_pass_gives_way_to_a_request_and_is_tried_again(autojump_clock: trio.testing.MockClock) -> None:
    jobs = _jobs(4)
    cache = RenderedJobs(_render)
    changes = _Changes()
    busy = [True]
    ahead = _prerender(jobs, [cache], changes, busy=busy)
    assert await ahead.prerender(lambda: busy[0]) is False and len(cache) == 0
    async with trio.open_nursery() as nursery:
        await nursery.start(ahead.run)
        changes.change()
        await trio.sleep(2)
        assert len(cache) == 0 and ahead.passes >= 1  # a request is rendering: every pass stops at once
        busy[0] = False
        await trio.sleep(1)  # no further change needed
        assert len(cache) == 4
        nursery.cancel_scope.cancel()


async def test_a_finished_pass_prunes_the_caches_to_the_listing() -> None:
    jobs = _jobs(5)
    cache = RenderedJobs(_render)
    ahead = _prerender(jobs, [cache], _Changes())
    for state in ("PENDING", "RUNNING", "COMPLETED"):
        for job in jobs:
            job.state = state
        assert await ahead.prerender() is True
    assert len(cache) == 15  # within the +1,000 slack: kept
    ahead = JobsPrerender({"v0": cache}, lambda: "c1", lambda: [], _framed, _Changes().wait_change, named=["v0"])
    cache._entries.update({bytes([i % 256, i // 256]): b"{}" for i in range(1000)})
    assert await ahead.prerender() is True
    assert len(cache) == 0


async def test_an_unlisted_unnamed_version_is_not_rendered() -> None:
    jobs = _jobs(5)
    framed: list[int] = []

    def counting(job: pb.JobInfo) -> bytes:
        framed.append(job.job_id)
        return _framed(job)

    caches = {"v1": RenderedJobs(_render), "v2": RenderedJobs(_render)}
    ahead = JobsPrerender(caches, lambda: "c1", lambda: jobs, counting, _Changes().wait_change, named=["v2"])
    assert ahead.versions() == ["v2"]
    assert await ahead.prerender() is True
    assert len(caches["v1"]) == 0 and len(caches["v2"]) == 5 and ahead.rendered == 5
    nothing = JobsPrerender({"v1": RenderedJobs(_render)}, lambda: "c1", lambda: jobs, counting,
                            _Changes().wait_change)  # fmt: skip
    framed.clear()
    assert nothing.versions() == [] and await nothing.prerender() is True
    assert framed == [] and nothing.rendered == 0  # no version wanted: not even framed


async def test_listing_a_version_adds_it_for_this_leadership(autojump_clock: trio.testing.MockClock) -> None:
    jobs = _jobs(4)
    caches = {"v1": RenderedJobs(_render), "v2": RenderedJobs(_render)}
    changes = _Changes()
    lead: list[object] = [None]
    ahead = JobsPrerender(caches, lambda: "c1", lambda: jobs, _framed, changes.wait_change, named=(),
                          leadership=lambda: lead[0])  # fmt: skip
    ahead.listing("v1")  # not the leader: not counted
    lead[0] = 7
    assert ahead.versions() == []
    ahead.listing("v9")  # a version without a cache: ignored
    async with trio.open_nursery() as nursery:
        await nursery.start(ahead.run)
        changes.change()
        await trio.sleep(5)
        assert ahead.passes == 1 and len(caches["v1"]) == 0 and len(caches["v2"]) == 0
        ahead.listing("v2")
        assert ahead.versions() == ["v2"]
        changes.change()
        await trio.sleep(60)
        assert len(caches["v1"]) == 0 and len(caches["v2"]) == 4
        lead[0] = 8  # stepped down and led again: the versions listed before are forgotten
        assert ahead.versions() == []
        ahead.listing("v1")
        jobs.append(pb.JobInfo(job_id=5, state="PENDING"))
        changes.change()
        await trio.sleep(60)
        assert len(caches["v1"]) == 5 and len(caches["v2"]) == 4
        nursery.cancel_scope.cancel()


async def test_the_default_setting_warms_v0042_only(autojump_clock: trio.testing.MockClock) -> None:
    jobs = _jobs(6)
    caches = {version: RenderedJobs(_render) for version in VERSIONS}
    changes = _Changes()
    ahead = JobsPrerender(caches, lambda: "c1", lambda: jobs, _framed, changes.wait_change,
                          named=RestConfig().prerender_versions)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(ahead.run)
        changes.change()
        await trio.sleep(5)
        assert {v: len(c) for v, c in caches.items()} == {"v0.0.38": 0, "v0.0.40": 0, "v0.0.41": 0, "v0.0.42": 6}
        nursery.cancel_scope.cancel()
