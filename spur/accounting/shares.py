"""Rows behind ``sshare`` and ``sprio``, computed from the accounting domain and the job table.

Read-only and deterministic for a given ``now``; values are formatted as Slurm prints them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from spur.accounting.priority import PriorityWeights

if TYPE_CHECKING:
    from spur.accounting.model import Association
    from spur.accounting.priority import PriorityFactors
    from spur.config.model import PriorityConfig
    from spur.core.job import Job


class ShareSource(Protocol):
    """What the rows are computed from: the replicated accounting domain
    (``spur.state.accounting.AccountingDomain``), which sits above this package."""

    @property
    def accounts(self) -> Mapping[str, object]: ...

    def subtree(self, account: str) -> list[str]: ...

    def depth(self, account: str) -> int: ...

    def share_rows(self, now: float) -> list[tuple[Association, Any]]: ...

    def job_factors(
        self, jobs: Iterable[Job], weights: PriorityWeights, now: float
    ) -> dict[int, PriorityFactors]: ...


class JobSource(Protocol):
    """What the sprio rows read of the replicated state (``spur.state.machine.ClusterState``):
    the jobs, never changed."""

    @property
    def jobs(self) -> Mapping[int, Job]: ...


@lru_cache(maxsize=8)
def weights_of(cfg: PriorityConfig) -> PriorityWeights:
    """The ``[priority]`` table as weights (kept per table: every submission asks, and the table
    changes only with a reconfiguration, which builds a new one)."""
    return PriorityWeights(
        age=cfg.weight_age,
        fairshare=cfg.weight_fairshare,
        job_size=cfg.weight_job_size,
        partition=cfg.weight_partition,
        qos=cfg.weight_qos,
        max_age_secs=max(0, cfg.max_age_secs),
    )


def share_records(
    domain: ShareSource,
    now: float,
    *,
    accounts: list[str] | None = None,
    users: list[str] | None = None,
    all_users: bool = False,
) -> list[dict[str, str]]:
    """sshare rows in tree order: every account association, and the user associations of ``users``
    (all of them with ``all_users``), limited to ``accounts`` (and their subtrees) when given."""
    wanted_accounts: set[str] | None = None
    if accounts:
        wanted_accounts = set()
        for name in accounts:
            if name in domain.accounts:
                wanted_accounts.update(domain.subtree(name))
    rows = domain.share_rows(now)
    total_usage = sum(r.raw_usage for a, r in rows if a.key == "root||") or 0.0
    out = []
    for assoc, row in rows:
        if wanted_accounts is not None and assoc.account not in wanted_accounts:
            continue
        if assoc.user and not all_users and assoc.user not in (users or []):
            continue
        depth = domain.depth(assoc.account) + (1 if assoc.user else 0)
        is_root = assoc.key == "root||"
        effective = row.raw_usage / total_usage if total_usage > 0 else 0.0
        level_fs = row.norm_shares / effective if effective > 0 else float("inf")
        out.append(
            {
                "account": " " * depth + assoc.account,
                "user": assoc.user,
                "rawshares": "" if is_root else str(row.raw_shares),
                "normshares": f"{row.norm_shares:.6f}",
                "rawusage": str(round(row.raw_usage)),
                "normusage": f"{row.norm_usage:.6f}",
                "effectvusage": f"{effective:.6f}",
                "fairshare": f"{row.fairshare:.6f}" if assoc.user else "",
                "levelfs": "" if is_root else ("inf" if level_fs == float("inf") else f"{level_fs:.6f}"),
                "grptresmins": "",
                "tresrunmins": "",
                "partition": assoc.partition,
            }
        )
    return out


def priority_records(
    state: JobSource,
    domain: ShareSource,
    weights: PriorityWeights,
    now: float,
    *,
    job_ids: list[int] | None = None,
    users: list[str] | None = None,
) -> list[dict[str, str]]:
    """sprio rows: pending, not held jobs (all, or ``job_ids``/``users``), by job id."""
    from spur.core.job import JobState

    ids = set(job_ids or [])
    names = set(users or [])
    jobs = [
        j
        for j in state.jobs.values()
        if j.state is JobState.PENDING
        and j.priority != 0
        and (not ids or j.job_id in ids or j.array_job_id in ids)
        and (not names or j.user in names)
    ]
    jobs.sort(key=lambda j: j.job_id)
    factors = domain.job_factors(jobs, weights, now)
    out = []
    for job in jobs:
        f = factors[job.job_id]
        w = f.weighted(weights)
        total = f.priority(weights) if weights.active else job.priority
        out.append(
            {
                "jobid": str(job.job_id),
                "partition": job.partition,
                "user": job.user,
                "account": job.spec.account,
                "priority": str(total),
                "site": "0",
                "age": str(w["age"]),
                "assoc": "0",
                "fairshare": str(w["fairshare"]),
                "jobsize": str(w["job_size"]),
                "partitionprio": str(w["partition"]),
                "qosname": job.spec.qos,
                "qos": str(w["qos"]),
                "nice": str(job.spec.nice),
                "tres": "",
                "n_age": f"{f.age:.7f}",
                "n_fairshare": f"{f.fairshare:.7f}",
                "n_jobsize": f"{f.job_size:.7f}",
                "n_partition": f"{f.partition:.7f}",
                "n_qos": f"{f.qos:.7f}",
            }
        )
    return out
