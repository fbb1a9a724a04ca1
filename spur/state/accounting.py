"""The replicated ``accounting`` domain: clusters, accounts, users, associations, QOS, usage.

Commands are sacctmgr's add/modify/delete, already parsed by the client
(:mod:`spur.accounting.grammar`) and checked again here: an apply validates everything first and
changes nothing when it refuses (returns :class:`~spur.state.machine.Rejected` with Slurm's message).
A successful apply returns the lines sacctmgr prints.

The domain also answers the scheduler and the submit path (read-only queries, deterministic):
``admit`` (associations/QOS/submit limits at submit time), ``scheduling_gate`` (running limits for
one scheduling pass), ``priorities`` (multifactor), and the tables behind ``sshare``/``sprio``.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spur.accounting.fairshare import DEFAULT_HALF_LIFE_SECS, ShareNode, add_usage, decayed, share_table
from spur.accounting.limits import Demand, LimitTable, LimitTracker
from spur.accounting.model import (
    ADMIN_LEVELS,
    LIMIT_OPTIONS,
    LIMIT_TITLES,
    ROOT,
    UNSET,
    Account,
    AcctError,
    Association,
    Cluster,
    Limits,
    Qos,
    User,
    apply_limit,
    assoc_key,
    format_limit,
    parse_limit,
)
from spur.accounting.tres import TRES_DEFS
from spur.core.serde import from_plain, to_plain
from spur.state.domain import Rejected, StateDomain, StateQueries

if TYPE_CHECKING:
    from spur.accounting.priority import PriorityFactors, PriorityWeights
    from spur.core.job import Job, JobSpec

ENFORCE_CHOICES = ("associations", "limits", "qos")
INVALID_ACCOUNT = "Invalid account or account/partition combination specified"
INVALID_QOS = "Invalid qos specification"
SUBMIT_LIMIT = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
ENTITIES = ("account", "user", "association", "qos", "cluster", "tres")


# ---------------------------------------------------------------------------------- commands


@dataclass
class ConfigureAccounting:
    """The leader's ``[accounting]``/``[priority]`` settings that applies must agree on."""

    cluster: str
    enforce: list[str] = field(default_factory=list)
    decay_half_life_secs: float = DEFAULT_HALF_LIFE_SECS
    control_host: str = ""
    control_port: int = 0


@dataclass
class AcctAdd:
    """``sacctmgr add <entity> <names> <key=value>...``"""

    entity: str
    names: list[str]
    values: dict[str, str] = field(default_factory=dict)


@dataclass
class AcctModify:
    """``sacctmgr modify <entity> where <key=value>... set <key=value>...``"""

    entity: str
    where: dict[str, str] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)


@dataclass
class AcctDelete:
    """``sacctmgr delete <entity> where <key=value>...``"""

    entity: str
    where: dict[str, str] = field(default_factory=dict)


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


_BAD_NAME = re.compile(r"[\s|,=:'\"]")


def _check_names(names: list[str]) -> None:
    """Entity names must be non-empty words (they are keys, and sacctmgr's own separators are not)."""
    for name in names:
        if not name or _BAD_NAME.search(name) or len(name) > 64:
            raise AcctError(f" Invalid name {name!r}: names are 1-64 characters without spaces or ,|=:'\"")


def _line_acct(account: str, cluster: str) -> str:
    return f"  A = {account:<10.10} C = {cluster:<10.10}"


def _line_user_add(user: str, account: str, cluster: str) -> str:
    return f"  U = {user:<9.9} A = {account:<10.10} C = {cluster:<10.10}"


def _line_user_assoc(cluster: str, account: str, user: str) -> str:
    return f"  C = {cluster:<10.10} A = {account:<10.10} U = {user:<9.9}"


def _admin_level(raw: str) -> str:
    for level in ADMIN_LEVELS:
        if raw.lower() in (level.lower(), level.lower()[:5]):
            return level
    raise AcctError(f" Invalid AdminLevel '{raw}': use None, Operator or Administrator")


class AccountingDomain(StateDomain):
    """See the module docstring."""

    name = "accounting"
    commands = (ConfigureAccounting, AcctAdd, AcctModify, AcctDelete)

    def __init__(self, state: StateQueries) -> None:
        super().__init__(state)
        self._reset()

    def _reset(self) -> None:
        self.cluster = "spur"
        self.enforce: list[str] = []
        self.half_life = DEFAULT_HALF_LIFE_SECS
        self.clusters: dict[str, Cluster] = {"spur": Cluster("spur")}
        self.accounts: dict[str, Account] = {
            ROOT: Account(ROOT, "default root account", ROOT, ""),
        }
        self.users: dict[str, User] = {ROOT: User(ROOT, ROOT, "Administrator")}
        self.assocs: dict[str, Association] = {}
        for assoc in (Association(ROOT, qos=["normal"]), Association(ROOT, ROOT)):
            self.assocs[assoc.key] = assoc
        self.qos: dict[str, Qos] = {"normal": Qos("normal", "Normal QOS default")}
        # Derived: non-terminal jobs per account -> user, and per QOS -> user (submit limits).
        self._submitted: dict[str, dict[str, int]] = {}
        self._qos_submitted: dict[str, dict[str, int]] = {}
        # Caches of scheduling_gate (derived, never stored): the limit table, and per job id its
        # (start time, time limit, partition) -> (association key, qos, user, demand).
        self._table: LimitTable | None = None
        self._job_cache: dict[int, list[Any]] = {}
        self._generation = 0  # bumped by every apply: cached association keys are then re-resolved
        self._children: dict[str, list[str]] | None = None
        # Fair-share factors for priorities: ((generation, usage changes, minute), key -> factor).
        self._usage_changes = 0
        self._fairshare: tuple[tuple[int, int, int], dict[str, float]] | None = None

    # ------------------------------------------------------------------ snapshot

    def snapshot(self) -> Any:
        return {
            "cluster": self.cluster,
            "enforce": list(self.enforce),
            "half_life": self.half_life,
            "clusters": [to_plain(c) for c in self.clusters.values()],
            "accounts": [to_plain(a) for a in self.accounts.values()],
            "users": [to_plain(u) for u in self.users.values()],
            "assocs": [to_plain(a) for a in self.assocs.values()],
            "qos": [to_plain(q) for q in self.qos.values()],
        }

    def restore(self, body: Any | None) -> None:
        self._reset()
        if body is not None:
            self.cluster = body.get("cluster", self.cluster)
            self.enforce = list(body.get("enforce", []))
            self.half_life = float(body.get("half_life", DEFAULT_HALF_LIFE_SECS))
            self.clusters = {c["name"]: from_plain(Cluster, c) for c in body.get("clusters", [])}
            self.accounts = {a["name"]: from_plain(Account, a) for a in body.get("accounts", [])}
            self.users = {u["name"]: from_plain(User, u) for u in body.get("users", [])}
            self.assocs = {}
            for plain in body.get("assocs", []):
                assoc = from_plain(Association, plain)
                self.assocs[assoc.key] = assoc
            self.qos = {q["name"]: from_plain(Qos, q) for q in body.get("qos", [])}
        for job in self.state.jobs.values():
            if not job.state.is_terminal:
                self._count_submitted(job.spec.account, job.spec.qos, job.user, 1)

    # ------------------------------------------------------------------ queries

    def configured_as(self, cmd: ConfigureAccounting) -> bool:
        """Whether applying ``cmd`` would change nothing (the leader proposes it only if not)."""
        own = self.clusters.get(cmd.cluster)
        return (
            own is not None
            and (self.cluster, self.enforce, self.half_life)
            == (cmd.cluster, cmd.enforce, cmd.decay_half_life_secs)
            and (own.control_host, own.control_port) == (cmd.control_host, cmd.control_port)
        )

    def admin_level(self, user: str) -> str:
        """The user's AdminLevel (``None`` for unknown users)."""
        found = self.users.get(user)
        return found.admin_level if found else "None"

    def assoc_for(self, account: str, user: str, partition: str = "") -> Association | None:
        """The user's association in ``account`` (the partition one when it exists)."""
        if partition:
            found = self.assocs.get(assoc_key(account, user, partition))
            if found is not None:
                return found
        return self.assocs.get(assoc_key(account, user))

    def parent_key(self, assoc: Association) -> str:
        """Key of the level above ``assoc`` ("" for root's own association)."""
        if assoc.user:
            return assoc_key(assoc.account)
        parent = self.accounts[assoc.account].parent if assoc.account in self.accounts else ""
        return assoc_key(parent) if parent else ""

    def children(self, account: str) -> list[str]:
        """Sub-accounts of ``account``, by name (an index rebuilt after each accounting command)."""
        if self._children is None:
            index: dict[str, list[str]] = {}
            for a in sorted(self.accounts.values(), key=lambda a: a.name):
                index.setdefault(a.parent, []).append(a.name)
            self._children = index
        return list(self._children.get(account, []))

    def subtree(self, account: str) -> list[str]:
        """``account`` and every account below it."""
        out, todo = [], [account]
        while todo:
            name = todo.pop()
            out.append(name)
            todo.extend(self.children(name))
        return out

    def tree_order(self) -> list[Association]:
        """Associations depth first: an account, its users' associations, then its sub-accounts."""
        by_account: dict[str, list[Association]] = {}
        for assoc in self.assocs.values():
            if assoc.user:
                by_account.setdefault(assoc.account, []).append(assoc)
        out: list[Association] = []

        def walk(account: str) -> None:
            own = self.assocs.get(assoc_key(account))
            if own is not None:
                out.append(own)
            out.extend(sorted(by_account.get(account, []), key=lambda a: (a.user, a.partition)))
            for child in self.children(account):
                walk(child)

        walk(ROOT)
        return out

    def depth(self, account: str) -> int:
        depth, seen = 0, set()
        while account and account != ROOT and account not in seen:
            seen.add(account)
            account = self.accounts[account].parent if account in self.accounts else ""
            depth += 1
        return depth

    def effective_qos(self, assoc: Association) -> list[str]:
        """The QOS an association may use: its own list, else the nearest ancestor's."""
        current: Association | None = assoc
        seen: set[str] = set()
        while current is not None and current.key not in seen:
            seen.add(current.key)
            if current.qos:
                return list(current.qos)
            parent = self.parent_key(current)
            current = self.assocs.get(parent) if parent else None
        return ["normal"] if "normal" in self.qos else []

    def job_assoc(self, job: Job) -> Association | None:
        return self.assoc_for(job.spec.account, job.user, job.partition)

    # ------------------------------------------------------------------ submit path

    def admit(self, spec: JobSpec, user: str, partition: str, count: int) -> str:
        """Check a submission (called by SubmitJob's apply, last, so a "" answer means accepted).

        Fills in a known user's default account; with enforcement on, also the association's default
        QOS, and refuses an unknown account/user pair, a QOS the association may not use, or a job over
        a submit limit (GrpSubmit, MaxSubmitJobs). Returns Slurm's message, or "" and counts the
        ``count`` new jobs.
        """
        known = self.users.get(user)
        if not spec.account and known is not None:
            # As slurmctld with accounting, enforced or not: a known user's job gets its default account.
            spec.account = known.default_account
        enforce = set(self.enforce)
        if enforce:
            assoc = self.assoc_for(spec.account, user, partition) if spec.account else None
            if assoc is None:
                return INVALID_ACCOUNT
            allowed = self.effective_qos(assoc)
            if not spec.qos:
                spec.qos = assoc.default_qos or ("normal" if "normal" in allowed else "")
            if "qos" in enforce and spec.qos and (spec.qos not in self.qos or spec.qos not in allowed):
                return INVALID_QOS
            if "limits" in enforce and self._over_submit_limit(assoc, spec.qos, user, count):
                return SUBMIT_LIMIT
        self._count_submitted(spec.account, spec.qos, user, count)
        return ""

    def _over_submit_limit(self, assoc: Association, qos: str, user: str, count: int) -> bool:
        max_submit = UNSET
        current: Association | None = assoc
        seen: set[str] = set()
        while current is not None and current.key not in seen:
            seen.add(current.key)
            lim = current.limits
            if max_submit == UNSET:
                max_submit = lim.max_submit
            if lim.grp_submit != UNSET:
                if current.user:
                    used = self._submitted.get(current.account, {}).get(current.user, 0)
                else:
                    used = sum(
                        sum(self._submitted.get(a, {}).values()) for a in self.subtree(current.account)
                    )
                if used + count > lim.grp_submit:
                    return True
            parent = self.parent_key(current)
            current = self.assocs.get(parent) if parent else None
        mine = self._submitted.get(assoc.account, {}).get(user, 0)
        if max_submit != UNSET and mine + count > max_submit:
            return True
        q = self.qos.get(qos)
        if q is not None:
            per_user = self._qos_submitted.get(qos, {})
            if q.limits.grp_submit != UNSET and sum(per_user.values()) + count > q.limits.grp_submit:
                return True
            if q.limits.max_submit != UNSET and per_user.get(user, 0) + count > q.limits.max_submit:
                return True
        return False

    def _count_submitted(self, account: str, qos: str, user: str, delta: int) -> None:
        for table, key in ((self._submitted, account), (self._qos_submitted, qos)):
            row = table.setdefault(key, {})
            row[user] = max(0, row.get(user, 0) + delta)

    def on_job_finished(self, job: Job) -> None:
        self._count_submitted(job.spec.account, job.spec.qos, job.user, -1)
        if not job.start_time or not job.allocation:
            return
        assoc = self.job_assoc(job)
        if assoc is None:
            return
        elapsed = max(0.0, job.end_time - job.start_time - job.suspended_secs)
        cpus = sum(a.cpus for a in job.allocation)
        qos = self.qos.get(job.spec.qos)
        factor = qos.usage_factor if qos is not None else 1.0
        assoc.usage, assoc.usage_time = add_usage(
            assoc.usage, assoc.usage_time, cpus * elapsed * factor, job.end_time, self.half_life
        )
        self._usage_changes += 1

    # ------------------------------------------------------------------ scheduling

    def scheduling_gate(self) -> JobLimitGate | None:
        """Running limits for one scheduling pass, or None when limits are not enforced."""
        if "limits" not in self.enforce:
            return None
        if self._table is None:
            self._table = LimitTable(
                self._limits_of, self._parent_of, {n: q.limits for n, q in self.qos.items()}
            )
        if len(self._job_cache) > 2 * len(self.state.jobs) + 1000:
            self._job_cache.clear()  # forget jobs that are gone
        gate = JobLimitGate(self, LimitTracker(self._table))
        for job in self.state.active_jobs():
            gate.charge_running(job)
        return gate

    def _limits_of(self, key: str) -> Limits | None:
        assoc = self.assocs.get(key)
        return assoc.limits if assoc is not None else None

    def _parent_of(self, key: str) -> str:
        assoc = self.assocs.get(key)
        return self.parent_key(assoc) if assoc is not None else ""

    def share_rows(self, now: float) -> list[tuple[Association, Any]]:
        """(association, ShareRow) in tree order, usage decayed to ``now``."""
        order = self.tree_order()
        nodes = [
            ShareNode(
                a.key,
                self.parent_key(a),
                a.shares,
                decayed(a.usage, a.usage_time, now, self.half_life),
            )
            for a in order
        ]
        table = share_table(nodes)
        return [(a, table[a.key]) for a in order if a.key in table]

    def _fairshare_factors(self, now: float) -> dict[str, float]:
        """Association key -> fair-share factor, recomputed when entities or usage change and at
        most once a minute otherwise (Slurm recalculates every PriorityCalcPeriod, 5 minutes)."""
        key = (self._generation, self._usage_changes, int(now // 60))
        if self._fairshare is None or self._fairshare[0] != key:
            self._fairshare = (key, {a.key: row.fairshare for a, row in self.share_rows(now)})
        return self._fairshare[1]

    def job_factors(
        self, jobs: Iterable[Job], weights: PriorityWeights, now: float
    ) -> dict[int, PriorityFactors]:
        """Multifactor priority factors of ``jobs`` (see :mod:`spur.accounting.priority`)."""
        from spur.accounting.priority import job_factors

        shares = self._fairshare_factors(now) if weights.fairshare else {}
        cluster_cpus = sum(n.cpus for n in self.state.nodes.values())
        max_qos = max((q.priority for q in self.qos.values()), default=0)
        out: dict[int, PriorityFactors] = {}
        for job in jobs:
            assoc = self.job_assoc(job)
            qos = self.qos.get(job.spec.qos or "normal")
            out[job.job_id] = job_factors(
                eligible_time=job.eligible_time or job.submit_time,
                now=now,
                max_age_secs=weights.max_age_secs,
                fairshare=shares.get(assoc.key, 0.0) if assoc else 0.0,
                cpus=job.spec.tasks * job.spec.cpus_per_task,
                cluster_cpus=cluster_cpus,
                qos_priority=qos.priority if qos else 0,
                max_qos_priority=max_qos,
                nice=job.spec.nice,
            )
        return out

    def priorities(self, jobs: list[Job], weights: PriorityWeights, now: float) -> dict[int, int]:
        """Job id -> multifactor priority (empty when every weight is 0: basic priority stays)."""
        if not weights.active:
            return {}
        # The same arithmetic as PriorityFactors.priority, inlined: this runs on every pending job
        # of every scheduler pass (tests check both agree).
        shares = self._fairshare_factors(now) if weights.fairshare else {}
        cluster_cpus = sum(n.cpus for n in self.state.nodes.values())
        max_qos = max((q.priority for q in self.qos.values()), default=0)
        qos_part = {n: (q.priority / max_qos if max_qos > 0 else 0.0) for n, q in self.qos.items()}
        max_age = weights.max_age_secs
        w_age, w_fs, w_size = weights.age, weights.fairshare, weights.job_size
        w_qos, base = weights.qos, round(weights.partition * 1.0)
        out: dict[int, int] = {}
        for job in jobs:
            spec = job.spec
            age = (
                min(1.0, max(0.0, now - (job.eligible_time or job.submit_time)) / max_age)
                if max_age > 0
                else 0.0
            )
            size = min(1.0, spec.tasks * spec.cpus_per_task / cluster_cpus) if cluster_cpus > 0 else 0.0
            if w_fs:
                assoc = self.assoc_for(spec.account, job.user, job.partition)
                fs = min(1.0, max(0.0, shares.get(assoc.key, 0.0))) if assoc is not None else 0.0
            else:
                fs = 0.0
            q = qos_part.get(spec.qos or "normal", 0.0)
            total = round(w_age * age) + round(w_fs * fs) + round(w_size * size) + base + round(w_qos * q)
            out[job.job_id] = max(1, total - spec.nice)
        return out

    # ------------------------------------------------------------------ show (records for the CLI)

    def records(self, entity: str, *, with_assoc: bool = False) -> list[dict[str, str]]:
        """Rows of ``entity`` keyed by sacctmgr's (lower-case) format field names."""
        if entity == "account":
            if with_assoc:
                return [
                    {**self._account_record(self.accounts[a.account]), **self._assoc_record(a)}
                    for a in self.tree_order()
                ]
            return [self._account_record(a) for _, a in sorted(self.accounts.items())]
        if entity == "user":
            out: list[dict[str, str]] = []
            for name, user in sorted(self.users.items()):
                base = {
                    "user": name,
                    "defaultaccount": user.default_account,
                    "admin": user.admin_level,
                    "adminlevel": user.admin_level,
                }
                if with_assoc:
                    mine = [a for a in self.tree_order() if a.user == name]
                    out.extend(
                        {**self._assoc_record(a), **base} for a in sorted(mine, key=lambda a: a.account)
                    )
                else:
                    out.append(base)
            return out
        if entity == "association":
            return [self._assoc_record(a) for a in self.tree_order()]
        if entity == "qos":
            return [self._qos_record(q) for q in self.qos.values()]
        if entity == "tres":
            return [{"type": d.type, "name": d.name, "id": str(d.id)} for d in TRES_DEFS]
        if entity == "cluster":
            return [
                {
                    "cluster": c.name,
                    "controlhost": c.control_host,
                    "controlport": str(c.control_port) if c.control_port else "0",
                    "rpc": "9728",
                    "share": "1",
                    "qos": "normal",
                }
                for _, c in sorted(self.clusters.items())
            ]
        raise AcctError("No valid entity in list command")

    @staticmethod
    def _account_record(a: Account) -> dict[str, str]:
        return {
            "account": a.name,
            "descr": a.description,
            "description": a.description,
            "org": a.organization,
            "organization": a.organization,
            "parentname": a.parent,
        }

    def _assoc_record(self, a: Association) -> dict[str, str]:
        lim = a.limits
        parent = "" if a.user else (self.accounts[a.account].parent if a.account in self.accounts else "")
        return {
            "cluster": self.cluster,
            "account": a.account,
            "user": a.user,
            "partition": a.partition,
            "share": str(a.shares),
            "fairshare": str(a.shares),
            "grptres": format_limit(lim, "grp_tres"),
            "grpjobs": format_limit(lim, "grp_jobs"),
            "grpsubmit": format_limit(lim, "grp_submit"),
            "grpsubmitjobs": format_limit(lim, "grp_submit"),
            "maxjobs": format_limit(lim, "max_jobs"),
            "maxsubmit": format_limit(lim, "max_submit"),
            "maxsubmitjobs": format_limit(lim, "max_submit"),
            "maxwall": format_limit(lim, "max_wall"),
            "maxtres": format_limit(lim, "max_tres_per_job"),
            "maxtresperjob": format_limit(lim, "max_tres_per_job"),
            "maxtresperuser": format_limit(lim, "max_tres_per_user"),
            "qos": ",".join(self.effective_qos(a)),
            "defaultqos": a.default_qos,
            "parentname": parent if parent != a.account else "",
            "depth": str(self.depth(a.account) + (1 if a.user else 0)),
        }

    @staticmethod
    def _qos_record(q: Qos) -> dict[str, str]:
        lim = q.limits
        return {
            "name": q.name,
            "description": q.description,
            "descr": q.description,
            "priority": str(q.priority),
            "gracetime": "00:00:00",
            "preempt": ",".join(q.preempt),
            "preemptmode": q.preempt_mode,
            "flags": ",".join(q.flags),
            "usagefactor": f"{q.usage_factor:.6f}",
            "grptres": format_limit(lim, "grp_tres"),
            "grpjobs": format_limit(lim, "grp_jobs"),
            "grpsubmit": format_limit(lim, "grp_submit"),
            "maxwall": format_limit(lim, "max_wall"),
            "maxtres": format_limit(lim, "max_tres_per_job"),
            "maxtresperjob": format_limit(lim, "max_tres_per_job"),
            "maxtrespu": format_limit(lim, "max_tres_per_user"),
            "maxtresperuser": format_limit(lim, "max_tres_per_user"),
            "maxjobspu": format_limit(lim, "max_jobs"),
            "maxsubmitpu": format_limit(lim, "max_submit"),
        }

    # ------------------------------------------------------------------ apply: dispatch

    def apply(self, cmd: Any) -> Any:
        try:
            return super().apply(cmd)
        except AcctError as exc:
            return Rejected(exc.code, exc.message)
        finally:
            # Entities may have changed: derived indexes and the scheduler's caches are rebuilt on
            # next use (a refused command changed nothing, but this keeps the rule simple).
            self._table = None
            self._children = None
            self._generation += 1

    def _apply_ConfigureAccounting(self, cmd: ConfigureAccounting) -> Any:
        bad = [e for e in cmd.enforce if e not in ENFORCE_CHOICES]
        if bad or not cmd.cluster:
            raise AcctError(f"invalid accounting configuration: enforce {bad}, cluster {cmd.cluster!r}")
        self.enforce = list(cmd.enforce)
        self.half_life = float(cmd.decay_half_life_secs)
        if cmd.cluster != self.cluster and self.cluster in self.clusters and len(self.clusters) == 1:
            self.clusters.pop(self.cluster)
        self.cluster = cmd.cluster
        own = self.clusters.setdefault(cmd.cluster, Cluster(cmd.cluster))
        own.control_host, own.control_port = cmd.control_host, cmd.control_port
        return True

    def _apply_AcctAdd(self, cmd: AcctAdd) -> Any:
        handler = {
            "account": self._add_account,
            "user": self._add_user,
            "qos": self._add_qos,
            "cluster": self._add_cluster,
        }.get(cmd.entity)
        if handler is None:
            raise AcctError(f" Adding {cmd.entity} is not supported")
        return handler(cmd.names, {k.lower(): v for k, v in cmd.values.items()})

    def _apply_AcctModify(self, cmd: AcctModify) -> Any:
        handler = {"account": self._modify_account, "user": self._modify_user, "qos": self._modify_qos}.get(
            cmd.entity
        )
        if handler is None:
            raise AcctError(f" Modifying {cmd.entity} is not supported")
        where = {k.lower(): v for k, v in cmd.where.items()}
        return handler(where, {k.lower(): v for k, v in cmd.values.items()})

    def _apply_AcctDelete(self, cmd: AcctDelete) -> Any:
        handler = {
            "account": self._delete_account,
            "user": self._delete_user,
            "qos": self._delete_qos,
            "cluster": self._delete_cluster,
        }.get(cmd.entity)
        if handler is None:
            raise AcctError(f" Deleting {cmd.entity} is not supported")
        return handler({k.lower(): v for k, v in cmd.where.items()})

    # ------------------------------------------------------------------ association settings

    def _assoc_settings(self, values: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
        """Parse the association options among ``values``: (changes, Settings lines)."""
        changes: dict[str, Any] = {}
        lines: list[str] = []
        for key, raw in values.items():
            if key in LIMIT_OPTIONS:
                attr = LIMIT_OPTIONS[key]
                changes[attr] = parse_limit(attr, key, raw)
                lines.append(f"  {LIMIT_TITLES[attr]:<13} = {raw}")
            elif key in ("fairshare", "share", "shares"):
                if not raw.isdigit():
                    raise AcctError(
                        f"sacctmgr: error: Invalid value {raw!r} for Fairshare: expected a number"
                    )
                changes["shares"] = int(raw)
                lines.append(f"  {'Fairshare':<13} = {raw}")
            elif key in ("qos", "qoslevel"):
                names = _split(raw)
                for q in names:
                    if q not in self.qos:
                        raise AcctError(f" Invalid QOS name: {q}")
                changes["qos"] = names
                lines.append(f"  {'QOS':<13} = {raw}")
            elif key == "defaultqos":
                if raw not in self.qos:
                    raise AcctError(f" Invalid QOS name: {raw}")
                changes["default_qos"] = raw
                lines.append(f"  {'Default QOS':<13} = {raw}")
        return changes, lines

    @staticmethod
    def _set_assoc(assoc: Association, changes: dict[str, Any]) -> None:
        for attr, value in changes.items():
            if attr in ("shares", "qos", "default_qos"):
                setattr(assoc, attr, value)
            else:
                apply_limit(assoc.limits, attr, value)

    @staticmethod
    def _check_options(values: dict[str, str], allowed: Iterable[str]) -> None:
        allowed = (
            set(allowed)
            | set(LIMIT_OPTIONS)
            | {"fairshare", "share", "shares", "qos", "qoslevel", "defaultqos"}
        )
        for key in values:
            if key not in allowed:
                raise AcctError(f" Unknown option: {key}\n Use keyword 'where' to modify condition")

    # ------------------------------------------------------------------ accounts

    def _add_account(self, names: list[str], values: dict[str, str]) -> list[str]:
        self._check_options(values, ("description", "organization", "parent", "cluster", "name", "names"))
        names = [n.lower() for n in names + _split(values.get("name", "") + "," + values.get("names", ""))]
        if not names:
            raise AcctError(" Need name of account to add.")
        parent = values.get("parent", ROOT).lower()
        if parent not in self.accounts:
            raise AcctError(f" Parent account '{parent}' doesn't exist.")
        changes, assoc_lines = self._assoc_settings(values)
        _check_names(names)
        new = [n for n in dict.fromkeys(names) if n not in self.accounts]
        if not new:
            raise AcctError(" Nothing new added.", "ALREADY_EXISTS")
        lines = [" Adding Account(s)", *(f"  {n}" for n in new), " Settings"]
        for name in new:
            descr = values.get("description", name)
            org = values.get("organization", name if parent == ROOT else self.accounts[parent].organization)
            self.accounts[name] = Account(name, descr, org, parent)
            assoc = Association(name)
            self._set_assoc(assoc, changes)
            self.assocs[assoc.key] = assoc
        first = self.accounts[new[0]]
        lines += [
            f"  {'Description':<15} = {first.description}",
            f"  {'Organization':<15} = {first.organization}",
        ]
        lines += [" Associations", *(_line_acct(n, self.cluster) for n in new), " Settings"]
        lines += [f"  {'Parent':<13} = {parent}", *assoc_lines]
        return lines

    def _match_accounts(self, where: dict[str, str]) -> list[str]:
        names = [n.lower() for n in _split(where.get("name", "") + "," + where.get("names", ""))]
        names += [n.lower() for n in _split(where.get("account", "") + "," + where.get("accounts", ""))]
        if "parent" in where:
            parents = set(_split(where["parent"].lower()))
            pool = [a for a in self.accounts.values() if a.parent in parents]
            return sorted(a.name for a in pool if not names or a.name in names)
        return [n for n in dict.fromkeys(names) if n in self.accounts]

    def _modify_account(self, where: dict[str, str], values: dict[str, str]) -> list[str]:
        self._check_options(values, ("description", "organization", "parent"))
        targets = self._match_accounts(where)
        if not targets:
            raise AcctError(" Nothing modified", "NOT_FOUND")
        changes, _ = self._assoc_settings(values)
        parent = values.get("parent", "").lower()
        if parent:
            if parent not in self.accounts:
                raise AcctError(f" Parent account '{parent}' doesn't exist.")
            for name in targets:
                if name == ROOT or parent in self.subtree(name):
                    raise AcctError(f" Can't move account '{name}' under '{parent}': that would make a loop.")
        lines: list[str] = []
        if any(k in values for k in ("description", "organization", "parent")):
            for name in targets:
                acct = self.accounts[name]
                acct.description = values.get("description", acct.description)
                acct.organization = values.get("organization", acct.organization)
                if parent:
                    acct.parent = parent
            lines += [" Modified accounts...", *(f"  {n}" for n in targets)]
        if changes:
            for name in targets:
                self._set_assoc(self.assocs[assoc_key(name)], changes)
            lines.append(" Modified account associations...")
            lines += [
                f"  C = {self.cluster:<10.10} A = {n} of {self.accounts[n].parent or 'root'}" for n in targets
            ]
        if not lines:
            raise AcctError(" Nothing modified", "NOT_FOUND")
        return lines

    def _delete_account(self, where: dict[str, str]) -> list[str]:
        targets = self._match_accounts(where)
        if not targets:
            raise AcctError(" Nothing deleted", "NOT_FOUND")
        gone = set(targets)
        for name in targets:
            if name == ROOT:
                raise AcctError(" Error with request: the root account can not be deleted")
            kids = [c for c in self.children(name) if c not in gone]
            users = sorted(a.user for a in self.assocs.values() if a.account == name and a.user)
            if kids or users:
                what = ", ".join([*(f"account {k}" for k in kids), *(f"user {u}" for u in users)])
                raise AcctError(
                    f" Error with request: account '{name}' still has {what}; delete or move them first"
                )
        for name in targets:
            del self.accounts[name]
            self.assocs.pop(assoc_key(name), None)
        return [" Deleting accounts...", *(f"  {n}" for n in targets)]

    # ------------------------------------------------------------------ users

    def _add_user(self, names: list[str], values: dict[str, str]) -> list[str]:
        self._check_options(
            values,
            ("account", "accounts", "defaultaccount", "adminlevel", "partition", "cluster", "name", "names"),
        )
        names = names + _split(values.get("name", "") + "," + values.get("names", ""))
        if not names:
            raise AcctError(" Need name of user to add.")
        accounts = [a.lower() for a in _split(values.get("account", "") + "," + values.get("accounts", ""))]
        default = values.get("defaultaccount", "").lower()
        if not accounts and default:
            accounts = [default]
        if not accounts:
            if all(n in self.users for n in names):
                raise AcctError(" Nothing new added.", "ALREADY_EXISTS")
            raise AcctError(" Need name of account to add user to.")
        for acct in accounts:
            if acct not in self.accounts:
                raise AcctError(
                    f" This account '{acct}' doesn't exist.\n"
                    "        Contact your admin to add this account.\n"
                    " No associations or wckeys created.",
                    "NOT_FOUND",
                )
        if default and default not in accounts:
            raise AcctError(f" Default account '{default}' is not among the accounts given.")
        level = _admin_level(values["adminlevel"]) if "adminlevel" in values else "None"
        partition = values.get("partition", "")
        if partition and partition not in self.state.partitions:
            raise AcctError(f" Invalid partition name: {partition}")
        changes, settings = self._assoc_settings(values)
        _check_names(names)
        new_users = [n for n in dict.fromkeys(names) if n not in self.users]
        new_assocs = [
            (n, a)
            for n in dict.fromkeys(names)
            for a in accounts
            if assoc_key(a, n, partition) not in self.assocs
        ]
        if not new_users and not new_assocs:
            raise AcctError(" Nothing new added.", "ALREADY_EXISTS")
        lines: list[str] = []
        if new_users:
            lines += [" Adding User(s)", *(f"  {n}" for n in new_users)]
            for n in new_users:
                self.users[n] = User(n, default or accounts[0], level)
            if default or level != "None":
                lines.append(" Settings =")
                lines.append(f"  {'Default Account':<15} = {default or accounts[0]}")
                if level != "None":
                    lines.append(f"  {'Admin Level':<15} = {level}")
        if new_assocs:
            lines.append(" Associations =")
            for n, a in new_assocs:
                assoc = Association(a, n, partition)
                self._set_assoc(assoc, changes)
                self.assocs[assoc.key] = assoc
                lines.append(_line_user_add(n, a, self.cluster))
                user = self.users[n]
                if not user.default_account:
                    user.default_account = a
            lines.append(" Non Default Settings")
            lines += settings
        return lines

    def _modify_user(self, where: dict[str, str], values: dict[str, str]) -> list[str]:
        self._check_options(values, ("defaultaccount", "adminlevel"))
        names = _split(where.get("name", "") + "," + where.get("names", "") + "," + where.get("user", ""))
        targets = [n for n in dict.fromkeys(names) if n in self.users]
        if not targets:
            raise AcctError(" Nothing modified", "NOT_FOUND")
        accounts = [a.lower() for a in _split(where.get("account", "") + "," + where.get("accounts", ""))]
        partition = where.get("partition")
        changes, _ = self._assoc_settings(values)
        level = _admin_level(values["adminlevel"]) if "adminlevel" in values else None
        default = values.get("defaultaccount", "").lower()
        if default:
            for n in targets:
                if assoc_key(default, n) not in self.assocs:
                    raise AcctError(f" User {n} has no association with account '{default}'.")
        assocs = [
            a
            for a in self.tree_order()
            if a.user in targets
            and (not accounts or a.account in accounts)
            and (partition is None or a.partition == partition)
        ]
        if changes and not assocs:
            raise AcctError(" Nothing modified", "NOT_FOUND")
        lines: list[str] = []
        if level is not None or default:
            for n in targets:
                if level is not None:
                    self.users[n].admin_level = level
                if default:
                    self.users[n].default_account = default
            lines += [" Modified users...", *(f"  {n}" for n in targets)]
        if changes:
            for a in assocs:
                self._set_assoc(a, changes)
            lines.append(" Modified user associations...")
            lines += [_line_user_assoc(self.cluster, a.account, a.user) for a in assocs]
        if not lines:
            raise AcctError(" Nothing modified", "NOT_FOUND")
        return lines

    def _delete_user(self, where: dict[str, str]) -> list[str]:
        names = _split(where.get("name", "") + "," + where.get("names", "") + "," + where.get("user", ""))
        accounts = [a.lower() for a in _split(where.get("account", "") + "," + where.get("accounts", ""))]
        partition = where.get("partition")
        targets = [n for n in dict.fromkeys(names) if n in self.users]
        if not targets:
            raise AcctError(" Nothing deleted", "NOT_FOUND")
        if ROOT in targets and not accounts:
            raise AcctError(" Error with request: the root user can not be deleted")
        if not accounts and partition is None:
            for n in targets:
                del self.users[n]
                for key in [k for k, a in self.assocs.items() if a.user == n]:
                    del self.assocs[key]
            return [" Deleting users...", *(f"  {n}" for n in targets)]
        doomed = [
            a
            for a in self.tree_order()
            if a.user in targets
            and (not accounts or a.account in accounts)
            and (partition is None or a.partition == partition)
        ]
        if not doomed:
            raise AcctError(" Nothing deleted", "NOT_FOUND")
        for a in doomed:
            del self.assocs[a.key]
        for n in targets:
            user = self.users[n]
            if assoc_key(user.default_account, n) not in self.assocs:
                left = sorted(a.account for a in self.assocs.values() if a.user == n)
                user.default_account = left[0] if left else ""
        lines = [" Deleting user associations..."]
        lines += [_line_user_assoc(self.cluster, a.account, a.user) for a in doomed]
        return lines

    # ------------------------------------------------------------------ QOS

    def _qos_settings(self, qos: Qos, values: dict[str, str]) -> list[str]:
        """Apply QOS options to ``qos`` (a copy the caller may discard); the Settings lines."""
        lines: list[str] = []
        for key, raw in values.items():
            if key in LIMIT_OPTIONS:
                attr = LIMIT_OPTIONS[key]
                apply_limit(qos.limits, attr, parse_limit(attr, key, raw))
                lines.append(f"  {LIMIT_TITLES[attr]:<24} = {raw}")
            elif key == "priority":
                if not raw.lstrip("-").isdigit():
                    raise AcctError(f"sacctmgr: error: Invalid value {raw!r} for Priority: expected a number")
                qos.priority = max(0, int(raw))
            elif key == "description":
                qos.description = raw
            elif key == "preempt":
                wanted = _split(raw.lstrip("+="))
                for q in wanted:
                    if q not in self.qos and q != qos.name:
                        raise AcctError(f" Invalid QOS name: {q}")
                qos.preempt = wanted
            elif key == "preemptmode":
                if raw.lower() not in ("cluster", "off", "cancel", "requeue", "suspend"):
                    raise AcctError(f" Invalid PreemptMode '{raw}'")
                qos.preempt_mode = raw.lower()
            elif key == "usagefactor":
                try:
                    qos.usage_factor = float(raw)
                except ValueError:
                    raise AcctError(f"sacctmgr: error: Invalid value {raw!r} for UsageFactor") from None
                if not math.isfinite(qos.usage_factor) or qos.usage_factor < 0:
                    raise AcctError(f"sacctmgr: error: Invalid value {raw!r} for UsageFactor")
            elif key == "flags":
                qos.flags = _split(raw)
            elif key not in ("name", "names", "cluster"):
                raise AcctError(f" Unknown option: {key}\n Use keyword 'where' to modify condition")
        for key, title in (
            ("preempt", "Preempt"),
            ("preemptmode", "PreemptMode"),
            ("priority", "Priority"),
            ("usagefactor", "UsageFactor"),
        ):
            if key in values:
                lines.append(f"  {title:<24} = {values[key]}")
        return lines

    def _preempt_loop(self, table: dict[str, Qos]) -> list[str]:
        """A cycle in the preempt graph, as a path (empty when there is none)."""
        state: dict[str, int] = {}
        path: list[str] = []

        def visit(name: str) -> list[str]:
            state[name] = 1
            path.append(name)
            for nxt in table[name].preempt if name in table else []:
                if state.get(nxt) == 1:
                    return [*path[path.index(nxt) :], nxt]
                if state.get(nxt) is None:
                    found = visit(nxt)
                    if found:
                        return found
            path.pop()
            state[name] = 2
            return []

        for name in table:
            if state.get(name) is None:
                found = visit(name)
                if found:
                    return found
        return []

    def _commit_qos(self, updated: dict[str, Qos], verb: str) -> None:
        table = {**self.qos, **updated}
        loop = self._preempt_loop(table)
        if loop:
            raise AcctError(f" Problem {verb} QOS: preemption loop ({' -> '.join(loop)})")
        self.qos.update(updated)

    def _add_qos(self, names: list[str], values: dict[str, str]) -> list[str]:
        names = [n.lower() for n in names + _split(values.get("name", "") + "," + values.get("names", ""))]
        if not names:
            raise AcctError(" Need name of QOS to add.")
        _check_names(names)
        new = [n for n in dict.fromkeys(names) if n not in self.qos]
        created: dict[str, Qos] = {}
        lines: list[str] = []
        for n in new:
            qos = Qos(n, n)
            lines = self._qos_settings(qos, values)
            created[n] = qos
        if not new:
            raise AcctError(" Nothing new added.", "ALREADY_EXISTS")
        self._commit_qos(created, "adding")
        first = created[new[0]]
        return [
            " Adding QOS(s)",
            *(f"  {n}" for n in new),
            " Settings",
            f"  {'Description':<14} = {first.description}",
            *lines,
        ]

    def _modify_qos(self, where: dict[str, str], values: dict[str, str]) -> list[str]:
        names = [n.lower() for n in _split(where.get("name", "") + "," + where.get("names", ""))]
        targets = [n for n in dict.fromkeys(names) if n in self.qos]
        if not targets or not values:
            raise AcctError(" Nothing modified", "NOT_FOUND")
        updated = {}
        for n in targets:
            qos = copy.deepcopy(self.qos[n])
            self._qos_settings(qos, values)
            updated[n] = qos
        self._commit_qos(updated, "modifying")
        return [" Modified qos...", *(f"  {n}" for n in targets)]

    def _delete_qos(self, where: dict[str, str]) -> list[str]:
        names = [n.lower() for n in _split(where.get("name", "") + "," + where.get("names", ""))]
        targets = [n for n in dict.fromkeys(names) if n in self.qos]
        if not targets:
            raise AcctError(" Nothing deleted", "NOT_FOUND")
        if "normal" in targets:
            raise AcctError(" Error with request: the normal QOS can not be deleted")
        for n in targets:
            del self.qos[n]
            for q in self.qos.values():
                q.preempt = [p for p in q.preempt if p != n]
            for a in self.assocs.values():
                a.qos = [p for p in a.qos if p != n]
                if a.default_qos == n:
                    a.default_qos = ""
        return [" Deleting QOS(s)...", *(f"  {n}" for n in targets)]

    # ------------------------------------------------------------------ clusters

    def _add_cluster(self, names: list[str], values: dict[str, str]) -> list[str]:
        names = [n.lower() for n in names + _split(values.get("name", "") + "," + values.get("names", ""))]
        for key in values:
            if key not in ("name", "names"):
                raise AcctError(f" Unknown option: {key}\n Use keyword 'where' to modify condition")
        _check_names(names)
        new = [n for n in dict.fromkeys(names) if n not in self.clusters]
        if not new:
            raise AcctError(" Nothing new added.", "ALREADY_EXISTS")
        for n in new:
            self.clusters[n] = Cluster(n)
        return [" Adding Cluster(s)", *(f"  {'Name':<15}= {n}" for n in new)]

    def _delete_cluster(self, where: dict[str, str]) -> list[str]:
        names = [n.lower() for n in _split(where.get("name", "") + "," + where.get("names", ""))]
        targets = [n for n in dict.fromkeys(names) if n in self.clusters]
        if not targets:
            raise AcctError(" Nothing deleted", "NOT_FOUND")
        if self.cluster in targets:
            raise AcctError(f" Error with request: cluster '{self.cluster}' is this cluster")
        for n in targets:
            del self.clusters[n]
        return [" Deleting clusters...", *(f"  {n}" for n in targets)]


class JobLimitGate:
    """The per-pass limit check the scheduler plugin calls by job id (see ``spur.core.scheduling``).

    What a job asks for and which association it charges are cached in the domain between passes
    (keyed on the job's start time, time limit and partition, dropped when the entities change).
    """

    def __init__(self, domain: AccountingDomain, tracker: LimitTracker) -> None:
        self._domain = domain
        self._tracker = tracker
        self._cache = domain._job_cache

    def _lookup(self, job: Job) -> tuple[str, str, str, Demand] | None:
        """(association key, qos, user, demand) of ``job``, or None when it has no association.

        Cache entry: [stamp, demand, generation, found]; the demand stays valid while the stamp
        does, the association while no accounting command was applied.
        """
        stamp = (job.start_time, job.time_limit_secs, job.partition)
        generation = self._domain._generation
        hit = self._cache.get(job.job_id)
        if hit is not None and hit[0] == stamp:
            if hit[2] == generation:
                cached: tuple[str, str, str, Demand] | None = hit[3]
                return cached
            demand = hit[1]
        else:
            demand = running_demand(job) if job.allocation else pending_demand(job)
        assoc = self._domain.job_assoc(job)
        found = (assoc.key, job.spec.qos, job.user, demand) if assoc is not None else None
        self._cache[job.job_id] = [stamp, demand, generation, found]
        return found

    def charge_running(self, job: Job) -> None:
        found = self._lookup(job)
        if found is not None:
            self._tracker.charge(*found)

    def check(self, job_id: int) -> str:
        """Slurm's pending reason when starting the job now would exceed a limit, else ""."""
        job = self._domain.state.jobs.get(job_id)
        found = self._lookup(job) if job is not None else None
        return self._tracker.check(*found) if found is not None else ""

    def check_job(self, job: Job) -> str:
        """``check`` for a job the state may not hold yet (the immediate grant's provisional job):
        computed afresh, never cached under its id."""
        if job.job_id in self._domain.state.jobs:
            return self.check(job.job_id)
        domain, spec = self._domain, job.spec
        known = domain.users.get(job.user)
        account = spec.account or (known.default_account if known is not None else "")
        assoc = domain.assoc_for(account, job.user, job.partition) if account else None
        if assoc is None:
            return "InvalidAccount"  # the submission is refused or charged elsewhere: no quick start
        qos = spec.qos or assoc.default_qos or ("normal" if "normal" in domain.effective_qos(assoc) else "")
        return self._tracker.check(assoc.key, qos, job.user, pending_demand(job))

    def charge(self, job_id: int) -> None:
        """The plan starts the job: count it for the rest of the pass."""
        job = self._domain.state.jobs.get(job_id)
        found = self._lookup(job) if job is not None else None
        if found is not None:
            self._tracker.charge(*found)


def running_demand(job: Job) -> Demand:
    return Demand(
        cpus=sum(a.cpus for a in job.allocation),
        mem_mb=sum(a.mem_mb for a in job.allocation),
        nodes=len(job.allocation),
        gpus=sum(len(a.gpus) for a in job.allocation),
        wall_secs=job.time_limit_secs,
    )


def pending_demand(job: Job) -> Demand:
    from spur.core.resources import gpus_per_node

    spec = job.spec
    nodes = max(1, spec.num_nodes)
    cpus = spec.tasks * max(1, spec.cpus_per_task)
    mem = spec.mem_per_node_mb * nodes if spec.mem_per_node_mb else spec.mem_per_cpu_mb * cpus
    gpn = gpus_per_node(list(spec.gres))[0] if spec.gres else 0
    gpus = spec.gpus_total or gpn * nodes
    return Demand(cpus=cpus, mem_mb=mem, nodes=nodes, gpus=gpus, wall_secs=job.time_limit_secs)
