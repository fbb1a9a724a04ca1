"""Slurm output/error/input filename patterns (``-o slurm-%j.out``) and the default names (Slurm's)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["expand_output_pattern", "default_output_name", "DEFAULT_OUTPUT", "DEFAULT_ARRAY_OUTPUT"]

DEFAULT_OUTPUT = "slurm-%j.out"
DEFAULT_ARRAY_OUTPUT = "slurm-%A_%a.out"

# Slurm's value for "no array task" (NO_VAL), which %a prints for a job that is not an array task.
_NO_VAL = 0xFFFFFFFE
_MAX_WIDTH = 10


def expand_output_pattern(
    pattern: str,
    *,
    job_id: int,
    job_name: str,
    user: str,
    node: str,
    array_job_id: int | None = None,
    array_task_id: int | None = None,
    step_id: str = "batch",
    task_id: int = 0,
    node_id: int = 0,
) -> str:
    """Expand Slurm filename replacement symbols, as slurmstepd does.

    ``%%`` percent, ``%A`` array master job id (the job id for a non-array job), ``%a`` array task
    id, ``%b`` array task id modulo 10, ``%j`` job id, ``%J`` ``jobid.stepid``, ``%N`` node name,
    ``%n`` node index in the job, ``%s`` step id, ``%t`` task rank, ``%u`` user, ``%x`` job name.
    A number after ``%`` zero-pads numeric fields (at most 10 wide; ignored for names).
    Unknown symbols are kept as written. A pattern containing ``\\`` is not expanded at all; the
    backslashes are removed. Relative results stay relative (the caller joins the work dir).
    """
    if "\\" in pattern:
        return pattern.replace("\\", "")
    task = _NO_VAL if array_task_id is None else array_task_id
    master = job_id if array_task_id is None or array_job_id is None else array_job_id
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        start = i
        i += 1
        if i < n and pattern[i] == "%":
            out.append("%")
            i += 1
            continue
        j = i
        while j < n and pattern[j].isdigit():
            j += 1
        digits = pattern[i:j]
        width = 0 if not digits else _MAX_WIDTH if len(digits) > 2 else min(int(digits), _MAX_WIDTH)
        if j >= n:
            out.append(pattern[start:])
            break
        sym = pattern[j]
        i = j + 1
        num = _padder(width)
        if sym == "a":
            out.append(num(task))
        elif sym == "A":
            out.append(num(master))
        elif sym == "b":
            out.append(num(task % 10))
        elif sym == "j":
            out.append(num(job_id))
        elif sym == "J":
            out.append(f"{num(job_id)}.{step_id}")
        elif sym == "s":
            out.append(num(int(step_id)) if step_id.isdigit() else step_id)
        elif sym == "n":
            out.append(num(node_id))
        elif sym == "N":
            out.append(node)
        elif sym == "t":
            out.append(num(task_id))
        elif sym == "u":
            out.append(user)
        elif sym == "x":
            out.append(job_name)
        else:
            out.append(pattern[start:i])
    return "".join(out)


def _padder(width: int) -> Callable[[int], str]:
    return lambda v: f"{v:0{width}d}"


def default_output_name(
    job_id: int, array_job_id: int | None = None, array_task_id: int | None = None
) -> str:
    """The default stdout file name, Slurm's: ``slurm-<jobid>.out``, or ``slurm-<arrayjob>_<task>.out``."""
    if array_task_id is not None:
        return f"slurm-{array_job_id if array_job_id is not None else job_id}_{array_task_id}.out"
    return f"slurm-{job_id}.out"
