"""The intended differences from Slurm 22.05: case id pattern (fnmatch) -> the reason.

Every entry is a case (or a family of cases) that is run and is expected to DIFFER; a listed case that
matches Slurm fails the suite, so that a fixed difference leaves this list. ``docs/slurm-compat.md``
is generated from it (``python -m integration.conformance.compat_doc``).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

_LOGIN_ENV = (
    "Slurm's sbatch asks slurmd to load the user's login environment (`su - user`) for `--export` other "
    "than ALL and marks it with SLURM_GET_USER_ENV=1; Spur builds the environment from what sbatch sent and "
    "does not run a login shell on the node."
)
_TASK_IDS = (
    "Spur allocates array task job ids at submit, in task order; Slurm gives tasks fresh ids as they start "
    "and the last task keeps the array's own id, so a task's SLURM_JOB_ID differs (the array id agrees)."
)

ALLOWED: dict[str, str] = {
    "env/*/SLURM_WORKING_CLUSTER": (
        "Slurm's `cluster:controller-host:port:protocol-version:plugin-id` tells its own commands inside a job how "
        "to reach slurmctld over Slurm's RPC protocol; Spur's commands find the controller through "
        "`SPUR_CONTROLLER`/spur.conf and do not speak that protocol, so the variable is not set."
    ),
    "env/export_[!a]*/SLURM_GET_USER_ENV": _LOGIN_ENV,
    "env/export_all_var/SLURM_GET_USER_ENV": _LOGIN_ENV,
    "env/array_list/SLURM_JOB_ID": _TASK_IDS,
    "env/array_list/SLURM_JOBID": _TASK_IDS,
    "env/env_timelimit/names": "Spur also exports SLURM_JOB_TIME_LIMIT for a job with a time limit (not set by Slurm 22.05).",
    "env/time5/names": "Spur also exports SLURM_JOB_TIME_LIMIT for a job with a time limit (not set by Slurm 22.05).",
}


def reason_for(case_id: str) -> str | None:
    """The allow-list reason covering ``case_id``, or None."""
    for pattern, reason in ALLOWED.items():
        if fnmatchcase(case_id, pattern):
            return reason
    return None
