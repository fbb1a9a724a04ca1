"""Checks on a submitted JobSpec that do not depend on cluster state (pure)."""

from __future__ import annotations

from spur.core.job import UNLIMITED, JobSpec


def validate_spec(spec: JobSpec) -> str | None:
    """Return one message naming what is wrong with ``spec``, or None when it is acceptable."""
    if spec.num_nodes < 1:
        return f"invalid node count {spec.num_nodes}: at least one node is required"
    if spec.num_tasks < 0 or spec.cpus_per_task < 1:
        return "invalid task/cpu count: --ntasks and --cpus-per-task must be positive"
    if spec.num_tasks and spec.num_tasks < spec.num_nodes:
        return f"invalid task count {spec.num_tasks}: fewer tasks than nodes ({spec.num_nodes})"
    if spec.time_limit_secs < 0 and spec.time_limit_secs != UNLIMITED:
        return f"invalid time limit {spec.time_limit_secs}"
    if spec.interactive:
        if not spec.argv and not spec.allocation_only:
            return "no command given to run"
    elif not spec.script:
        return "batch job has no script"
    elif not spec.script.startswith("#!"):
        return (
            "This does not look like a batch script.  The first line must start with #! "
            "followed by the path to an interpreter."
        )
    if "\0" in spec.script:
        return "batch script contains NUL characters"
    if not spec.work_dir.startswith("/"):
        return f"working directory must be an absolute path, not {spec.work_dir!r}"
    if spec.gres:
        from spur.core.resources import ResourceError, parse_gres

        try:
            parse_gres(list(spec.gres))
        except ResourceError as exc:
            return f"Invalid generic resource (gres) specification: {exc}"
    return None
