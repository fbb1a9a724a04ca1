"""How squeue shows a job array's pending tasks: folded into one row, ``<array_job_id>_[<ranges>[%<limit>]]``.

Pure, and shared by the commands (squeue, scontrol, sacct, scancel through :mod:`spur.cli.jobfields`)
and the dashboard's Jobs page (:mod:`spur.ui.queue`). A job here is a ``spur_pb2.JobInfo`` or anything
with the same attributes (spur.rpc.lite's records). Nothing from ``typing`` is imported at run time
(a start-up cost of every command).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol, TypeVar

    class ArrayMember(Protocol):
        """What :func:`group_array_tasks` reads of a job (a JobInfo, protobuf's or spur.rpc.lite's)."""

        @property
        def state(self) -> str: ...
        @property
        def reason(self) -> str: ...
        @property
        def array_job_id(self) -> int: ...
        @property
        def array_task_id(self) -> int: ...

    J = TypeVar("J", bound=ArrayMember)

__all__ = ["ArrayGroup", "array_task_text", "format_ranges", "group_array_tasks", "has_task"]


class ArrayGroup(namedtuple("ArrayGroup", "job task_ids")):
    """Pending tasks of one array shown as a single squeue line: ``job`` is the lowest task,
    ``task_ids`` a tuple of ints. (collections.namedtuple: importing typing is a start-up cost.)"""

    __slots__ = ()


def has_task(job: Any) -> bool:
    """True for an array task (JobInfo.array_task_id is an optional field)."""
    try:
        return bool(job.HasField("array_task_id"))
    except (AttributeError, ValueError):
        return getattr(job, "array_task_id", None) is not None


def format_ranges(ids: Iterable[int]) -> str:
    """``[1,2,3,5]`` -> ``1-3,5`` (Slurm's bitmap range form)."""
    nums = sorted(set(ids))
    out: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(out)


def array_task_text(group: ArrayGroup) -> str:
    """``3-5%2``: the group's task ranges with the array's %limit when set."""
    text = format_ranges(group.task_ids)
    limit = group.job.array_max_running
    return f"{text}%{limit}" if limit else text


def group_array_tasks(jobs: Iterable[J], *, expand: bool) -> list[tuple[J, ArrayGroup | None]]:
    """squeue's rows: pending tasks of one array with the same reason fold into one row unless ``expand``.

    Returns ``(job, group)`` pairs; ``group`` is ``None`` for a row showing one job or task.
    """
    rows: list[tuple[J, ArrayGroup | None]] = []
    groups: dict[tuple[int, str, str], list[J]] = {}
    for job in jobs:
        if not expand and job.state == "PENDING" and has_task(job) and job.array_job_id:
            groups.setdefault((job.array_job_id, job.state, job.reason), []).append(job)
        else:
            rows.append((job, None))
    for members in groups.values():
        members.sort(key=lambda j: j.array_task_id)
        if len(members) == 1:
            rows.append((members[0], None))
            continue
        head = members[0]
        rows.append((head, ArrayGroup(head, tuple(m.array_task_id for m in members))))
    return rows
