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

_ROW_IDS = (
    "Slurm's accounting database numbers its rows (associations, QOS, job records) and sacct/squeue show "
    "those numbers; Spur's accounting keys associations and QOS by name and has no row numbers to show."
)
_WHOLE_NODE_MEMORY = (
    "Slurm 22.05 records a job that asks no memory as asking its node's whole memory (ReqMem=900M, "
    "mem=900M in ReqTRES); Spur records memory only where it was asked for."
)
_TOPOLOGY = (
    "Slurm takes the node's layout from slurm.conf (CPUs=4: 4 sockets of 1 core); Spur's agent reports the "
    "machine's own sockets and cores beside the CPU count it was given."
)
_NODE_HOST = (
    "Slurm's NodeHostName is the machine the node name maps to in slurm.conf; a Spur node is its agent, whose "
    "host name is the node name."
)
_NODE_METRICS = (
    "Spur's agent does not report the machine's load average or free memory, nor a last-busy time, and has "
    "no power or external-sensor plugins: Slurm's values for those come from the machine itself."
)
_ALLOC_NODE = (
    "Slurm records the submitting host as slurmctld resolved it; Spur records the submit host's own name "
    "(both record the submitting shell's session id)."
)
_PRIORITY_BASIC = (
    "Slurm's priority/basic gives each job a priority counting down from the first job of the controller's "
    "life; Spur's multifactor priority counts down by job id, and Spur's ids started with an id-spending "
    "array (the two start from different counts)."
)


ALLOWED: dict[str, str] = {
    "env/*/SLURM_WORKING_CLUSTER": (
        "Slurm's `cluster:controller-host:port:protocol-version:plugin-id` tells its own commands inside a job how "
        "to reach slurmctld over Slurm's RPC protocol; Spur's commands find the controller through "
        "`SPUR_CONTROLLER`/spur.conf and do not speak that protocol, so the variable is not set."
    ),
    "env/export_[!a]*/SLURM_GET_USER_ENV": _LOGIN_ENV,
    "env/export_all_var/SLURM_GET_USER_ENV": _LOGIN_ENV,
    "srun/mpi_pmi2_abort": (
        "After MPI_Abort in a direct-launched step, Spur prints the same srun lines and exit code (137) as "
        "Slurm, but its figure in `Waiting up to N seconds` is always 32 (Slurm: KillWait + 2, here 4), and "
        "it has no slurmstepd to print `*** STEP J.S ON NODE CANCELLED AT TIME ***`."
    ),
    "srun/mpi_pmi2_die_kill_on_bad_exit": (
        "With -K, Spur prints Slurm's srun lines (the failed task, `_step_signal: Terminating`, the "
        "terminated tasks, `Force Terminated`) and exits 143 like it; only slurmstepd's "
        "`*** STEP J.S ON NODE CANCELLED AT TIME ***` line is missing (Spur has no slurmstepd)."
    ),
    "env/array_list/SLURM_JOB_ID": _TASK_IDS,
    "env/array_list/SLURM_JOBID": _TASK_IDS,
    # ---- squeue / sinfo / scontrol field tables
    "commands/rows/scontrol_oneliner_job": (
        "The one-line record holds the same keys in the same order; it differs only in AllocNode:Sid and in "
        "the pending job's whole-node default memory in TRES, as the multi-line record does (see "
        "scontrol/show_job_*/AllocNode:Sid and scontrol/show_job_pending/TRES)."
    ),
    "squeue/O/AllocNodes": _ALLOC_NODE,
    "scontrol/show_job_*/AllocNode:Sid": _ALLOC_NODE,
    "squeue/O/AssocID": _ROW_IDS,
    "sacct/o/AssocID": _ROW_IDS,
    "sacct/o/DBIndex": _ROW_IDS,
    "sacct/o/QOSRAW": _ROW_IDS,
    "sacct/o/Priority": _PRIORITY_BASIC,
    "sacct/o/ReqMem": _WHOLE_NODE_MEMORY,
    "sacct/o/ReqTRES": _WHOLE_NODE_MEMORY,
    "sacct/layout/long": _WHOLE_NODE_MEMORY,
    "sacct/o/Flags": (
        "Slurm's job record flags say how the job was scheduled (SchedMain, SchedBackfill, SchedSubmit) and "
        "that its start was recorded; Spur's records do not carry these flags."
    ),
    "scontrol/show_config/AccountingStorageType": (
        "Spur's controller keeps the job history and associations itself (PostgreSQL only when "
        "[accounting] database_url is set) and says accounting_storage/none without a database; the "
        "reference Slurm stores them through slurmdbd."
    ),
    "scontrol/show_job_running/Priority": _PRIORITY_BASIC,
    "scontrol/show_job_completed/Priority": _PRIORITY_BASIC,
    "scontrol/show_config/PriorityType": (
        "Spur's priority is always multifactor (with zero weights it orders by submission like priority/basic)."
    ),
    "squeue/O/Cluster": "squeue learns no cluster name from Spur's job records (not added yet: one more RPC per call).",
    "squeue/O/PendingTime": (
        "Slurm counts a held job's pending time from a scheduler pass, Spur from submission; the two differ by "
        "when each controller last looked at the job."
    ),
    "squeue/O/tres-alloc": (
        "Slurm 22.05 counts a pending job's whole-node default memory in its TRES (mem=900M) and drops it once "
        "running; Spur counts memory only where it was asked for."
    ),
    "scontrol/show_job_pending/TRES": (
        "Slurm 22.05 counts a pending job's whole-node default memory in its TRES (mem=900M) and drops it once "
        "running; Spur counts memory only where it was asked for."
    ),
    "errors/first_line/sinfo_bad_format": "Spur's sinfo has no -O (long field names); -o covers every field.",
    "sinfo/layout/long_O": "Spur's sinfo has no -O (long field names); -o covers every field.",
    "sinfo/layout/node_O": "Spur's sinfo has no -O (long field names); -o covers every field.",
    "squeue/layout/steps": "Spur's squeue has no -s (steps); `spur steps`/`sacct` list steps.",
    "squeue/layout/start": "Spur's squeue has no --start; `sbatch --test-only` estimates a start.",
    "squeue/layout/width": (
        "Slurm 22.05's squeue and sinfo refuse a '-' (left-justify) in -o (arguably a bug, and it then prints the "
        "field verbatim); Spur left-justifies as the man page describes."
    ),
    "sinfo/layout/width": (
        "Slurm 22.05's squeue and sinfo refuse a '-' (left-justify) in -o (arguably a bug, and it then prints the "
        "field verbatim); Spur left-justifies as the man page describes."
    ),
    "sinfo/o/%[XYz]": _TOPOLOGY,
    "sinfo/layout/node_long_body": _TOPOLOGY,
    "scontrol/show_node/CoresPerSocket": _TOPOLOGY,
    "scontrol/show_node/Sockets": _TOPOLOGY,
    "sinfo/o/%n": _NODE_HOST,
    "scontrol/show_node/NodeHostName": _NODE_HOST,
    "sinfo/o/%[eO]": _NODE_METRICS,
    "scontrol/show_node/CPULoad": _NODE_METRICS,
    "scontrol/show_node/FreeMem": _NODE_METRICS,
    "scontrol/show_node/LastBusyTime": _NODE_METRICS,
    "scontrol/show_node/*Watts": _NODE_METRICS,
    "scontrol/show_node/ExtSensors*": _NODE_METRICS,
    "sinfo/o/%v": "The version is Spur's own, not Slurm's 22.05.8.",
    "scontrol/show_node/Version": "The version is Spur's own, not Slurm's 22.05.8.",
    "scontrol/misc/version_words": "Debian's Slurm calls itself slurm-wlm; Spur's `scontrol --version` says slurm (and its version).",
    "scontrol/misc/ping": "Spur's controllers are a Raft group: `scontrol ping` names the leader and its Raft term and index.",
    # ---- first error lines and exit codes
    "errors/first_line/squeue_unknown_user": (
        "Slurm checks -u names against the password database and says `Invalid user`; Spur passes the name to the "
        "controller, which has no jobs of it (empty output)."
    ),
    "errors/first_line/sinfo_unknown_partition": (
        "Slurm's sinfo prints an empty table for an unknown partition (exit 0); Spur says the partition is not found."
    ),
    "errors/first_line/scancel_finished": (
        "Slurm's scancel is silent about a job that already finished; Spur says so (`Job/step already completing "
        "or completed`, exit 1) so a script knows nothing was cancelled."
    ),
    "errors/first_line/sbatch_bad_begin": (
        "Slurm's sbatch first prints its time parser's `Invalid time specification (pos=N)` line; Spur prints "
        "Slurm's second line only (`Invalid --begin specification`)."
    ),
    "env/env_timelimit/names": "Spur also exports SLURM_JOB_TIME_LIMIT for a job with a time limit (not set by Slurm 22.05).",
    "env/time5/names": "Spur also exports SLURM_JOB_TIME_LIMIT for a job with a time limit (not set by Slurm 22.05).",
}


def reason_for(case_id: str) -> str | None:
    """The allow-list reason covering ``case_id``, or None."""
    for pattern, reason in ALLOWED.items():
        if fnmatchcase(case_id, pattern):
            return reason
    return None
