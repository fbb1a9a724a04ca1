"""The Jobs page's filters, sorting and array folding (pure: JobInfo-like records in, rows out).

Contracts:

- :func:`parse_filter` reads the query string (``user``, ``account``, ``partition``, ``state``,
  ``name``, ``sort``, ``order``, ``page``). ``state`` is ``active`` (the default: pending and running
  jobs, squeue's view), ``history`` (ended jobs), ``all``, or one Slurm state name or short code
  (``PD``, ``R``, ``CD``...). An unknown state, sort key, order or a bad page number raises
  :class:`FilterError` naming the field; nothing is half-applied.
- :class:`QueueJob` is the light record the pages filter, fold and sort (a named tuple of the
  columns; ``origin`` is the job it was read from, for the few values computed only for the rows a
  page shows). :meth:`QueueJob.from_job` reads spurctld's own job, :meth:`QueueJob.from_info` a
  ``JobInfo``; both give equal tuples for the same job.
- :func:`select_rows` keeps the jobs matching every given field (``name`` matches a substring, the
  others exactly), folds the pending tasks of an array with the same reason into one row as squeue
  does (:func:`spur.core.array_rows.group_array_tasks`'s rule), and sorts: ``default`` is squeue's order
  (partition, state, priority descending, id), the others sort by that column then job id.
- :func:`page_of` cuts the rows into pages of :data:`PAGE_SIZE`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from spur.core.array_rows import ArrayGroup, array_task_text
from spur.rpc.proto import spur_pb2 as pb

if TYPE_CHECKING:
    from spur.core.job import Job

__all__ = [
    "FilterError", "JobFilter", "PAGE_SIZE", "QueueJob", "Row", "page_of", "parse_filter", "select_rows",
]  # fmt: skip

PAGE_SIZE = 200

STATE_CODES = {
    "PENDING": "PD", "RUNNING": "R", "SUSPENDED": "S", "COMPLETING": "CG", "COMPLETED": "CD",
    "CANCELLED": "CA", "FAILED": "F", "TIMEOUT": "TO", "NODE_FAIL": "NF", "PREEMPTED": "PR",
    "BOOT_FAIL": "BF", "DEADLINE": "DL", "OUT_OF_MEMORY": "OOM", "REQUEUED": "RQ",
}  # fmt: skip
_BY_CODE = {code: name for name, code in STATE_CODES.items()}
ACTIVE = frozenset({"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "REQUEUED"})
_STATE_ORDER = {"RUNNING": 0, "COMPLETING": 1, "SUSPENDED": 2, "PENDING": 3}
SORT_KEYS = ("default", "id", "user", "account", "partition", "state", "name", "submit", "priority")


class FilterError(ValueError):
    """A query parameter that cannot be used; the message names it."""


@dataclass(frozen=True)
class JobFilter:
    user: str = ""
    account: str = ""
    partition: str = ""
    state: str = "active"
    name: str = ""
    sort: str = "default"
    descending: bool = False
    page: int = 1

    def query(self, **changes: Any) -> str:
        """This filter as a query string, with ``changes`` applied (for links)."""
        from urllib.parse import urlencode

        values = {
            "user": self.user, "account": self.account, "partition": self.partition, "state": self.state,
            "name": self.name, "sort": self.sort, "order": "desc" if self.descending else "asc",
            "page": str(self.page),
        }  # fmt: skip
        values.update({k: str(v) for k, v in changes.items()})
        defaults = {"state": "active", "sort": "default", "order": "asc", "page": "1"}
        return urlencode({k: v for k, v in values.items() if v and defaults.get(k) != v})


def _state(value: str) -> str:
    text = value.strip().upper()
    if text.lower() in ("", "active"):
        return "active"
    if text.lower() in ("history", "all"):
        return text.lower()
    if text in STATE_CODES:
        return text
    if text in _BY_CODE:
        return _BY_CODE[text]
    raise FilterError(f"state: unknown job state {value[:32]!r}")


def parse_filter(args: Mapping[str, str]) -> JobFilter:
    """A :class:`JobFilter` from query parameters (see the module docstring)."""
    sort = args.get("sort", "default").strip() or "default"
    if sort not in SORT_KEYS:
        raise FilterError(f"sort: one of {', '.join(SORT_KEYS)} (got {sort[:32]!r})")
    order = args.get("order", "asc").strip() or "asc"
    if order not in ("asc", "desc"):
        raise FilterError(f"order: asc or desc (got {order[:32]!r})")
    page_text = args.get("page", "1").strip() or "1"
    if not page_text.isdigit() or not 1 <= int(page_text) <= 1_000_000:
        raise FilterError(f"page: a page number from 1 (got {page_text[:32]!r})")
    return JobFilter(
        user=args.get("user", "").strip(),
        account=args.get("account", "").strip(),
        partition=args.get("partition", "").strip(),
        state=_state(args.get("state", "active")),
        name=args.get("name", "").strip(),
        sort=sort,
        descending=order == "desc",
        page=int(page_text),
    )


class QueueJob(NamedTuple):
    """What the Jobs page and the Overview read of a job (see the module docstring)."""

    job_id: int
    array_job_id: int
    array_task_id: int | None
    array_max_running: int
    name: str
    user: str
    uid: int
    account: str
    partition: str
    state: str
    reason: str
    priority: int
    submit_time: float
    start_time: float
    end_time: float
    origin: Job | pb.JobInfo

    @classmethod
    def from_job(cls, job: Job) -> QueueJob:
        """From a :class:`spur.core.job.Job` (spurctld's applied state). ``state._value_``: the enum's
        ``value`` property costs ten times the plain attribute, per job, on every page load."""
        spec = job.spec
        return cls(job.job_id, job.array_job_id, job.array_task_id, job.array_max_running, spec.name, job.user,
                   job.uid, spec.account, job.partition, job.state._value_, job.reason, job.priority,
                   job.submit_time, job.start_time, job.end_time, job)  # fmt: skip

    @classmethod
    def from_info(cls, info: pb.JobInfo) -> QueueJob:
        """From a ``JobInfo`` message (``array_task_id`` is optional there: presence matters)."""
        spec = info.spec
        task = info.array_task_id if info.HasField("array_task_id") else None
        return cls(info.job_id, info.array_job_id, task, info.array_max_running, spec.name, info.user, info.uid,
                   spec.account, info.partition, info.state, info.reason, info.priority, info.submit_time,
                   info.start_time, info.end_time, info)  # fmt: skip

    @property
    def nodelist(self) -> str:
        """The allocated nodes as a host list (``n[1-3]``); empty before an allocation."""
        origin = self.origin
        if isinstance(origin, pb.JobInfo):
            return origin.nodelist
        if not origin.allocation:
            return ""
        from spur.core.hostlist import compress

        return compress(origin.nodes)


@dataclass(frozen=True)
class Row:
    """One line of the jobs table: a job, or the pending tasks of an array folded into one."""

    job: QueueJob
    group: ArrayGroup | None

    @property
    def id_text(self) -> str:
        job = self.job
        if self.group is not None:
            return f"{job.array_job_id}_[{array_task_text(self.group)}]"
        if job.array_job_id and job.array_task_id is not None:
            return f"{job.array_job_id}_{job.array_task_id}"
        return str(job.job_id)

    @property
    def state_code(self) -> str:
        return STATE_CODES.get(self.job.state, self.job.state)


def _keep(f: JobFilter, job: QueueJob) -> bool:
    if f.state == "active":
        if job.state not in ACTIVE:
            return False
    elif f.state == "history":
        if job.state in ACTIVE:
            return False
    elif f.state != "all" and job.state != f.state:
        return False
    if f.user and job.user != f.user and str(job.uid) != f.user:
        return False
    if f.account and job.account != f.account:
        return False
    if f.partition and job.partition != f.partition:
        return False
    return not (f.name and f.name not in job.name)


def _key(sort: str, row: Row) -> tuple[Any, ...]:
    j = row.job
    if sort == "default":
        return (j.partition, _STATE_ORDER.get(j.state, 99), -j.priority, j.job_id)
    value: Any = {
        "id": j.job_id, "user": j.user, "account": j.account, "partition": j.partition, "state": j.state,
        "name": j.name, "submit": j.submit_time, "priority": j.priority,
    }[sort]  # fmt: skip
    return (value, j.job_id)


def select_rows(jobs: Iterable[QueueJob], f: JobFilter) -> list[Row]:
    """The rows for ``f`` (see the module docstring)."""
    rows: list[Row] = []
    groups: dict[tuple[int, str], list[QueueJob]] = {}
    for job in jobs:
        if not _keep(f, job):
            continue
        if job.state == "PENDING" and job.array_task_id is not None and job.array_job_id:
            groups.setdefault((job.array_job_id, job.reason), []).append(job)
        else:
            rows.append(Row(job, None))
    for members in groups.values():
        if len(members) == 1:
            rows.append(Row(members[0], None))
            continue
        members.sort(key=_task_of)
        rows.append(Row(members[0], ArrayGroup(members[0], tuple(m.array_task_id for m in members))))
    rows.sort(key=lambda r: _key(f.sort, r), reverse=f.descending)
    return rows


def _task_of(job: QueueJob) -> int:
    return job.array_task_id or 0


def page_of(rows: list[Row], page: int, size: int = PAGE_SIZE) -> tuple[list[Row], int]:
    """The rows of page ``page`` (1-based, clamped to the last page) and the number of pages."""
    pages = max(1, -(-len(rows) // size))
    page = min(max(1, page), pages)
    return rows[(page - 1) * size : page * size], pages
