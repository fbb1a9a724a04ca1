"""Running-job limits of associations and QOS, evaluated incrementally during one scheduling pass (pure).

A :class:`LimitTracker` is built once per pass over a :class:`LimitTable` (the limits and the tree,
shared by passes until the entities change) and charged with the jobs already running, then
asked about pending jobs in priority order: ``check`` returns Slurm's pending reason for the first
limit the job would exceed (``""`` when it may start), and every job the plan starts is charged, so
later jobs of the same pass see it. Each call walks only the job's association chain (leaf to
root): no scan over jobs.

Semantics (Slurm's):

- ``GrpTRES``/``GrpJobs`` of an association apply to everything running in its subtree; each level
  of the chain is checked against its own limit.
- ``MaxJobs``, ``MaxWall``, ``MaxTRESPerJob`` are per user (or per job) and inherited: the nearest
  level of the chain that sets one applies, and ``MaxJobs`` counts the user association's jobs.
- QOS: ``GrpTRES``/``GrpJobs`` over every job in the QOS; ``MaxWall``/``MaxTRESPerJob`` per job;
  ``MaxJobs`` (MaxJobsPerUser) and ``MaxTRESPerUser`` per user within the QOS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spur.accounting.model import UNSET, Limits

# Counter slots: the TRES a limit can name, then running jobs.
_TRES_SLOTS = ("cpu", "mem", "node", "gres/gpu", "billing")
_JOBS = len(_TRES_SLOTS)

_ASSOC_GRP = {
    "cpu": "AssocGrpCpuLimit",
    "mem": "AssocGrpMemLimit",
    "node": "AssocGrpNodeLimit",
    "gres/gpu": "AssocGrpGRES",
    "billing": "AssocGrpBilling",
}
_ASSOC_MAX_PER_JOB = {
    "cpu": "AssocMaxCpuPerJobLimit",
    "mem": "AssocMaxMemPerJob",
    "node": "AssocMaxNodePerJobLimit",
    "gres/gpu": "AssocMaxGRESPerJob",
    "billing": "AssocMaxBillingPerJob",
}
_QOS_GRP = {
    "cpu": "QOSGrpCpuLimit",
    "mem": "QOSGrpMemLimit",
    "node": "QOSGrpNodeLimit",
    "gres/gpu": "QOSGrpGRES",
    "billing": "QOSGrpBilling",
}
_QOS_MAX_PER_JOB = {
    "cpu": "QOSMaxCpuPerJobLimit",
    "mem": "QOSMaxMemoryPerJob",
    "node": "QOSMaxNodePerJobLimit",
    "gres/gpu": "QOSMaxGRESPerJob",
    "billing": "QOSMaxBillingPerJob",
}
_QOS_MAX_PER_USER = {
    "cpu": "QOSMaxCpuPerUserLimit",
    "mem": "QOSMaxMemoryPerUser",
    "node": "QOSMaxNodePerUserLimit",
    "gres/gpu": "QOSMaxGRESPerUser",
    "billing": "QOSMaxBillingPerUser",
}
ASSOC_GRP_JOBS = "AssocGrpJobsLimit"
ASSOC_MAX_JOBS = "AssocMaxJobsLimit"
ASSOC_MAX_WALL = "AssocMaxWallDurationPerJobLimit"
QOS_GRP_JOBS = "QOSGrpJobsLimit"
QOS_MAX_JOBS_PER_USER = "QOSMaxJobsPerUserLimit"
QOS_MAX_WALL = "QOSMaxWallDurationPerJobLimit"


@dataclass(frozen=True, slots=True)
class Demand:
    """What one job holds: CPUs, memory (MiB), nodes, GPUs, and its time limit (-1 unlimited)."""

    cpus: int
    mem_mb: int
    nodes: int
    gpus: int
    wall_secs: int = -1

    def counts(self) -> tuple[int, ...]:
        """Counter increments, in ``_TRES_SLOTS`` order then one job (billing = CPUs)."""
        return (self.cpus, self.mem_mb, self.nodes, self.gpus, self.cpus, 1)


@dataclass(frozen=True, slots=True)
class _Effective:
    """What applies to jobs of one association: its chain, the levels with group limits, and the
    inherited per-user/per-job limits (nearest level that sets one)."""

    chain: tuple[str, ...]
    # Per level with group limits, leaf first: (level, ((counter slot, cap, reason), ...)).
    grp_checks: tuple[tuple[str, tuple[tuple[int, int, str], ...]], ...]
    # The group counters a job of this association moves: (level, slots).
    grp_charges: tuple[tuple[str, tuple[int, ...]], ...]
    # All counters it moves: grp_charges plus its own job count when a MaxJobs applies.
    charges: tuple[tuple[str, tuple[int, ...]], ...]
    max_jobs: int
    max_wall: int
    per_job: tuple[tuple[int, int, str], ...]  # (counter slot, cap, reason)
    limited: bool  # any level of the chain sets any limit


_NOTHING = _Effective((), (), (), (), UNSET, UNSET, (), False)


class LimitTable:
    """The static half: limits and tree shape, resolved per association on first use.

    Built once per change of the accounting entities (the domain caches it) and shared by the
    trackers of every scheduling pass until then. ``limits_of(key)``: an association's Limits (None
    when it has none); ``parent_of(key)``: the key of the level above ("" at the root); ``qos``:
    QOS name -> Limits. Only the associations of jobs a pass looks at (and their ancestors) are
    ever resolved, each once, from its parent's resolution.
    """

    def __init__(
        self,
        limits_of: Callable[[str], Limits | None],
        parent_of: Callable[[str], str],
        qos: Mapping[str, Limits],
    ) -> None:
        self.limits_of = limits_of
        self.parent_of = parent_of
        self.qos = {k: v for k, v in qos.items() if _has_limits(v)}
        self._effective: dict[str, _Effective] = {}
        self._resolving: set[str] = set()

    def effective(self, key: str) -> _Effective:
        found = self._effective.get(key)
        if found is None:
            if key in self._resolving:  # a loop in the tree (never built by the domain): cut it
                return _NOTHING
            self._resolving.add(key)
            try:
                found = self._resolve(key)
            finally:
                self._resolving.discard(key)
            self._effective[key] = found
        return found

    def _resolve(self, key: str) -> _Effective:
        parent = self.parent_of(key)
        up = self.effective(parent) if parent else _NOTHING
        lim = self.limits_of(key)
        if lim is None or not _has_limits(lim):
            lim = None
        max_jobs = lim.max_jobs if lim is not None and lim.max_jobs != UNSET else up.max_jobs
        max_wall = lim.max_wall if lim is not None and lim.max_wall != UNSET else up.max_wall
        per_job = up.per_job
        grp_checks, grp_charges = up.grp_checks, up.grp_charges
        if lim is not None:
            mine = tuple(
                (i, lim.max_tres_per_job[name], _ASSOC_MAX_PER_JOB[name])
                for i, name in enumerate(_TRES_SLOTS)
                if name in lim.max_tres_per_job
            )
            if mine:
                taken = {slot for slot, _cap, _reason in mine}
                per_job = tuple(sorted(mine + tuple(p for p in up.per_job if p[0] not in taken)))
            checks = _slot_checks(lim.grp_tres, lim.grp_jobs, _ASSOC_GRP, ASSOC_GRP_JOBS)
            if checks:
                grp_checks = ((key, checks), *grp_checks)
                grp_charges = ((key, tuple(slot for slot, _cap, _reason in checks)), *grp_charges)
        charges = grp_charges
        if max_jobs != UNSET:  # MaxJobs counts this association's own running jobs
            if grp_charges and grp_charges[0][0] == key:
                own = tuple(sorted({*grp_charges[0][1], _JOBS}))
                charges = ((key, own), *grp_charges[1:])
            else:
                charges = ((key, (_JOBS,)), *grp_charges)
        return _Effective(
            (key, *up.chain),
            grp_checks,
            grp_charges,
            charges,
            max_jobs,
            max_wall,
            per_job,
            lim is not None or up.limited,
        )


class LimitTracker:
    """Usage of every limited association level and QOS during one pass; see the module docstring."""

    def __init__(self, table: LimitTable) -> None:
        self._table = table
        self._qos = table.qos
        self._grp: dict[str, list[int]] = {}
        self._qos_grp: dict[str, list[int]] = {}
        self._qos_user: dict[tuple[str, str], list[int]] = {}

    def charge(self, key: str, qos: str, user: str, demand: Demand) -> None:
        """Count a running (or just planned) job against every level of its chain and its QOS."""
        inc = demand.counts()
        grp = self._grp
        for level, slots in self._table.effective(key).charges:
            row = grp.get(level)
            if row is None:
                row = grp[level] = [0] * len(inc)
            for slot in slots:
                row[slot] += inc[slot]
        if qos in self._qos:
            _add(self._qos_grp, qos, inc)
            _add(self._qos_user, (qos, user), inc)

    def check(self, key: str, qos: str, user: str, demand: Demand) -> str:
        """Slurm's reason for the first limit ``demand`` would exceed, or ``""``."""
        inc = demand.counts()
        if qos in self._qos:
            reason = self._check_qos(qos, user, demand, inc)
            if reason:
                return reason
        eff = self._table.effective(key)
        if not eff.limited:
            return ""
        grp = self._grp
        for level, checks in eff.grp_checks:
            row = grp.get(level)
            for slot, cap, reason in checks:
                if (row[slot] if row else 0) + inc[slot] > cap:
                    return reason
        if eff.max_wall != UNSET and (demand.wall_secs < 0 or demand.wall_secs > eff.max_wall):
            return ASSOC_MAX_WALL
        for slot, cap, reason in eff.per_job:
            if inc[slot] > cap:
                return reason
        if eff.max_jobs != UNSET:
            running = self._grp.get(eff.chain[0])
            if (running[_JOBS] if running else 0) + 1 > eff.max_jobs:
                return ASSOC_MAX_JOBS
        return ""

    def _check_qos(self, qos: str, user: str, demand: Demand, inc: tuple[int, ...]) -> str:
        lim = self._qos[qos]
        reason = _over(lim.grp_tres, lim.grp_jobs, self._qos_grp.get(qos), inc, _QOS_GRP, QOS_GRP_JOBS)
        if reason:
            return reason
        if lim.max_wall != UNSET and (demand.wall_secs < 0 or demand.wall_secs > lim.max_wall):
            return QOS_MAX_WALL
        for i, name in enumerate(_TRES_SLOTS):
            cap = lim.max_tres_per_job.get(name)
            if cap is not None and inc[i] > cap:
                return _QOS_MAX_PER_JOB[name]
        mine = self._qos_user.get((qos, user))
        reason = _over(
            lim.max_tres_per_user, lim.max_jobs, mine, inc, _QOS_MAX_PER_USER, QOS_MAX_JOBS_PER_USER
        )
        return reason


def _has_limits(lim: Limits) -> bool:
    return bool(
        lim.grp_tres
        or lim.max_tres_per_job
        or lim.max_tres_per_user
        or lim.grp_jobs != UNSET
        or lim.max_jobs != UNSET
        or lim.max_wall != UNSET
    )


def _slot_checks(
    tres: Mapping[str, int], jobs: int, tres_reasons: Mapping[str, str], jobs_reason: str
) -> tuple[tuple[int, int, str], ...]:
    """(counter slot, cap, reason) for each TRES limit and the jobs limit that is set."""
    out = [(i, tres[name], tres_reasons[name]) for i, name in enumerate(_TRES_SLOTS) if name in tres]
    if jobs != UNSET:
        out.append((_JOBS, jobs, jobs_reason))
    return tuple(out)


def _add(table: dict[Any, list[int]], key: object, inc: tuple[int, ...]) -> None:
    row = table.get(key)
    if row is None:
        table[key] = list(inc)
    else:
        for i, v in enumerate(inc):
            row[i] += v


def _over(
    tres: Mapping[str, int],
    jobs: int,
    used: list[int] | None,
    inc: tuple[int, ...],
    tres_reasons: Mapping[str, str],
    jobs_reason: str,
) -> str:
    for i, name in enumerate(_TRES_SLOTS):
        cap = tres.get(name)
        if cap is not None and (used[i] if used else 0) + inc[i] > cap:
            return tres_reasons[name]
    if jobs != UNSET and (used[_JOBS] if used else 0) + 1 > jobs:
        return jobs_reason
    return ""
