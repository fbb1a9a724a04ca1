"""One-line descriptions of the sbatch/srun/salloc options, keyed by the long names of the option
table that drives their parser (:data:`spur.core.job_options._OPTIONS`).

:func:`job_option_docs` walks that table, so an option added to the parser appears in --help, the man
pages and completion; a test fails when it has no description here.
"""

from __future__ import annotations

from spur.cli.cmdinfo import OptionDoc

PARALLEL = "Parallel run options"
RESOURCES = "Constraint options"
OUTPUT = "Input and output options"
CONTROL = "Job control options"
MISC = "Other options"

# long name (or "name@command" for a command-specific meaning) -> (group, metavar, help)
JOB_OPTION_HELP: dict[str, tuple[str, str, str]] = {
    "job-name": (PARALLEL, "NAME", "name of the job"),
    "account": (PARALLEL, "NAME", "charge the job to the specified account"),
    "partition": (PARALLEL, "PARTITION", "partition requested"),
    "qos": (PARALLEL, "QOS", "quality of service"),
    "nodes": (PARALLEL, "N", "number of nodes on which to run (N = min[-max])"),
    "ntasks": (PARALLEL, "N", "number of tasks to run"),
    "cpus-per-task": (PARALLEL, "NCPUS", "number of CPUs required per task"),
    "ntasks-per-node": (PARALLEL, "N", "number of tasks to invoke on each node"),
    "tasks-per-node": (PARALLEL, "N", "same as --ntasks-per-node"),
    "ntasks-per-gpu": (PARALLEL, "N", "number of tasks to invoke for each GPU"),
    "mem": (RESOURCES, "MB", "minimum amount of real memory per node (K/M/G/T suffix; default MB)"),
    "mem-per-cpu": (RESOURCES, "MB", "maximum amount of real memory per allocated CPU"),
    "time": (PARALLEL, "MINUTES", "time limit (MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]], UNLIMITED)"),
    "begin": (PARALLEL, "TIME", "defer the job until TIME (now+1hour, 16:00, 2026-12-24T08:00)"),
    "output": (OUTPUT, "OUT", "file for the job's standard output (%j job id, %x name, %N node)"),
    "error": (OUTPUT, "ERR", "file for the job's standard error"),
    "input": (OUTPUT, "IN", "file for the job's standard input"),
    "chdir": (PARALLEL, "DIRECTORY", "working directory of the job"),
    "export": (OUTPUT, "NAMES", "environment variables passed to the job (ALL, NONE, VAR=value,...)"),
    "array": (PARALLEL, "INDEXES", "job array index values (0-19%4, 1,3,5, 0-15:4)"),
    "dependency": (PARALLEL, "TYPE:JOBID", "defer the job until a condition on another job is met"),
    "gres": (RESOURCES, "LIST", "required generic resources per node, e.g. gpu:2"),
    "gpus": (RESOURCES, "N", "number of GPUs required for the job"),
    "gpus-per-node": (RESOURCES, "N", "number of GPUs required per allocated node"),
    "gpus-per-task": (RESOURCES, "N", "number of GPUs required per spawned task"),
    "nodelist": (RESOURCES, "HOSTS", "request the specified list of hosts"),
    "exclude": (RESOURCES, "HOSTS", "exclude the specified list of hosts"),
    "constraint": (RESOURCES, "LIST", "specify a list of node features the job needs"),
    "exclusive": (RESOURCES, "user", "allocate nodes in exclusive mode"),
    "hold": (CONTROL, "", "submit the job in a held state"),
    "requeue": (CONTROL, "", "allow the job to be requeued"),
    "no-requeue": (CONTROL, "", "do not requeue the job after a node failure"),
    "signal": (CONTROL, "[R:]NUM[@TIME]", "send a signal when the time limit is within TIME seconds"),
    "wrap": (PARALLEL, "COMMAND", "wrap a command string in a sh script and submit it"),
    "parsable": (OUTPUT, "", "print only the job id (and cluster name) on submission"),
    "test-only": (CONTROL, "", "validate the request and estimate when it would start; submit nothing"),
    "wait": (CONTROL, "", "wait for the job to end and exit with its exit code"),
    "wait@srun": (CONTROL, "SEC", "seconds to wait after the first task exits before killing the rest"),
    "comment": (MISC, "NAME", "arbitrary comment"),
    "wckey": (MISC, "WCKEY", "workload characterization key"),
    "nice": (CONTROL, "VALUE", "decrease the scheduling priority by VALUE"),
    "quiet": (OUTPUT, "", "quiet mode (suppress informational messages)"),
    "verbose": (OUTPUT, "", "verbose mode (multiple -v's increase verbosity)"),
    "mail-type": (MISC, "TYPE", "notify on state change: BEGIN, END, FAIL or ALL"),
    "mail-user": (MISC, "USER", "who to send email notification for job state changes"),
    "open-mode": (OUTPUT, "MODE", "open the output and error files with append or truncate"),
    "kill-on-invalid-dep": (CONTROL, "yes|no", "kill the job if its dependency can never be satisfied"),
    "oversubscribe": (RESOURCES, "", "oversubscribe resources with other jobs"),
    "unbuffered": (OUTPUT, "", "do not line-buffer the tasks' output"),
    "label": (OUTPUT, "", "prepend the task number to lines of output"),
    "pty": (OUTPUT, "", "run task zero in pseudo terminal"),
    "mpi": (PARALLEL, "TYPE", "type of MPI being used"),
    "kill-on-bad-exit": (PARALLEL, "[0|1]", "kill the step if any task exits with a non-zero code"),
    "cpu-bind": (RESOURCES, "TYPE", "bind tasks to CPUs"),
    "overlap": (RESOURCES, "", "let the step share resources with other steps"),
    "jobid": (PARALLEL, "ID", "run the step inside this existing job allocation"),
    "uid": (MISC, "USER", "user ID to run the job as (root only; others are refused)"),
    "gid": (MISC, "GROUP", "group ID to run the job as (root only; others are refused)"),
    "help": ("Help", "", "show this help message"),
    "usage": ("Help", "", "display a brief summary of the command's options"),
    "version": ("Help", "", "print the Slurm version this command is compatible with, and Spur's"),
}


def job_option_docs(command: str) -> list[OptionDoc]:
    """The options ``command`` (sbatch, srun or salloc) accepts, in the parser table's order."""
    from spur.core.job_options import _OPTIONS

    out: list[OptionDoc] = []
    for opt in _OPTIONS:
        if command not in opt.commands:
            continue
        group, metavar, text = JOB_OPTION_HELP.get(f"{opt.long}@{command}") or JOB_OPTION_HELP[opt.long]
        out.append(
            OptionDoc(
                long=opt.long,
                short=opt.short,
                arg=opt.arg,
                metavar=metavar if opt.arg != "none" else "",
                help=text,
                group=group,
            )
        )
    order = [PARALLEL, RESOURCES, CONTROL, OUTPUT, MISC, "Help"]
    return sorted(out, key=lambda o: order.index(o.group))
