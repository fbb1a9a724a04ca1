"""Conservative backfill: plan which pending jobs start now, and where.

Jobs are walked in priority order (higher priority, then earlier submit time, then lower job id).
Every node carries a time profile of its free resources (see ``profile``), seeded from the
snapshot's free resources and the end times of running jobs. A job starts now when it fits on
enough nodes for its whole time limit without touching resources reserved for an earlier job;
otherwise it gets a reservation at the earliest time it fits, which every later job must respect
(conservative backfill: no reserved job is ever delayed by a lower-priority one). Only the first
``reservation_depth`` blocked jobs get reservations (default ``DEFAULT_RESERVATION_DEPTH``); blocked
jobs past that can still start now but hold nothing for the future.

The planner is pure: it reads the snapshot and builds a ``Plan``; it never mutates the snapshot.
What depends only on the cluster's shape (node order and positions, partition membership, candidate
nodes per job class, GPU model masks, reasons a job can never run) comes from the snapshot's
``NodeLayout`` and is kept in its ``cache``, so a pass over an unchanged layout does no per-node
setup; a snapshot without a layout gets one built for the pass. With ``node_running`` a node's
profile is built from that node's running jobs alone, when the node is first looked at.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spur.core.job import NodeAllocation
from spur.core.scheduling import (
    Assignment,
    NodeLayout,
    NodeView,
    PendingView,
    Plan,
    RunningView,
    SchedSnapshot,
    nodes_in_layout,
)

from spur_sched_backfill.first_fit import PLANNER, first_fit_now
from spur_sched_backfill.profile import ALL_BITS, NodeProfile, indices_of, mask_of
from spur_sched_backfill.request import Request
from spur_sched_backfill.window import aggregate, earliest, fits

DEFAULT_RESERVATION_DEPTH = 100
DEFAULT_MAX_SEARCH_STEPS = 64
# A running job already past its end time is expected to free its resources this soon.
OVERRUN_GRACE_SECS = 1.0
# Failed "start now" shapes remembered per candidate set (for cheap rejection of bigger jobs).
MAX_FAILURES_KEPT = 16

RESOURCES = "Resources"
PRIORITY = "Priority"
PARTITION_DOWN = "PartitionDown"
PARTITION_CONFIG = "PartitionConfig"
PARTITION_NODE_LIMIT = "PartitionNodeLimit"
BAD_CONSTRAINTS = "BadConstraints"
REQ_NODE_NOT_AVAIL = "ReqNodeNotAvail"


class BackfillOptionError(ValueError):
    """A scheduler option has the wrong type or value; the message names the option."""


@dataclass(frozen=True)
class BackfillOptions:
    reservation_depth: int = DEFAULT_RESERVATION_DEPTH  # blocked jobs that get a reservation; 0 = none
    max_search_steps: int = DEFAULT_MAX_SEARCH_STEPS  # candidate start times tried per reservation

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None) -> BackfillOptions:
        """Options from the ``[scheduler]`` config table; unknown keys are ignored (they may be the
        controller's own, such as ``interval_secs``)."""
        values: dict[str, int] = {}
        for key in ("reservation_depth", "max_search_steps"):
            if options is None or key not in options:
                continue
            value = options[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise BackfillOptionError(
                    f"scheduler option {key!r} must be a non-negative integer, got {value!r}"
                )
            values[key] = value
        return cls(**values)


DEFAULT_OPTIONS = BackfillOptions()

# Entries kept per dict in a layout's cache; past it the dict starts over (a layout can live for days
# while jobs of ever new classes, such as distinct node lists, come and go).
MAX_LAYOUT_CACHE = 4096


def _layout_cache(layout: NodeLayout, name: str) -> dict[Any, Any]:
    """This planner's dict ``name`` in ``layout.cache`` (created empty the first time, emptied when
    it holds more than ``MAX_LAYOUT_CACHE`` entries)."""
    key = ("spur_sched_backfill", name)
    found = layout.cache.get(key)
    if not isinstance(found, dict) or len(found) > MAX_LAYOUT_CACHE:
        found = layout.cache[key] = {}
    return found


class _Lazy(dict[int, Any]):
    """Per-node values built on first use (``self[i]``), by ``build(i)``.

    A pass usually looks at a few nodes of a large cluster (the first that fit), so building every
    node's profile up front was most of a pass's cost at thousands of nodes. What is built for a node
    does not depend on when it is built, so plans are the same as with eager building.
    """

    __slots__ = ("_build",)

    def __init__(self, build: Callable[[int], Any]) -> None:
        super().__init__()
        self._build = build

    def __missing__(self, i: int) -> Any:
        value = self[i] = self._build(i)
        return value


def priority_key(job: PendingView) -> tuple[int, float, int]:
    return (-job.priority, job.submit_time, job.job_id)


@dataclass(slots=True)
class _Candidates:
    """Nodes a class of jobs (same partition, features and exclusions) may use."""

    config: tuple[int, ...]  # configured, whatever their state
    avail: tuple[int, ...]  # of those, available
    open: list[int]  # of those, with free CPUs now (compacted lazily)
    ub_c: int = 1 << 62  # upper bounds of what one open node has free now
    ub_m: int = 1 << 62
    ub_g: int = 1 << 62
    ub_idle: int = 1 << 62  # upper bound of open nodes with no job now
    failures: list[tuple[Any, ...]] = field(default_factory=list)


@dataclass(slots=True)
class _Search:
    """Where the last reservation search for one job shape ended (see ``_earliest_start``)."""

    start: float  # no job of the shape can start before this (infinity: it never fits)
    pool: list[int]  # candidate nodes, required ones excluded
    lower: list[float]  # per node index: a lower bound on its earliest fit at or after ``start``


class BackfillPlanner:
    """One scheduling pass over one snapshot; call ``plan()`` once."""

    def __init__(self, snapshot: SchedSnapshot, options: BackfillOptions) -> None:
        self.snap = snapshot
        self.opts = options
        self.now = snapshot.now
        views, layout = nodes_in_layout(snapshot)
        self.layout = layout
        self.views = views
        self.index: Mapping[str, int] = layout.index
        self.members, self.part_up, self.part_names = layout.members, layout.up, layout.configured
        self.total_mask: Mapping[int, int] = _Lazy(lambda i: self._total_mask(views[i]))
        self.profiles: Mapping[int, NodeProfile] = self._build_profiles()
        # Kept with the layout (valid while it is): GPU model masks, candidate nodes per job class
        # and static reasons (see ``NodeLayout.cache``).
        self.type_masks: dict[str, list[int]] = _layout_cache(layout, "type_masks")
        self.static_candidates: dict[tuple[Any, ...], tuple[tuple[int, ...], tuple[int, ...]]] = _layout_cache(
            layout, "candidates"
        )
        self.static_cache: dict[tuple[Any, ...], str] = _layout_cache(layout, "static_reasons")
        self.candidates: dict[tuple[Any, ...], _Candidates] = {}
        self.searches: dict[tuple[Any, ...], _Search] = {}

    # ----- setup -------------------------------------------------------------------------------

    @staticmethod
    def _total_mask(v: NodeView) -> int:
        count = max(v.gpus_total, len(v.gpu_models))
        return ((1 << count) - 1) | mask_of(v.gpus_free)

    def _running_on(self) -> Mapping[int, tuple[list[tuple[float, int, int, int]], int, bool]]:
        """Per node index, when first asked: the releases of the running jobs there, how many
        allocations they hold there, and whether an exclusive one holds the whole node. From
        ``node_running``, or from the running jobs grouped by node here (one walk over them)."""
        by_node: Mapping[str, Sequence[RunningView]]
        if self.snap.node_running is not None:
            by_node = self.snap.node_running
        else:
            grouped: dict[str, list[RunningView]] = {}
            for run in self.snap.running:
                for alloc in run.allocation:
                    on_node = grouped.setdefault(alloc.node, [])
                    if not on_node or on_node[-1] is not run:
                        on_node.append(run)
            by_node = grouped
        now = self.now
        views = self.views
        total_mask = self.total_mask
        empty: tuple[RunningView, ...] = ()

        def gather(i: int) -> tuple[list[tuple[float, int, int, int]], int, bool]:
            name = views[i].name
            releases: list[tuple[float, int, int, int]] = []
            listed = 0
            whole = False
            for run in by_node.get(name, empty):
                when = run.end_time if run.end_time > now else now + OVERRUN_GRACE_SECS
                for alloc in run.allocation:
                    if alloc.node != name:
                        continue
                    listed += 1
                    if run.exclusive:
                        # An exclusive job holds the whole node whatever its allocation lists.
                        whole = True
                        v = views[i]
                        release = (when, v.cpus_total, v.mem_total_mb, total_mask[i])
                    else:
                        release = (when, alloc.cpus, alloc.mem_mb, mask_of(alloc.gpus) if alloc.gpus else 0)
                    if when != math.inf:
                        releases.append(release)
            return releases, listed, whole

        return _Lazy(gather)

    def _build_profiles(self) -> Mapping[int, NodeProfile]:
        """Each node's profile, built when first looked at (see ``_running_on``)."""
        now = self.now
        running_on = self._running_on()
        self._runs = running_on

        def build(i: int) -> NodeProfile:
            v = self.views[i]
            releases, listed, held_whole = running_on[i]
            if held_whole:
                free = (0, 0, 0, max(v.running_jobs, listed, 1))
            else:
                free = (
                    v.cpus_free,
                    v.mem_free_mb,
                    mask_of(v.gpus_free) & self.total_mask[i],
                    max(v.running_jobs, listed),
                )
            totals = (v.cpus_total, v.mem_total_mb, self.total_mask[i])
            return NodeProfile.build(now, free, totals, releases)  # this pass's own list

        return _Lazy(build)

    def _cpus_free_now(self, i: int) -> int:
        """Node ``i``'s free CPUs now, as its profile has them, without building an untouched profile
        (an unbuilt one would start from the view's free CPUs, or none under an exclusive job)."""
        profiles = self.profiles
        if i in profiles:
            return profiles[i].cpus[0]
        return 0 if self._runs[i][2] else self.views[i].cpus_free

    def _type_mask(self, gpu_type: str) -> list[int]:
        masks = self.type_masks.get(gpu_type)
        if masks is None:
            if not gpu_type:
                masks = [ALL_BITS] * len(self.views)
            else:
                masks = [
                    mask_of([k for k, model in enumerate(v.gpu_models) if model.lower() == gpu_type])
                    for v in self.views
                ]
            self.type_masks[gpu_type] = masks
        return masks

    def _candidates_for(self, job: PendingView) -> _Candidates:
        key = (job.partition, tuple(sorted(job.features)), tuple(sorted(job.exclude)))
        cands = self.candidates.get(key)
        if cands is None:
            static = self.static_candidates.get(key)
            if static is None:
                member = self.members.get(job.partition, frozenset()) if job.partition else range(len(self.views))
                wanted = set(job.features)
                excluded = set(job.exclude)
                config = tuple(
                    i
                    for i in sorted(member)
                    if self.views[i].name not in excluded and wanted.issubset(self.views[i].features)
                )
                avail = tuple(i for i in config if self.views[i].available)
                static = self.static_candidates[key] = (config, avail)
            config, avail = static
            # Every available node to start with: ``_select_now`` passes over (and its first whole
            # scan drops) those with no free CPU, so none of them is looked at more than it must be.
            cands = _Candidates(config=config, avail=avail, open=list(avail))
            self.candidates[key] = cands
        return cands

    # ----- the pass ----------------------------------------------------------------------------

    def plan(self) -> Plan:
        plan = Plan()
        cap = self.snap.max_job_test
        blocked_partitions: set[str] = set()
        reservations = 0
        limits = self.snap.limits
        for job in sorted(self.snap.pending, key=priority_key):
            if cap and plan.jobs_tested >= cap:
                plan.reasons[job.job_id] = PRIORITY
                continue
            plan.jobs_tested += 1
            req = Request.of(job)
            reason = self._static_reason(job, req)
            if reason:
                plan.reasons[job.job_id] = reason
                continue
            if limits is not None:
                reason = limits.check(job.job_id)
                if reason:  # over an account/QOS limit: it waits without holding a reservation
                    plan.reasons[job.job_id] = reason
                    continue
            cands = self._candidates_for(job)
            required = tuple(sorted({self.index[n] for n in job.nodelist}))
            allocation = self._start_now(job, req, cands, required)
            if allocation is not None:
                plan.assignments.append(Assignment(job_id=job.job_id, allocation=allocation))
                if limits is not None:
                    limits.charge(job.job_id)
                continue
            if reservations < self.opts.reservation_depth:
                reservations += 1
                self._reserve(job, req, cands, required)
            plan.reasons[job.job_id] = PRIORITY if job.partition in blocked_partitions else RESOURCES
            blocked_partitions.add(job.partition)
        return plan

    def place_now(self, job: PendingView) -> tuple[NodeAllocation, ...] | None:
        """Where ``job`` would start now if it headed the queue (no reservation of anyone else's in
        the way), or None; the snapshot's own pending jobs and limits are not consulted."""
        req = Request.of(job)
        if self._static_reason(job, req):
            return None
        required = tuple(sorted({self.index[n] for n in job.nodelist}))
        return self._start_now(job, req, self._candidates_for(job), required)

    # ----- reasons a job cannot run whatever the load ------------------------------------------

    def _static_reason(self, job: PendingView, req: Request) -> str:
        """The reason the job cannot run on its partition as configured and up now; "" if it can."""
        if job.partition:
            if not self.part_up.get(job.partition, True):
                return PARTITION_DOWN
            if job.partition not in self.members:
                return PARTITION_CONFIG
        key = (
            job.partition,
            tuple(sorted(job.features)),
            tuple(sorted(job.exclude)),
            job.nodelist,
            req.shape(),
        )
        reason = self.static_cache.get(key)
        if reason is None:
            reason = self._compute_static_reason(job, req)
            self.static_cache[key] = reason
        return reason

    def _compute_static_reason(self, job: PendingView, req: Request) -> str:
        cands = self._candidates_for(job)
        size = len(self.part_names[job.partition]) if job.partition else len(self.views)
        if not size:
            # No node of the partition has registered yet (a controller just started): one may come
            # up, so the job waits for nodes rather than being told it can never fit.
            return REQ_NODE_NOT_AVAIL
        if req.n > size:
            return PARTITION_NODE_LIMIT
        configured = set(cands.config)
        required: list[int] = []
        for name in job.nodelist:
            i = self.index.get(name)
            if i is None:
                # Named in the partition but never registered: it may come up later.
                in_partition = not job.partition or name in self.part_names[job.partition]
                return REQ_NODE_NOT_AVAIL if in_partition else BAD_CONSTRAINTS
            if i not in configured:
                return BAD_CONSTRAINTS
            required.append(i)
        if not self._fits_totals(req, cands.config, required):
            return BAD_CONSTRAINTS
        if any(not self.views[i].available for i in required):
            return REQ_NODE_NOT_AVAIL
        if not self._fits_totals(req, cands.avail, required):
            return REQ_NODE_NOT_AVAIL
        return ""

    def _total_capacity(self, req: Request, i: int) -> int:
        """Tasks of ``req`` one empty node ``i`` can hold (0 when its GPUs do not suffice)."""
        v = self.views[i]
        if req.gpn and (self.total_mask[i] & self._type_mask(req.gpu_type)[i]).bit_count() < req.gpn:
            return 0
        return req.tasks_capacity(v.cpus_total, v.mem_total_mb)

    def _fits_totals(self, req: Request, pool: tuple[int, ...], required: list[int]) -> bool:
        """Whether ``req`` fits on empty nodes of ``pool`` (which must include ``required``)."""
        req_set = set(required)
        caps = [self._total_capacity(req, i) for i in required]
        if any(c < req.tpn for c in caps):
            return False
        want = req.n - len(required)
        if req.uniform:
            found = 0
            for i in pool:
                if found >= want:
                    break
                if i not in req_set and self._total_capacity(req, i) >= req.tpn:
                    found += 1
            return found >= want
        others = sorted((self._total_capacity(req, i) for i in pool if i not in req_set), reverse=True)[:want]
        if len(others) < want or (others and others[-1] < 1):
            return False
        return sum(caps) + sum(others) >= req.total_tasks

    # ----- starting now ------------------------------------------------------------------------

    def _start_now(
        self, job: PendingView, req: Request, cands: _Candidates, required: tuple[int, ...]
    ) -> tuple[NodeAllocation, ...] | None:
        cacheable = req.uniform and not required
        if cacheable:
            probe = (req.need_c, req.need_m, req.gpn, req.n, req.duration)
            for failed in cands.failures:
                if (
                    failed[5] == req.exclusive
                    and failed[6] == req.gpu_type
                    and all(a >= b for a, b in zip(probe, failed[:5], strict=True))
                ):
                    return None
            if req.n > len(cands.open) or (req.exclusive and req.n > cands.ub_idle):
                return None
            if not req.exclusive and (
                req.need_c > cands.ub_c or req.need_m > cands.ub_m or req.gpn > cands.ub_g
            ):
                return None
        chosen = self._select_now(req, cands, required)
        if chosen is None:
            if cacheable:
                self._remember_failure(cands, req)
            return None
        return self._commit(self.now, req, chosen)

    @staticmethod
    def _remember_failure(cands: _Candidates, req: Request) -> None:
        entry = (req.need_c, req.need_m, req.gpn, req.n, req.duration, req.exclusive, req.gpu_type)
        kept = [
            f
            for f in cands.failures
            if not (f[5:] == entry[5:] and all(a >= b for a, b in zip(f[:5], entry[:5], strict=True)))
        ]
        kept.append(entry)
        cands.failures = kept[-MAX_FAILURES_KEPT:]

    def _select_now(
        self, req: Request, cands: _Candidates, required: tuple[int, ...]
    ) -> list[tuple[int, int]] | None:
        """Nodes (index, tasks) for ``req`` starting now, scanning open nodes in name order.

        A scan that looks at every open node also refreshes the candidate set's upper bounds and
        drops nodes with no free CPU left (nothing can start on them during this pass).
        """
        profiles = self.profiles
        tmasks = self._type_mask(req.gpu_type)
        end = self.now + req.duration
        need_c, need_m, gpn, excl = req.need_c, req.need_m, req.gpn, req.exclusive
        picked = self._pick_required(self.now, req, required)
        if picked is None:
            return None
        want = req.n - len(required)
        if want == 0:
            return picked if req.uniform or self._enough(req, picked, [], 0) else None
        req_set = set(required)
        others: list[tuple[int, int]] = []
        ub_c = ub_m = ub_g = idle = 0
        dead = False
        done = False
        for i in cands.open:
            if i not in profiles and self._cpus_free_now(i) <= 0:
                dead = True  # full now: no need to build its profile
                continue
            p = profiles[i]
            c0 = p.cpus[0]
            if c0 <= 0:
                dead = True
                continue
            m0 = p.mem[0]
            g0 = p.gpus[0].bit_count()
            j0 = p.jobs[0]
            if c0 > ub_c:
                ub_c = c0
            if m0 > ub_m:
                ub_m = m0
            if g0 > ub_g:
                ub_g = g0
            if not j0:
                idle += 1
            if i in req_set:
                continue
            if req.uniform:
                if fits(p, 0, end, need_c, need_m, gpn, tmasks[i], excl):
                    others.append((i, req.tpn))
                    if len(others) == want:
                        done = True
                        break
            else:
                cap = self._capacity(req, i, self.now, end, tmasks[i])
                if cap:
                    others.append((i, cap))
                    if self._enough(req, picked, others, want):
                        done = True
                        break
        if not done:
            cands.ub_c, cands.ub_m, cands.ub_g, cands.ub_idle = ub_c, ub_m, ub_g, idle
            if dead:
                cands.open = [i for i in cands.open if self._cpus_free_now(i) > 0]
            return None
        return self._finish_pick(req, picked, others, want)

    def _pick_required(
        self, t: float, req: Request, required: tuple[int, ...]
    ) -> list[tuple[int, int]] | None:
        """(index, tasks) for every required node, or None when one of them does not fit at ``t``."""
        picked: list[tuple[int, int]] = []
        tmasks = self._type_mask(req.gpu_type)
        end = t + req.duration
        for i in required:
            cap = self._capacity(req, i, t, end, tmasks[i])
            if cap < req.tpn:
                return None
            picked.append((i, req.tpn if req.uniform else cap))
        return picked

    def _capacity(self, req: Request, i: int, start: float, end: float, tmask: int) -> int:
        """Tasks of ``req`` node ``i`` can hold over [start, end) (capped at what one node may get)."""
        p = self.profiles[i]
        c, m, g, j = aggregate(p, p.index_at(start), end)
        if req.gpn and (g & tmask).bit_count() < req.gpn:
            return 0
        if req.exclusive and j:
            return 0
        cap = req.tasks_capacity(c, m)
        if req.uniform:
            return req.tpn if cap >= req.tpn else 0
        return min(cap, req.total_tasks - req.n + 1)

    @staticmethod
    def _enough(
        req: Request, picked: list[tuple[int, int]], others: list[tuple[int, int]], want: int
    ) -> bool:
        if len(others) < want:
            return False
        best = sorted((cap for _, cap in others), reverse=True)[:want]
        return sum(cap for _, cap in picked) + sum(best) >= req.total_tasks

    @staticmethod
    def _finish_pick(
        req: Request, picked: list[tuple[int, int]], others: list[tuple[int, int]], want: int
    ) -> list[tuple[int, int]]:
        """Choose ``want`` of ``others`` (first in name order when that suffices) and split tasks."""
        if req.uniform:
            return picked + others[:want]
        first = others[:want]
        if sum(c for _, c in picked) + sum(c for _, c in first) < req.total_tasks:
            first = sorted(others, key=lambda o: -o[1])[:want]
        chosen = sorted(picked + first)
        # Block distribution: one task each, then fill nodes in order up to their capacity.
        left = req.total_tasks - len(chosen)
        out = []
        for i, cap in chosen:
            extra = min(left, cap - 1)
            left -= extra
            out.append((i, 1 + extra))
        return out

    # ----- reservations ------------------------------------------------------------------------

    def _reserve(self, job: PendingView, req: Request, cands: _Candidates, required: tuple[int, ...]) -> None:
        """Hold resources for ``job`` at the earliest time it fits; nothing when it never does."""
        found = self._earliest_start(req, cands, required)
        if found is not None:
            start, chosen = found
            self._commit(start, req, chosen)

    def _earliest_start(
        self, req: Request, cands: _Candidates, required: tuple[int, ...]
    ) -> tuple[float, list[tuple[int, int]]] | None:
        """The earliest start (and nodes) at which ``req`` fits, or None (never, or not within
        ``max_search_steps`` candidate times).

        Resources only ever shrink during a pass, so a job of the same shape on the same candidates
        cannot start before the last one's reservation, and every per-node earliest-fit time found
        for that one is still a lower bound: the search resumes from where the last one ended
        (``_Search``) instead of rescanning every node from now.
        """
        profiles = self.profiles
        tmasks = self._type_mask(req.gpu_type)
        need_c, need_m, gpn, excl, dur = req.need_c, req.need_m, req.gpn, req.exclusive, req.duration
        key = (id(cands), required, req.shape(), dur)
        memo = self.searches.get(key)
        if memo is None:
            req_set = set(required)
            pool = [i for i in cands.avail if i not in req_set]
            # per node: a lower bound on its earliest fit
            memo = _Search(self.now, pool, [-1.0] * len(self.views))
        elif memo.start == math.inf:
            return None
        pool, lower, t = memo.pool, memo.lower, memo.start
        want = req.n - len(required)
        if len(pool) < want:
            return None
        for _ in range(max(self.opts.max_search_steps, 1)):
            t_next = t
            for i in required:
                if lower[i] < t:
                    lower[i] = earliest(profiles[i], t, dur, need_c, need_m, gpn, tmasks[i], excl, math.inf)
                t_next = max(t_next, lower[i])
            if want:
                stale = [i for i in pool if lower[i] < t]
                if len(stale) * 8 < len(pool):
                    # Resumed search: few bounds to refresh, then the want-th smallest of them all.
                    for i in stale:
                        lower[i] = earliest(
                            profiles[i], t, dur, need_c, need_m, gpn, tmasks[i], excl, math.inf
                        )
                    bounds = map(lower.__getitem__, pool)
                    t_next = max(t_next, min(bounds) if want == 1 else sorted(bounds)[want - 1])
                else:
                    heap: list[float] = []  # the ``want`` smallest bounds, negated (max-heap)
                    for i in pool:
                        lb = lower[i]
                        if lb < t:
                            bound = -heap[0] if len(heap) == want else math.inf
                            lb = earliest(profiles[i], t, dur, need_c, need_m, gpn, tmasks[i], excl, bound)
                            lower[i] = lb
                        if len(heap) < want:
                            heapq.heappush(heap, -lb)
                        elif lb < -heap[0]:
                            heapq.heapreplace(heap, -lb)
                    t_next = max(t_next, -heap[0])
            if t_next == math.inf:
                memo.start = math.inf
                self.searches[key] = memo
                return None
            if t_next > t:
                t = t_next
                continue
            chosen = self._select_at(t, req, (i for i in pool if lower[i] <= t), required)
            if chosen is not None:
                memo.start = t
                self.searches[key] = memo
                return t, chosen
            t = min((profiles[i].next_time_after(t) for i in (*required, *pool)), default=math.inf)
            if t == math.inf:
                memo.start = math.inf
                self.searches[key] = memo
                return None
        return None

    def _select_at(
        self, t: float, req: Request, pool: Iterable[int], required: tuple[int, ...]
    ) -> list[tuple[int, int]] | None:
        """Nodes for ``req`` starting at ``t``: the required ones, then ``pool`` in order (consumed
        lazily, only as far as needed)."""
        picked = self._pick_required(t, req, required)
        if picked is None:
            return None
        want = req.n - len(required)
        tmasks = self._type_mask(req.gpu_type)
        end = t + req.duration
        others: list[tuple[int, int]] = []
        for i in pool:
            if len(others) == want and (req.uniform or self._enough(req, picked, others, want)):
                break
            cap = self._capacity(req, i, t, end, tmasks[i])
            if cap:
                others.append((i, cap))
        if len(others) < want or not (req.uniform or self._enough(req, picked, others, want)):
            return None
        return self._finish_pick(req, picked, others, want)

    # ----- committing --------------------------------------------------------------------------

    def _commit(
        self, start: float, req: Request, chosen: list[tuple[int, int]]
    ) -> tuple[NodeAllocation, ...]:
        """Take the resources of ``chosen`` (index, tasks) over the job's window; return the allocation."""
        end = start + req.duration
        tmasks = self._type_mask(req.gpu_type)
        out = []
        for rank, (i, tasks) in enumerate(sorted(chosen)):
            p = self.profiles[i]
            v = self.views[i]
            if req.exclusive:
                # The whole node: everything free over the window (all of it on a consistent,
                # idle node; never more than what is really free).
                cpus, mem, gpu_mask, _ = aggregate(p, p.index_at(start), end)
                gpus = indices_of(gpu_mask, gpu_mask.bit_count())
            else:
                cpus, mem = req.node_share(tasks)
                gpus = []
                if req.gpn:
                    _, _, free, _ = aggregate(p, p.index_at(start), end)
                    gpus = indices_of(free & tmasks[i], req.gpus_on(rank))
                gpu_mask = mask_of(gpus)
            p.take(start, end, cpus, mem, gpu_mask)
            out.append(NodeAllocation(node=v.name, cpus=cpus, mem_mb=mem, gpus=gpus, tasks=tasks))
        return tuple(out)


def plan(snapshot: SchedSnapshot, options: Mapping[str, Any] | None = None) -> Plan:
    """Plan one scheduling pass over ``snapshot``; see the module docstring."""
    return BackfillPlanner(snapshot, BackfillOptions.parse(options)).plan()


def place_now(
    snapshot: SchedSnapshot, job: PendingView, options: Mapping[str, Any] | None = None
) -> tuple[NodeAllocation, ...] | None:
    """Where ``job`` starts now on ``snapshot``'s free resources (the immediate grant), or None. A
    simple job takes the first fit (``spur_sched_backfill.first_fit``), which gives the planner's answer
    without building one."""
    opts = BackfillOptions.parse(options) if options else DEFAULT_OPTIONS  # still checked when given
    found = first_fit_now(snapshot, job)
    if found is not PLANNER:
        return found
    return BackfillPlanner(snapshot, opts).place_now(job)
