"""The conformance cases, as tables (pure data).

Two kinds:

- :data:`ENV_OPTION_SETS` x :data:`ENV_VARIABLES`: one batch job per option set prints its environment;
  each (option set, variable) pair is a case comparing that variable (value, or absent). Plus one case
  per option set comparing the set of ``SLURM_*`` names. Ids: ``env/<set>/<VAR>``, ``env/<set>/names``.
- :data:`SNIPPETS`: a shell snippet per case, run the same way against both systems; exit status,
  stdout and stderr are compared after normalization. Ids: ``<command>/<name>``.

Snippets may use ``$PART`` (the system's partition), ``wj ID`` (wait until the job left the queue)
and ``sub OPTS...`` (``sbatch --parsable``, wait, print the id); see
:data:`integration.conformance.systems.PRELUDE`.
"""

from __future__ import annotations

from dataclasses import dataclass

# The job script of the environment cases: every SLURM_* variable, and the two export probes.
ENV_SCRIPT = """#!/bin/bash
env | grep -E '^(SLURM|FOO=|BAR=)' | LC_ALL=C sort
"""

# name -> (input environment assignments, sbatch options, which array task's output to read or "").
ENV_OPTION_SETS: dict[str, tuple[str, str, str]] = {
    "plain": ("", "", ""),
    "ntasks2": ("", "-n 2", ""),
    "nodes1": ("", "-N 1", ""),
    "ntasks_per_node2": ("", "--ntasks-per-node=2", ""),
    "cpus1": ("", "-c 1", ""),
    "cpus2_ntasks2": ("", "-c 2 -n 2", ""),
    "mem100": ("", "--mem=100", ""),
    "mem_per_cpu100": ("", "--mem-per-cpu=100", ""),
    "mem_per_cpu_cpus2": ("", "--mem-per-cpu=50 -c 2", ""),
    "job_name": ("", "-J my_name", ""),
    "partition": ("", '-p "$PART"', ""),
    "array": ("", "--array=1-3", "2"),
    "array_step_limit": ("", "--array=0-6:2%2", "4"),
    "array_list": ("", "--array=1,5,9", "9"),
    "dependency": ("", '-d afterany:"$(sub -o /dev/null --wrap true)"', ""),
    "export_all": ("FOO=f BAR=b", "--export=ALL", ""),
    "export_none": ("FOO=f BAR=b", "--export=NONE", ""),
    "export_var": ("FOO=f BAR=b", "--export=FOO=x", ""),
    "export_all_var": ("FOO=f BAR=b", "--export=ALL,FOO=x", ""),
    "export_names": ("FOO=f BAR=b", "--export=FOO", ""),
    "env_job_name": ("SBATCH_JOB_NAME=from_env", "", ""),
    "env_partition": ('SBATCH_PARTITION="$PART"', "", ""),
    "env_timelimit": ("SBATCH_TIMELIMIT=5", "", ""),
    "env_and_cli": ("SBATCH_JOB_NAME=from_env", "-J from_cli", ""),
    "time5": ("", "-t 5", ""),
    "wrap": ("", "--wrap=WRAP", ""),
}

# The OUTPUT ENVIRONMENT VARIABLES of man sbatch (22.05) a one-node job without GPUs can have, the
# ones slurmd adds to every batch job, and the two export probes.
ENV_VARIABLES: tuple[str, ...] = (
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_CLUSTER_NAME",
    "SLURM_CPUS_ON_NODE",
    "SLURM_CPUS_PER_GPU",
    "SLURM_CPUS_PER_TASK",
    "SLURM_DISTRIBUTION",
    "SLURM_EXPORT_ENV",
    "SLURM_GET_USER_ENV",
    "SLURM_GPUS",
    "SLURM_GPUS_ON_NODE",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_GTIDS",
    "SLURM_JOB_ACCOUNT",
    "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_JOB_DEPENDENCY",
    "SLURM_JOB_GID",
    "SLURM_JOB_GPUS",
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_QOS",
    "SLURM_JOB_RESERVATION",
    "SLURM_JOB_UID",
    "SLURM_JOB_USER",
    "SLURM_LOCALID",
    "SLURM_MEM_PER_CPU",
    "SLURM_MEM_PER_GPU",
    "SLURM_MEM_PER_NODE",
    "SLURM_NNODES",
    "SLURM_NODEID",
    "SLURM_NODELIST",
    "SLURM_NODE_ALIASES",
    "SLURM_NPROCS",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_PRIO_PROCESS",
    "SLURM_PROCID",
    "SLURM_RESTART_COUNT",
    "SLURM_SUBMIT_DIR",
    "SLURM_SUBMIT_HOST",
    "SLURM_TASK_PID",
    "SLURM_TASKS_PER_NODE",
    "SLURM_TOPOLOGY_ADDR",
    "SLURM_TOPOLOGY_ADDR_PATTERN",
    "SLURMD_NODENAME",
    "FOO",
    "BAR",
)


def env_snippet(option_set: str) -> str:
    """The snippet that runs option set ``option_set``'s job and prints its environment."""
    assignments, options, task = ENV_OPTION_SETS[option_set]
    out = "out-%a" if task else "out"
    read = f"out-{task}" if task else "out"
    job = '--wrap "$(tail -n +2 job.sh)"' if "--wrap" in options else "job.sh"
    options = options.replace("--wrap=WRAP", "")
    return (
        f"cat > job.sh <<'EOF'\n{ENV_SCRIPT}EOF\n"
        f"{assignments} sub -o {out} {options} {job} >/dev/null && cat {read}\n"
    )


@dataclass(frozen=True)
class Snippet:
    command: str
    name: str
    script: str

    @property
    def id(self) -> str:
        return f"{self.command}/{self.name}"


_ARGS = "printf '#!/bin/bash\\necho \"$#|$1|$2|$3\"\\n' > a.sh\n"
_SIG = (
    "cat > t.sh <<'EOF'\n#!/bin/bash\ntrap 'echo shell got USR1' USR1\n"
    "srun bash -c 'trap \"echo step got USR1; exit 0\" USR1; touch started; sleep 5 & wait' &\n"
    "wait; wait\necho end\nEOF\n"
    "id=$(sbatch --parsable -o out t.sh)\n"
    "for i in $(seq 200); do [ -e started ] && break; sleep 0.1; done\n"
)

# MPICH's ring (integration/mpi/ring.c), built in the case's directory, for the direct-launch cases.
_RING = (
    f"mpicc.mpich -o ring {__import__('pathlib').Path(__file__).parents[1] / 'mpi' / 'ring.c'} || exit 9\n"
)

# Open MPI's ring, for the mpirun cases (Open MPI refuses root without these two variables).
_RING_OMPI = (
    "mpicc.openmpi -o ring "
    f"{__import__('pathlib').Path(__file__).parents[1] / 'mpi' / 'ring.c'} || exit 9\n"
    "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n"
)

SNIPPETS: tuple[Snippet, ...] = (
    # ---- script arguments
    Snippet("sbatch", "args_two", _ARGS + 'sub -o out a.sh a1 "b 2" >/dev/null && cat out'),
    Snippet("sbatch", "args_none", _ARGS + "sub -o out a.sh >/dev/null && cat out"),
    Snippet("sbatch", "args_empty", _ARGS + 'sub -o out a.sh "" x >/dev/null && cat out'),
    Snippet("sbatch", "args_after_options", _ARGS + "sub -o out -J n a.sh -J x >/dev/null && cat out"),
    Snippet(
        "sbatch",
        "args_stdin",
        "sub -o out - a b <<'EOF' >/dev/null && cat out\n#!/bin/bash\necho \"$#|$1\"\nEOF",
    ),
    # ---- default and patterned output names
    Snippet("sbatch", "default_output", "id=$(sub --wrap 'echo hi'); ls slurm-*; cat slurm-$id.out"),
    Snippet(
        "sbatch",
        "default_array_output",
        "id=$(sub --array=0-1 --wrap 'echo t$SLURM_ARRAY_TASK_ID'); ls slurm-*; cat slurm-${id}_1.out",
    ),
    Snippet("sbatch", "pattern_x_j", "id=$(sub -J nm -o '%x-%j.log' --wrap 'echo x'); ls *.log"),
    Snippet("sbatch", "pattern_A_a", "sub -o 'o-%A-%a.txt' --array=3 --wrap 'echo x' >/dev/null; ls o-*"),
    Snippet("sbatch", "pattern_percent", "sub -o 'p%%-%j' --wrap 'echo x' >/dev/null; ls p%*"),
    Snippet(
        "sbatch", "pattern_padding", "sub -o 'z-%5a-%2x' --array=7 -J ab --wrap 'echo x' >/dev/null; ls z-*"
    ),
    Snippet(
        "sbatch",
        "separate_error",
        "sub -o o.txt -e e.txt --wrap 'echo out; echo err >&2' >/dev/null; cat o.txt e.txt",
    ),
    Snippet(
        "sbatch", "error_only", "id=$(sub -e e.txt --wrap 'echo out; echo err >&2'); cat e.txt slurm-$id.out"
    ),
    Snippet(
        "sbatch", "chdir_output", "mkdir d; sub -D d -o o.txt --wrap pwd >/dev/null; sed 's|.*/||' d/o.txt"
    ),
    Snippet(
        "sbatch",
        "input_file",
        "echo fromfile > in.txt; sub -i in.txt -o o.txt --wrap cat >/dev/null; cat o.txt",
    ),
    # ---- --open-mode
    Snippet(
        "sbatch",
        "open_mode_append",
        "echo old > o.txt; sub -o o.txt --open-mode=append --wrap 'echo new' >/dev/null; cat o.txt",
    ),
    Snippet(
        "sbatch",
        "open_mode_truncate",
        "echo old > o.txt; sub -o o.txt --open-mode=truncate --wrap 'echo new' >/dev/null; cat o.txt",
    ),
    Snippet(
        "sbatch",
        "open_mode_env",
        "echo old > o.txt; SBATCH_OPEN_MODE=append sub -o o.txt --wrap 'echo new' >/dev/null; cat o.txt",
    ),
    Snippet("sbatch", "open_mode_bad", "sbatch --open-mode=sideways --wrap true; echo rc=$?"),
    # ---- --wrap and stdin scripts
    Snippet("sbatch", "wrap_name", "id=$(sub -o o.txt --wrap 'echo $SLURM_JOB_NAME; echo $0'); cat o.txt"),
    Snippet(
        "sbatch", "wrap_shell", "sub -o o.txt --wrap 'echo $BASH_VERSION | cut -c1' >/dev/null; cat o.txt"
    ),
    Snippet(
        "sbatch",
        "stdin_name",
        "sub -o o.txt <<'EOF' >/dev/null; cat o.txt\n#!/bin/bash\necho $SLURM_JOB_NAME\nEOF",
    ),
    Snippet("sbatch", "stdin_empty", "sbatch < /dev/null; echo rc=$?"),
    # ---- #SBATCH parsing
    Snippet(
        "sbatch",
        "directive_name",
        "printf '#!/bin/bash\\n#SBATCH -J fromdir\\necho $SLURM_JOB_NAME\\n' > j.sh; sub -o o j.sh >/dev/null; cat o",
    ),
    Snippet(
        "sbatch",
        "directive_after_command",
        "printf '#!/bin/bash\\necho hi\\n#SBATCH -J late\\necho $SLURM_JOB_NAME\\n' > j.sh; sub -o o j.sh >/dev/null; cat o",
    ),
    Snippet(
        "sbatch",
        "directive_after_blank_and_comment",
        "printf '#!/bin/bash\\n\\n# note\\n#SBATCH -J kept\\necho $SLURM_JOB_NAME\\n' > j.sh; sub -o o j.sh >/dev/null; cat o",
    ),
    Snippet(
        "sbatch",
        "directive_spaced_ignored",
        "printf '#!/bin/bash\\n# SBATCH -J spaced\\necho $SLURM_JOB_NAME\\n' > j.sh; sub -o o j.sh >/dev/null; cat o",
    ),
    Snippet(
        "sbatch",
        "directive_lowercase_ignored",
        "printf '#!/bin/bash\\n#sbatch -J lower\\necho $SLURM_JOB_NAME\\n' > j.sh; sub -o o j.sh >/dev/null; cat o",
    ),
    Snippet(
        "sbatch",
        "directive_quoted",
        'printf \'#!/bin/bash\\n#SBATCH --job-name="a b"\\necho "$SLURM_JOB_NAME"\\n\' > j.sh; sub -o o j.sh >/dev/null; cat o',
    ),
    Snippet(
        "sbatch",
        "directive_trailing_comment",
        "printf '#!/bin/bash\\n#SBATCH -J named # why\\necho \"$SLURM_JOB_NAME\"\\n' > j.sh; sub -o o j.sh >/dev/null; cat o",
    ),
    Snippet(
        "sbatch",
        "directive_two_per_line",
        "printf '#!/bin/bash\\n#SBATCH -J two -n 2\\necho $SLURM_JOB_NAME $SLURM_NTASKS\\n' > j.sh; sub -o o j.sh >/dev/null; cat o",
    ),
    Snippet(
        "sbatch",
        "directive_cli_wins",
        "printf '#!/bin/bash\\n#SBATCH -J dir\\necho $SLURM_JOB_NAME\\n' > j.sh; sub -o o -J cli j.sh >/dev/null; cat o",
    ),
    Snippet(
        "sbatch",
        "directive_env_wins",
        "printf '#!/bin/bash\\n#SBATCH -J dir\\necho $SLURM_JOB_NAME\\n' > j.sh; SBATCH_JOB_NAME=env sub -o o j.sh >/dev/null; cat o",
    ),
    Snippet(
        "sbatch",
        "directive_output",
        "printf '#!/bin/bash\\n#SBATCH -o dir-%%j.txt\\necho x\\n' > j.sh; sub j.sh >/dev/null; ls dir-*",
    ),
    Snippet(
        "sbatch",
        "directive_bad_option",
        "printf '#!/bin/bash\\n#SBATCH --no-such-option\\necho x\\n' > j.sh; sbatch j.sh; echo rc=$?",
    ),
    Snippet("sbatch", "no_shebang", "printf 'echo x\\n' > j.sh; sbatch j.sh; echo rc=$?"),
    # ---- input environment
    Snippet(
        "sbatch",
        "env_job_name",
        "SBATCH_JOB_NAME=envjob sub -o o --wrap 'echo $SLURM_JOB_NAME' >/dev/null; cat o",
    ),
    Snippet("sbatch", "env_partition_bad", "SBATCH_PARTITION=nosuchpart sbatch --wrap true; echo rc=$?"),
    Snippet("sbatch", "env_timelimit_bad", "SBATCH_TIMELIMIT=bogus sbatch --wrap true; echo rc=$?"),
    Snippet(
        "sbatch",
        "env_export_none",
        "FOO=1 SBATCH_EXPORT=NONE sub -o o --wrap 'echo FOO=$FOO' >/dev/null; cat o",
    ),
    # ---- output and errors of sbatch itself
    Snippet("sbatch", "submitted_line", "sbatch -o /dev/null --wrap true | sed 's/[0-9][0-9]*/N/'"),
    Snippet("sbatch", "parsable", "sbatch --parsable -o /dev/null --wrap true | sed 's/[0-9][0-9]*/N/'"),
    Snippet("sbatch", "quiet", "sbatch -Q -o /dev/null --wrap true; echo rc=$?"),
    Snippet("sbatch", "missing_script", "sbatch nosuch.sh; echo rc=$?"),
    Snippet("sbatch", "bad_option", "sbatch --no-such-option --wrap true; echo rc=$?"),
    Snippet("sbatch", "bad_partition", "sbatch -p nosuchpart --wrap true; echo rc=$?"),
    Snippet("sbatch", "bad_time", "sbatch -t bogus --wrap true; echo rc=$?"),
    Snippet("sbatch", "bad_array", "sbatch --array=5-1 --wrap true; echo rc=$?"),
    Snippet("sbatch", "bad_dependency_syntax", "sbatch -d afterok:abc --wrap true; echo rc=$?"),
    Snippet("sbatch", "bad_ntasks", "sbatch -n 0 --wrap true; echo rc=$?"),
    Snippet("sbatch", "bad_mem", "sbatch --mem=lots --wrap true; echo rc=$?"),
    Snippet("sbatch", "exit_code_wait", "sbatch -W -o /dev/null --wrap 'exit 3' >/dev/null; echo rc=$?"),
    # ---- the dependency and reason right after submission
    Snippet(
        "squeue",
        "dependency_at_submit",
        'a=$(sbatch --parsable -o /dev/null --wrap "sleep 3"); b=$(sbatch --parsable -o /dev/null -d afterok:$a --wrap true); squeue -h -j $b -o "%i|%E|%r|%T"; wj $b',
    ),
    Snippet(
        "squeue",
        "begin_at_submit",
        'b=$(sbatch --parsable -o /dev/null --begin=now+1hour --wrap true); squeue -h -j $b -o "%i|%r|%T"; scancel $b',
    ),
    Snippet(
        "squeue",
        "hold_at_submit",
        'b=$(sbatch --parsable -o /dev/null -H --wrap true); squeue -h -j $b -o "%i|%r|%T"; scancel $b',
    ),
    Snippet(
        "scontrol",
        "dependency_at_submit",
        'a=$(sbatch --parsable -o /dev/null --wrap "sleep 3"); b=$(sbatch --parsable -o /dev/null -d afterok:$a --wrap true); scontrol show job $b | grep -oE "(Dependency|Reason)=[^ ]*"; wj $b',
    ),
    # ---- scontrol show job: the files actually written
    Snippet(
        "scontrol",
        "stdout_default",
        'id=$(sub --wrap "echo x"); scontrol show job $id | grep -oE "(StdOut|StdErr|StdIn)=[^ ]*"; ls slurm-*',
    ),
    Snippet(
        "scontrol",
        "stdout_array",
        'id=$(sub --array=2 --wrap "echo x"); scontrol show job ${id}_2 | grep -oE "(StdOut|StdErr)=[^ ]*"; ls slurm-*',
    ),
    Snippet(
        "scontrol",
        "stdout_pattern",
        'id=$(sub -J nm -o "%x-%j.o" -e "%x.e" --wrap "echo x"); scontrol show job $id | grep -oE "(StdOut|StdErr)=[^ ]*"',
    ),
    Snippet(
        "scontrol",
        "job_name_and_command",
        'id=$(sub -o /dev/null --wrap "true"); scontrol show job $id | grep -oE "(JobName|Command)=[^ ]*"',
    ),
    Snippet(
        "scontrol",
        "num_tasks_cpus",
        'id=$(sub -o /dev/null -n 2 -c 2 --wrap "true"); scontrol show job $id | grep -oE "(NumTasks|CPUs/Task|NumCPUs)=[^ ]*"',
    ),
    # ---- scancel --signal semantics
    Snippet("scancel", "signal_steps_only", _SIG + "scancel --signal=USR1 $id; wj $id; cat out"),
    Snippet(
        "scancel",
        "signal_batch",
        _SIG + "scancel -b --signal=USR1 $id; sleep 0.5; scancel $id; wj $id; grep -c 'shell got' out",
    ),
    Snippet("scancel", "signal_full", _SIG + "scancel --full --signal=USR1 $id; wj $id; LC_ALL=C sort out"),
    Snippet(
        "scancel",
        "signal_no_steps",
        'id=$(sbatch --parsable -o out --wrap "trap \\"echo got\\" USR1; sleep 2 & wait; echo end"); sleep 1; scancel -s USR1 $id; wj $id; cat out',
    ),
    Snippet("scancel", "cancel_unknown", "scancel 999999; echo rc=$?"),
    Snippet("scancel", "bad_signal", "scancel --signal=NOPE 999999; echo rc=$?"),
    # ---- srun steps inside a batch job
    Snippet(
        "srun",
        "step_id_env",
        'sub -o o -n 2 --wrap "srun -n 1 printenv SLURM_STEP_ID SLURM_STEPID SLURM_STEP_NUM_TASKS; srun -n 2 printenv SLURM_STEP_ID | sort" >/dev/null; cat o',
    ),
    Snippet(
        "srun",
        "step_gtids",
        "sub -o o -n 2 --wrap \"srun -n 2 bash -c 'echo \\$SLURM_PROCID \\$SLURM_GTIDS \\$SLURM_LOCALID' | sort\" >/dev/null; cat o",
    ),
    Snippet(
        "srun",
        "step_ntasks_env",
        'sub -o o -n 2 --wrap "srun -n 2 printenv SLURM_NTASKS SLURM_NPROCS | sort" >/dev/null; cat o',
    ),
    # ---- mpirun inside an allocation (each starts its ranks, or its daemons through srun, itself)
    # (Open MPI names its job by a hash of its own: [[N,1],0].)
    Snippet("srun", "mpirun_openmpi_ring", _RING_OMPI + 'sub -o o -n 2 --wrap "mpirun.openmpi ./ring --exit 3; echo rc=\\$?" >/dev/null; sed -e "s/ on .*//" -e "s/[[][[][0-9]*,/[[N,/" o | LC_ALL=C sort'),
    Snippet("srun", "mpirun_hydra_ring", _RING + 'sub -o o -n 2 --wrap "mpiexec.hydra ./ring --exit 3; echo rc=\\$?" >/dev/null; sed "s/ on .*//" o | LC_ALL=C sort'),
    Snippet("srun", "mpirun_hydra_steps", _RING + '{ j=$(sub -o o -n 2 --wrap "mpiexec.hydra ./ring") && wa $j; }; sacct -n -j $j -o JobID,JobName,State,ExitCode'),
    # ---- MPI direct launch (srun --mpi=pmi2, MPICH's PMI client over PMI_FD)
    Snippet("srun", "mpi_pmi2_ring", _RING + 'sub -o o -n 2 --wrap "srun --mpi=pmi2 -n 2 ./ring --exit 3; echo rc=\\$?" >/dev/null; sed "s/ on .*//" o | LC_ALL=C sort'),
    Snippet("srun", "mpi_pmi2_abort", _RING + 'sub -o o -n 2 --wrap "srun --mpi=pmi2 -n 2 ./ring --abort 1 5; echo rc=\\$?" >/dev/null; sed "s/ on .*//" o | LC_ALL=C sort'),
    Snippet("srun", "mpi_pmi2_die_kill_on_bad_exit", _RING + 'sub -o o -n 2 --wrap "srun -K --mpi=pmi2 -n 2 ./ring --die 1 4; echo rc=\\$?" >/dev/null; sed "s/ on .*//" o | LC_ALL=C sort'),
)


def all_case_ids() -> list[str]:
    """Every case id, in order (used by the documentation to count cases per command)."""
    ids = [f"env/{s}/{v}" for s in ENV_OPTION_SETS for v in ENV_VARIABLES]
    ids += [f"env/{s}/names" for s in ENV_OPTION_SETS]
    ids += [s.id for s in SNIPPETS]
    ids += [case for table in TABLES for case in table.ids()]
    ids += [f"scontrol/{what}/{key}" for what, (_, keys) in KEYED.items() for key in keys]
    return ids


def command_of(case_id: str) -> str:
    """The command a case is counted under: ``env`` cases are sbatch's output environment."""
    parts = case_id.split("/")
    if parts[0] in ("errors", "commands"):  # rows named <command>_<what>
        return parts[-1].split("_", 1)[0]
    return "sbatch (environment)" if parts[0] == "env" else parts[0]


# ---- tables over shared jobs ---------------------------------------------------------------------
#
# The field and error tables run against three jobs made once per session on each side
# (:data:`SHARED_JOBS`): ``$JP`` held (pending, JobHeldUser), ``$JR`` running (sleeping), ``$JD``
# completed. Their ids read ``<JP>``, ``<JR>``, ``<JD>`` in every output. One shell run per table and
# side prints every row's section; each row (or each key of a keyed table) is one case.

SHARED_JOBS = """
JP=$(sbatch --parsable -H -J pend -o /dev/null -t 5 --wrap true)
JR=$(sbatch --parsable -J run -o /dev/null -t 10 --wrap 'sleep 900')
JD=$(sbatch --parsable -J done -o /dev/null --wrap true)
wj "$JD"
for i in $(seq 300); do squeue -h -j "$JR" -o %T | grep -q RUNNING && break; sleep 0.1; done
echo "$JP $JR $JD"
"""


@dataclass(frozen=True)
class Table:
    """Rows of shell run in one go; a row's case compares its section (stdout and stderr
    interleaved, then ``rc=N``). Ids: ``<command>/<name>/<row>``."""

    command: str
    name: str
    rows: tuple[tuple[str, str], ...]

    def ids(self) -> list[str]:
        return [f"{self.command}/{self.name}/{row}" for row, _ in self.rows]

    def script(self) -> str:
        parts = [f'echo "@@@ {row}"; ( {shell} ) 2>&1; echo "rc=$?"\n' for row, shell in self.rows]
        return "".join(parts)


def sections(text: str) -> dict[str, str]:
    """A table run's output split by row (see :meth:`Table.script`). Pure."""
    out: dict[str, str] = {}
    current = None
    for line in text.splitlines(keepends=True):
        if line.startswith("@@@ "):
            current = line[4:].rstrip("\n")
            out[current] = ""
        elif current is not None:
            out[current] += line
    return out


def _first_error(command: str) -> str:
    """``command``'s first line on stderr and its exit status (its stdout dropped)."""
    return f'{{ {command} ; }} 2>&1 >/dev/null | sed -n 1p; echo "exit=${{PIPESTATUS[0]}}"'


# Every %-field of squeue -o (22.05), on the held job (its header line included).
SQUEUE_FIELDS = "aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpPqQrRsStTuUvVwWxXyYzZ"
# Every -O field name of squeue (22.05).
SQUEUE_LONG_FIELDS = (
    "Account AccrueTime AdminComment AllocNodes AllocSID ArrayJobID ArrayTaskID AssocID BatchFlag "
    "BatchHost BoardsPerNode BurstBuffer BurstBufferState Cluster ClusterFeature Command Comment "
    "Contiguous Container Cores CoreSpec CPUFreq cpus-per-task cpus-per-tres Deadline DelayBoot "
    "Dependency DerivedEC EligibleTime EndTime exit_code Feature GroupID GroupName HetJobID HetJobIDSet "
    "HetJobOffset JobArrayID JobID LastSchedEval Licenses MaxCPUs MaxNodes MCSLabel mem-per-tres MinCpus "
    "MinMemory MinTime MinTmpDisk Name Network Nice NodeList Nodes NTPerBoard NTPerCore NTPerNode "
    "NTPerSocket NumCPUs NumNodes NumTasks Origin OriginRAW OverSubscribe Partition PendingTime "
    "PreemptTime Prefer Priority PriorityLong Profile QOS Reason ReasonList Reboot ReqNodes ReqSwitch "
    "Requeue Reservation ResizeTime RestartCnt ResvPort SchedNodes SCT SiblingsActive SiblingsActiveRaw "
    "SiblingsViable SiblingsViableRaw Sockets SPerBoard StartTime State StateCompact STDERR STDIN STDOUT "
    "StepID StepName StepState SubmitTime system_comment Threads TimeLeft TimeLimit TimeUsed tres-alloc "
    "tres-bind tres-freq tres-per-job tres-per-node tres-per-socket tres-per-step tres-per-task UserID "
    "UserName Wait4Switch WCKey WorkDir"
).split()
# Every %-field of sinfo -o (22.05).
SINFO_FIELDS = "aAbBcCdDeEfFgGhHIlLmMnNoOpPrRsStTuUvVwXYZz"

_ALL3 = '"$JP,$JR,$JD"'

def _sacct_field_names() -> tuple[str, ...]:
    """Every field name of ``sacct -e`` (22.05); that Spur lists the same ones is itself a case
    (``sacct/layout/fields``)."""
    from spur.cli.sacct import FIELDS

    return tuple(name for name, _width in FIELDS)


# Durations measured by the clock of each system's scheduler: Slurm's slurmctld starts a batch job on
# its next scheduler pass, so the job is "reserved" for 0 or 1 s and its elapsed time rounds to 0 or 1 s
# as the machine's load decides; these fields are compared by their format (digits masked), their values
# are unit-tested (tests/test_cli_sacct.py).
_SCHEDULER_TIMED = frozenset(
    ("Elapsed", "ElapsedRaw", "CPUTime", "CPUTimeRAW", "Reserved", "ResvCPU", "ResvCPURAW")
)


def _digits_masked(field: str) -> str:
    """The shell suffix that masks the digits of ``field``'s value when it is scheduler-timed."""
    return " | sed 's/[0-9]/N/g'" if field in _SCHEDULER_TIMED else ""


# sacct's rows read accounting once its record of the job is final (``wa``); each job they make
# is their own, so that no other case's job shows up in them.
_SACCT_JOB = '{ j=$(sub -o /dev/null %s) && wa "$j"; }; '
_SACCT_LAYOUT = (
    ("default", "wa $JD; sacct -j $JD"),
    ("brief", "sacct -b -j $JD"),
    ("long", "sacct -l -j $JD"),
    ("allocations", "sacct -X -j $JD"),
    ("step", "sacct -j $JD.batch"),
    ("parsable", "sacct -p -j $JD"),
    ("parsable2", "sacct -P -j $JD"),
    ("noheader", "sacct -n -j $JD"),
    ("delimiter", "sacct -P --delimiter=: -j $JD -o JobID,JobName,State"),
    ("widths", "sacct -j $JD -o JobID%20,JobName%-15,State%5,ExitCode%3"),
    ("width_zero", "sacct -j $JD -o JobName%0,State"),
    ("env_format", "SACCT_FORMAT=JobID,State,Elapsed sacct -j $JD"),
    ("cli_over_env", "SACCT_FORMAT=JobID,State sacct -j $JD -o JobName"),
    ("time_format_epoch", "SLURM_TIME_FORMAT=%s sacct -X -n -j $JD -o Submit,Start,End"),
    (
        "time_format_custom",
        "SLURM_TIME_FORMAT='%Y/%m' sacct -X -n -j $JD -o Start | tr -d ' ' | grep -c '^[0-9]*/[0-9]*$'",
    ),
    ("fields", "sacct -e"),
    ("helpformat", "sacct --helpformat"),
    ("running", "sacct -X -j $JR -o JobID,JobName,State,ExitCode"),
    ("running_batch", "sacct -j $JR.batch -o JobID,JobName,State"),
    ("pending", "sacct -j $JP -o JobID,JobName,State,ExitCode,NodeList,AllocCPUS"),
    ("pending_no_steps", "sacct -n -j $JP | wc -l"),
    ("state_filter", "sacct -X -n -s CD -j $JD,$JP -o JobID,State"),
    ("state_filter_pending", "sacct -X -n -s PD -j $JD,$JP -o JobID,State"),
    ("state_filter_running", "sacct -X -n -s R -j $JD,$JR,$JP -o JobID,State"),
    ("state_filter_no_start", "sacct -X -n -s CD -o JobID,State | wc -l"),
    (
        "time_format_relative",
        "SLURM_TIME_FORMAT=relative sacct -X -n -j $JD -o Submit | sed 's/[0-9]/N/g'",
    ),
    ("mem_per_cpu", _SACCT_JOB % "-c 2 --mem-per-cpu=50 --wrap true" + "sacct -X -n -j $j -o ReqMem,ReqTRES%40"),
    (
        "step_over_allocation",
        '{ j=$(sub -o out.txt -n 1 --wrap "srun -n 2 true; echo rc=\\$?") && wa "$j"; }; '
        "sed 's/[0-9][0-9]*/N/g' out.txt; sacct -n -j $j -o JobID,State,ExitCode",
    ),
    ("name_filter", "sacct -X -n --name=done -j $JD,$JP -o JobName,State"),
    ("two_jobs", "sacct -X -n -j $JP,$JD -o JobID,State"),
    ("failed", _SACCT_JOB % "--wrap false" + "sacct -j $j -o JobID,JobName,State,ExitCode,DerivedExitCode"),
    ("exit3", _SACCT_JOB % "--wrap 'exit 3'" + "sacct -j $j -o JobID,State,ExitCode"),
    (
        "signaled",
        _SACCT_JOB % "--wrap 'kill -TERM $$'" + "sacct -j $j -o JobID,State,ExitCode",
    ),
    (
        "cancelled",
        "j=$(sbatch --parsable -o /dev/null --wrap 'sleep 60'); "
        'for i in $(seq 300); do squeue -h -j "$j" -o %T | grep -q RUNNING && break; sleep 0.1; done; '
        # The job line only: Slurm records its batch step either CANCELLED 0:15 or FAILED 15:0, as
        # slurmstepd's report races the kill (Spur's is CANCELLED 0:15; see tests/test_cli_sacct.py).
        'scancel "$j"; wj "$j"; wa "$j"; sacct -X -j $j -o JobID,State,ExitCode',
    ),
    (
        "cancelled_pending",
        'j=$(sbatch --parsable -H -o /dev/null --wrap true); scancel "$j"; wj "$j"; '
        'for i in $(seq 300); do sacct -n -X -j $j -o State | grep -q CANCELLED && break; sleep 0.1; done; '
        "sacct -j $j -o JobID,State,ExitCode,NodeList",
    ),
    (
        "steps",
        _SACCT_JOB % "--wrap 'srun true; srun false; srun -J last hostname >/dev/null'"
        + "sacct -j $j -o JobID,JobName,State,ExitCode,NTasks,AllocCPUS",
    ),
    ("steps_one", _SACCT_JOB % "--wrap 'srun true; srun true'" + "sacct -n -j $j.1 -o JobID,State"),
    ("named_steps", _SACCT_JOB % "--wrap 'srun -J first true'" + "sacct -n -j $j -o JobID,JobName"),
    (
        "array",
        '{ j=$(sub -o /dev/null --array=1-3 --wrap true) && wa "${j}_1" && wa "${j}_2" && wa "${j}_3"; }; '
        "sacct -X -j $j -o JobID,JobName,State",
    ),
    (
        "array_task",
        '{ j=$(sub -o /dev/null --array=4-5 --wrap true) && wa "${j}_4" && wa "${j}_5"; }; '
        "sacct -n -X -j ${j}_5 -o JobID,State",
    ),
    (
        "resources",
        _SACCT_JOB % "-n 2 -c 2 --mem=100 --wrap true"
        + "sacct -X -j $j -o JobID,AllocCPUS,NCPUS,NNodes,ReqCPUS,ReqMem,ReqNodes,AllocNodes",
    ),
    ("job_name", _SACCT_JOB % "-J a_long_job_name_here --wrap true" + "sacct -X -j $j -o JobName,JobName%30"),
    ("comment", _SACCT_JOB % "--comment=hello --wrap true" + "sacct -X -P -n -j $j -o Comment"),
    ("time_limit", _SACCT_JOB % "-t 7 --wrap true" + "sacct -X -n -j $j -o Timelimit,TimelimitRaw"),
    ("workdir", _SACCT_JOB % "--wrap true" + "sacct -X -P -n -j $j -o WorkDir,Cluster,Partition,User,Group"),
)


TABLES: tuple[Table, ...] = (
    Table("squeue", "o", tuple((f"%{c}", f"squeue -j $JP -o '%{c}'") for c in SQUEUE_FIELDS)),
    # (AllocSID is the submitting shell's session id, a process id: compared as <SID>, so that it
    # never passes for a job id in the normalization; its value is unit-tested.)
    Table(
        "squeue",
        "O",
        tuple(
            (f, f"squeue -j $JP -O {f}" + (" | sed 's/^[0-9][0-9]*/<SID>/'" if f == "AllocSID" else ""))
            for f in SQUEUE_LONG_FIELDS
        ),
    ),
    Table(
        "squeue",
        "layout",
        (
            ("default", "squeue -j $JP"),
            ("long", "squeue -l -j $JP | tail -n +2"),
            (
                "long_date_line",
                "squeue -l -j $JP | head -n 1 | sed 's/[A-Z][a-z][a-z] [A-Z][a-z][a-z] .*[0-9]/<DATE>/'",
            ),
            ("running_fields", "squeue -h -j $JR -o '%i|%T|%N|%C|%D|%R|%P|%j|%u|%l'"),
            (
                "hold_release",
                "j=$(sbatch --parsable -H -o /dev/null --wrap true); scontrol hold $j; squeue -h -j $j -o %r; scancel $j",
            ),
            ("steps", "squeue -s -j $JR"),
            ("all_states", f"squeue -h -t all -j {_ALL3} -o '%i %T'"),
            ("states_pd", f"squeue -h -t PD -j {_ALL3} -o '%i %T'"),
            ("states_r", f"squeue -h --states=running -j {_ALL3} -o '%i'"),
            ("sort_id", f"squeue -h -t all -j {_ALL3} -o '%i %T' -S i"),
            ("sort_id_desc", f"squeue -h -t all -j {_ALL3} -o '%i %T' -S -i"),
            ("sort_state", f"squeue -h -t all -j {_ALL3} -o '%i %T' -S T"),
            ("sort_name", f"squeue -h -t all -j {_ALL3} -o '%i %j' -S j"),
            ("env_sort", f"SQUEUE_SORT=-i squeue -h -t all -j {_ALL3} -o '%i'"),
            ("env_format", "SQUEUE_FORMAT='%i|%j|%T' squeue -j $JP"),
            ("env_format2", "SQUEUE_FORMAT2='JobID:10,Name:8,State' squeue -j $JP"),
            ("cli_over_env", "SQUEUE_FORMAT='%i' squeue -h -j $JP -o '%j'"),
            ("width", "squeue -j $JP -o '%.12i|%-10j|%5T|'"),
            ("width_O", "squeue -j $JP -O 'JobID:12,Name:4,State:'"),
            ("noheader", "squeue -h -j $JP"),
            ("name_filter", "squeue -h -n pend,run -o '%j' -S j"),
            ("user_filter", "squeue -h -u root -j $JP -o %i"),
            ("partition_filter", "squeue -h -p $PART -j $JP -o %i"),
            ("array_format", "squeue -h -r -j $JP -o '%i %F %K'"),
            ("start", "squeue --start -j $JP"),
        ),
    ),
    Table("sinfo", "o", tuple((f"%{c}", f"sinfo -o '%{c}'") for c in SINFO_FIELDS)),
    Table(
        "sinfo",
        "layout",
        (
            ("default", "sinfo"),
            ("nodes", "sinfo -N"),
            ("summarize", "sinfo -s"),
            ("reasons", "sinfo -R"),
            ("exact", "sinfo -e"),
            ("long_body", "sinfo -l | tail -n +2"),
            ("node_long_body", "sinfo -N -l | tail -n +2"),
            ("noheader", "sinfo -h"),
            ("partition", "sinfo -p $PART"),
            ("states_idle", "sinfo -t idle"),
            ("states_mix", "sinfo -t mix -h -o '%P %t'"),
            ("env_format", "SINFO_FORMAT='%P|%a|%D|%t' sinfo"),
            ("width", "sinfo -o '%.15P|%-8t|%3D|'"),
            ("long_O", "sinfo -O 'Partition:12,NodeList:10,StateLong'"),
            ("node_O", "sinfo -N -O 'NodeHost,CPUsState,Memory'"),
        ),
    ),
    Table(
        "scontrol",
        "misc",
        (
            ("show_partition_one", "scontrol show partition $PART | head -n 1"),
            (
                "update_timelimit",
                "scontrol update JobId=$JP TimeLimit=7; squeue -h -j $JP -o %l; scontrol update JobId=$JP TimeLimit=5",
            ),
            (
                "update_name",
                "scontrol update JobId=$JP Name=pend2; squeue -h -j $JP -o %j; scontrol update JobId=$JP Name=pend",
            ),
            ("update_comment", "scontrol update JobId=$JP Comment=hi; squeue -h -j $JP -o %k"),
            ("config_header", "scontrol show config | head -n 1"),
            ("ping", "scontrol ping | sed 's/ at .* is / is /'"),
            ("version_words", "scontrol --version | cut -d' ' -f1"),
        ),
    ),
    Table(
        "errors",
        "first_line",
        (
            ("squeue_bad_option", _first_error("squeue --bogus")),
            ("squeue_bad_job_id", _first_error("squeue -j abc")),
            ("squeue_unknown_job", _first_error("squeue -j 999999")),
            ("squeue_unknown_partition", _first_error("squeue -p nosuchpart")),
            ("squeue_bad_state", _first_error("squeue -t bogus")),
            (
                "squeue_state_flags",
                "squeue -h -t CF,RS,RF,RH,SE,ST,SI,SO,RD,RV,configuring,stage_out; echo rc=$?",
            ),
            ("squeue_unknown_user", _first_error("squeue -u nosuchuser")),
            ("squeue_bad_format", _first_error("squeue -O Bogus")),
            ("squeue_bad_sort", _first_error("squeue -S '?'")),
            ("squeue_finished_job", _first_error("squeue -j $JD")),
            ("sinfo_bad_option", _first_error("sinfo --bogus")),
            ("sinfo_unknown_partition", _first_error("sinfo -p nosuchpart")),
            ("sinfo_unknown_node", _first_error("sinfo -n nosuchnode")),
            ("sinfo_bad_state", _first_error("sinfo -t bogus")),
            ("sinfo_bad_format", _first_error("sinfo -O Bogus")),
            ("scontrol_bad_option", _first_error("scontrol --bogus")),
            ("scontrol_bad_command", _first_error("scontrol bogus")),
            ("scontrol_unknown_job", _first_error("scontrol show job 999999")),
            ("scontrol_bad_job_id", _first_error("scontrol show job abc")),
            ("scontrol_unknown_node", _first_error("scontrol show node nosuchnode")),
            ("scontrol_unknown_partition", _first_error("scontrol show partition nosuchpart")),
            ("scontrol_update_finished", _first_error("scontrol update JobId=$JD TimeLimit=5")),
            ("scontrol_update_bad_time", _first_error("scontrol update JobId=$JP TimeLimit=bogus")),
            ("scontrol_update_bad_partition", _first_error("scontrol update JobId=$JP Partition=nosuchpart")),
            ("scontrol_update_bad_key", _first_error("scontrol update JobId=$JP Bogus=1")),
            ("scontrol_hold_unknown", _first_error("scontrol hold 999999")),
            ("scontrol_release_finished", _first_error("scontrol release $JD")),
            ("scancel_bad_option", _first_error("scancel --bogus")),
            ("scancel_bad_job_id", _first_error("scancel abc")),
            ("scancel_finished", _first_error("scancel $JD")),
            ("scancel_no_id", _first_error("scancel")),
            ("sbatch_unknown_partition", _first_error("sbatch -p nosuchpart --wrap true")),
            ("sbatch_bad_begin", _first_error("sbatch --begin=bogus --wrap true")),
            ("sbatch_bad_cpus", _first_error("sbatch -c abc --wrap true")),
            ("sbatch_bad_nodes", _first_error("sbatch -N abc --wrap true")),
            ("sbatch_zero_nodes", _first_error("sbatch -N 0 --wrap true")),
            ("sbatch_bad_signal", _first_error("sbatch --signal=XX --wrap true")),
            ("sbatch_bad_mail_type", _first_error("sbatch --mail-type=bad --wrap true")),
            ("sbatch_bad_gres", _first_error("sbatch --gres=bad:x:y --wrap true")),
            ("sbatch_bad_nodelist", _first_error("sbatch -w 'bad[' --wrap true")),
            ("sbatch_too_much_memory", _first_error("sbatch --mem=100G --wrap true")),
            ("sbatch_too_many_cpus", _first_error("sbatch -c 99 --wrap true")),
            ("sbatch_too_many_nodes", _first_error("sbatch -N 5 --wrap true")),
            ("sbatch_unknown_node", _first_error("sbatch -w nosuchnode --wrap true")),
            ("sbatch_bad_array_step", _first_error("sbatch --array=1-3:0 --wrap true")),
            ("sbatch_bad_dependency", _first_error("sbatch -d bogus --wrap true")),
            ("sbatch_bad_mem_per_cpu", _first_error("sbatch --mem-per-cpu=x --wrap true")),
            (
                "sbatch_bad_kill_on_invalid_dep",
                _first_error("sbatch --kill-on-invalid-dep=maybe --wrap true"),
            ),
            ("sbatch_env_open_mode", _first_error("SBATCH_OPEN_MODE=bad sbatch --wrap true")),
            (
                "sbatch_directive_time",
                "printf '#!/bin/bash\\n#SBATCH -t bogus\\n' > j.sh; " + _first_error("sbatch j.sh"),
            ),
            ("srun_bad_option", _first_error("srun --bogus true")),
            ("srun_unknown_partition", _first_error("srun -p nosuchpart true")),
            ("srun_bad_time", _first_error("srun -t bogus true")),
            ("srun_zero_tasks", _first_error("srun -n 0 true")),
            ("salloc_bad_option", _first_error("salloc --bogus true")),
            ("salloc_unknown_partition", _first_error("salloc -p nosuchpart true")),
            ("salloc_bad_time", _first_error("salloc -t bogus true")),
            ("sacct_bad_option", _first_error("sacct --bogus")),
        ),
    ),
    Table(
        "sacct",
        "o",
        tuple(
            (f, ("wa $JD; " if i == 0 else "") + f"sacct -j $JD -P -o {f}" + _digits_masked(f))
            for i, f in enumerate(_sacct_field_names())
        ),
    ),
    Table("sacct", "layout", _SACCT_LAYOUT),
    # scontrol -o, the date line of sinfo -l, sacct -j ID.STEP, sshare -U, immediate grant (srun, salloc)
    Table(
        "commands",
        "rows",
        (
            ("scontrol_oneliner_job", "scontrol -o show job $JP"),
            ("scontrol_oneliner_partition", "scontrol -o show partition"),
            (
                "sinfo_long_date_line",
                "sinfo -l | head -n 1 | sed 's/[A-Z][a-z][a-z] [A-Z][a-z][a-z] .*[0-9]/<DATE>/'",
            ),
            (
                "sinfo_node_long_date_line",
                "sinfo -N -l | head -n 1 | sed 's/[A-Z][a-z][a-z] [A-Z][a-z][a-z] .*[0-9]/<DATE>/'",
            ),
            ("sacct_step", _first_error("sacct -j $JD.batch -n -o JobID")),
            ("sshare_user", _first_error("sshare -U")),
            ("srun_granted", "settled; srun -o /dev/null true; echo rc=$?"),
            # Slurm's salloc sometimes also prints "Job allocation N has been revoked." when the
            # controller's completion message beats its own exit: a race inside Slurm, not compared.
            (
                "salloc_granted",
                "settled; salloc true 2>&1 | grep -v 'has been revoked' | sed 's/[0-9][0-9]*/N/g'",
            ),
        ),
    ),
)

# ``scontrol show job|node|partition|config``: one run per table and side, one case per key
# (``Key=Value`` tokens; for config the ``Key = value`` lines). Ids: ``scontrol/show_<what>/<key>``.
JOB_KEYS = (
    "JobId JobName UserId GroupId MCS_label Priority Nice Account QOS JobState Reason Dependency Requeue "
    "Restarts BatchFlag Reboot ExitCode RunTime TimeLimit TimeMin SubmitTime EligibleTime AccrueTime "
    "StartTime EndTime Deadline SuspendTime SecsPreSuspend LastSchedEval Scheduler Partition AllocNode:Sid "
    "ReqNodeList ExcNodeList NodeList BatchHost NumNodes NumCPUs NumTasks CPUs/Task ReqB:S:C:T TRES "
    "Socks/Node NtasksPerN:B:S:C CoreSpec MinCPUsNode MinMemoryNode MinTmpDiskNode Features DelayBoot "
    "OverSubscribe Contiguous Licenses Network Command WorkDir StdErr StdIn StdOut Power"
).split()
NODE_KEYS = (
    "NodeName Arch CoresPerSocket CPUAlloc CPUEfctv CPUTot CPULoad AvailableFeatures ActiveFeatures Gres "
    "NodeAddr NodeHostName Version OS RealMemory AllocMem FreeMem Sockets Boards State ThreadsPerCore "
    "TmpDisk Weight Owner MCS_label Partitions BootTime SlurmdStartTime LastBusyTime CfgTRES AllocTRES "
    "CapWatts CurrentWatts AveWatts ExtSensorsJoules ExtSensorsWatts ExtSensorsTemp"
).split()
PARTITION_KEYS = (
    "PartitionName AllowGroups AllowAccounts AllowQos AllocNodes Default QoS DefaultTime DisableRootJobs "
    "ExclusiveUser GraceTime Hidden MaxNodes MaxTime MinNodes LLN MaxCPUsPerNode Nodes PriorityJobFactor "
    "PriorityTier RootOnly ReqResv OverSubscribe OverTimeLimit PreemptMode State TotalCPUs TotalNodes "
    "SelectTypeParameters JobDefaults DefMemPerNode MaxMemPerNode TRES"
).split()
# The settings Spur has an equivalent of (Spur prints no others: see the allow-list's show_config).
CONFIG_KEYS = (
    "AccountingStorageEnforce AccountingStorageType ClusterName EnforcePartLimits KillWait MpiDefault "
    "PriorityType SchedulerType"
).split()

KEYED: dict[str, tuple[str, tuple[str, ...]]] = {
    "show_job_pending": ("scontrol show job $JP", tuple(JOB_KEYS)),
    "show_job_running": ("scontrol show job $JR", tuple(JOB_KEYS)),
    "show_job_completed": ("scontrol show job $JD", tuple(JOB_KEYS)),
    "show_node": ("scontrol show node", tuple(NODE_KEYS)),
    "show_partition": ("scontrol show partition $PART", tuple(PARTITION_KEYS)),
    "show_config": ("scontrol show config", tuple(CONFIG_KEYS)),
}


# Keys whose value depends on the moment each side looked (the two jobs did not start and end in the
# same second): compared with every digit read as N.
CLOCK_KEYS = frozenset({("show_job_running", "RunTime"), ("show_job_completed", "RunTime")})


def keyed_values(text: str) -> dict[str, str]:
    """``Key=Value`` tokens (first occurrence) and ``Key = value`` lines of scontrol's output. Pure."""
    import re

    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.fullmatch(r"(\S+)\s+=\s?(.*)", line)
        if m and not line.startswith(" "):
            out.setdefault(m.group(1), m.group(2).rstrip())
            continue
        for token in line.split():
            key, sep, value = token.partition("=")
            if sep:
                out.setdefault(key, value)
    return out
