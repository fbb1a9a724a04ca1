"""Rendering the listed jobs' JSON ahead of ``GET jobs``, in the controller's idle time.

Mapping and shaping a job costs tens of microseconds a version (:mod:`spur.rest.jobcache`), so the
first ``GET jobs`` after thousands of jobs appeared spent most of its time rendering them. A
:class:`JobsPrerender` fills a version's :class:`~spur.rest.jobcache.RenderedJobs` (and, through
``framed``, the controller's kept ``JobInfo`` encodings) before anyone asks, so that request finds
every job rendered. The cache stays exact by construction: an entry is keyed by the job's encoding,
whoever rendered it.

Which versions: a version's rendered JSON costs memory (about 55 MB a version at 10,000 jobs), so
only the versions clients use are kept rendered: those ``named`` (``[rest] prerender_versions``)
and those a complete ``GET jobs`` has listed (:meth:`JobsPrerender.listing`) during the current
leadership (``leadership()``, the Raft term while this controller leads). Any other version is
never rendered ahead: its cache holds only what its own listings rendered, as without this module.

Contract (what keeps the controller's own costs honest):

- it works only when the state has been quiet (no applied change) for ``quiet`` seconds, and a pass
  stops at the first change after it began, or as soon as a request is rendering a job list
  (``busy()``; the request renders what it needs, and two renderers would only share the GIL), in
  both cases between chunks (at most ``chunk`` jobs framed or rendered, a few milliseconds): a
  stream of submissions never waits on it. A stopped pass is tried again after the next quiet
  ``quiet`` seconds;
- it runs on the event loop, in chunks with a checkpoint after each, never in a worker thread (it
  does not compete for the GIL with a request's render);
- passes are paced: a new one starts no sooner than ``busy / duty`` seconds after the previous one
  ended (``busy``: the seconds that pass worked), so at most about ``duty`` of a core goes to it
  however often the state changes;
- ``listed()`` None (not the leader, where ``GET jobs`` reads no kept encodings) skips the pass, and
  so does an empty version set (then nothing is framed either);
- a finished pass prunes each cache to the listing (:meth:`RenderedJobs.prune`), and ``listed`` is
  expected to keep ``framed``'s store bounded likewise, so memory follows the listed jobs even when
  no request ever lists them.

Pure apart from the Trio calls in :meth:`JobsPrerender.run`; :meth:`JobsPrerender.prerender` is the
pass itself.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Generic, TypeVar

import trio

from spur.rest.jobcache import RenderedJobs

__all__ = ["JobsPrerender"]

J = TypeVar("J")


class JobsPrerender(Generic[J]):
    """Keeps the wanted versions' ``caches`` holding every job ``listed()`` gives (see the module
    docstring)."""

    def __init__(
        self,
        caches: Mapping[str, RenderedJobs],
        cluster: Callable[[], str],
        listed: Callable[[], Sequence[J] | None],
        framed: Callable[[J], bytes],
        wait_change: Callable[[], Awaitable[None]],
        busy: Callable[[], bool] = lambda: False,
        *,
        named: Iterable[str] = (),
        leadership: Callable[[], object] = lambda: 0,
        quiet: float = 0.2,
        chunk: int = 200,
        duty: float = 0.1,
    ) -> None:
        """``listed``: the jobs a complete ``GET jobs`` lists (None: none to render here);
        ``framed``: a job's framed ``JobInfo`` encoding (the controller's kept one);
        ``wait_change``: returns after the next applied change; ``busy``: a request is rendering a
        job list now; ``named``: the versions kept rendered whether listed or not; ``leadership``:
        this controller's current leadership (None when it does not lead; a new value forgets the
        versions listed before)."""
        self.caches = dict(caches)
        self.named = frozenset(named)
        self._leadership = leadership
        self._listed_in: dict[str, object] = {}  # version -> the leadership it was last listed in
        self._cluster = cluster
        self._listed = listed
        self._framed = framed
        self._wait_change = wait_change
        self._busy = busy
        self.quiet = quiet
        self.chunk = chunk
        self.duty = duty
        self.changes = 0  # applied changes seen (a pass stops when this moves)
        self.passes = 0  # passes begun (finished or stopped)
        self.rendered = 0  # jobs rendered by the passes, all versions together

    def listing(self, version: str) -> None:
        """A request is rendering a complete job list of ``version``: keep it rendered from now on
        (while this leadership lasts; a listing where this controller does not lead counts not)."""
        lead = self._leadership()
        if lead is not None and version in self.caches:
            self._listed_in[version] = lead

    def versions(self) -> list[str]:
        """The versions a pass renders now, in ``caches``' order: the ``named`` ones and those
        listed during the current leadership."""
        lead = self._leadership()
        listed = {v for v, at in self._listed_in.items() if lead is not None and at == lead}
        return [v for v in self.caches if v in self.named or v in listed]

    async def prerender(self, changed: Callable[[], bool] = lambda: False) -> bool:
        """One pass: frame every listed job, then render, version by version (:meth:`versions`),
        those a cache lacks, ``chunk`` at a time with a checkpoint after each. Returns False when
        ``changed()`` was true before the first chunk or became true between chunks (the pass
        stopped there), True when it finished."""
        if changed():
            return False
        versions = self.versions()
        if not versions:
            return True
        jobs = self._listed()
        if jobs is None:
            return True
        cluster = self._cluster()
        frames: list[bytes] = []
        for start in range(0, len(jobs), self.chunk):
            frames += map(self._framed, jobs[start : start + self.chunk])
            await trio.lowlevel.checkpoint()
            if changed():
                return False
        for version in versions:
            cache = self.caches[version]
            missing = cache.missing(frames)
            for start in range(0, len(missing), self.chunk):
                part = missing[start : start + self.chunk]
                cache.render_frames(part, cluster)
                self.rendered += len(part)
                await trio.lowlevel.checkpoint()
                if changed():
                    return False
        for cache in self.caches.values():  # the listing is complete: entries of jobs gone or changed go
            cache.prune(frames)
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Forever: wait for a change (unless the last pass stopped before it finished), then for
        ``quiet`` seconds without one, then a pass (paced as the module docstring says)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._count_changes, name="rest-prerender-changes")
            task_status.started()
            not_before = 0.0
            finished = True
            while True:
                if finished:
                    await self._wait_change()
                while True:  # quiet: no change for `quiet` seconds
                    seen = self.changes
                    await trio.sleep(max(self.quiet, not_before - trio.current_time()))
                    if self.changes == seen:
                        break
                began = time.perf_counter()
                finished = await self.prerender(partial(self._stop, self.changes))
                self.passes += 1
                busy = time.perf_counter() - began
                not_before = trio.current_time() + busy / self.duty

    def _stop(self, mark: int) -> bool:
        return self.changes != mark or self._busy()

    async def _count_changes(self) -> None:
        while True:
            await self._wait_change()
            self.changes += 1
