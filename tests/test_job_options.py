"""sbatch/srun/salloc option parsing, input environment, precedence and JobSpec building."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from spur.core.job import UNLIMITED, JobSpec
from spur.core.job_options import (
    Dependency,
    DependencyCondition,
    DependencyTarget,
    JobOptionError,
    JobOptions,
    SignalSpec,
    build_job_spec,
    check_root_only,
    export_environment,
    merge_options,
    options_from_env,
    parse_array_spec,
    parse_dependency,
    parse_export,
    parse_job_options,
    parse_script_options,
    parse_signal_spec,
)
from spur.core.script import parse_sbatch_directives

# ---- command line forms --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["-N2"], ["-N", "2"], ["--nodes=2"], ["--nodes", "2"]],
)
def test_nodes_option_forms(args: list[str]) -> None:
    opts, rest = parse_job_options(args)
    assert (opts.nodes_min, opts.nodes_max) == (2, 2)
    assert rest == []


def test_long_options_may_be_abbreviated_when_unambiguous() -> None:
    opts, _ = parse_job_options(["--part=debug", "--accou", "proj", "--wra=hostname"])
    assert (opts.partition, opts.account, opts.wrap) == ("debug", "proj", "hostname")
    with pytest.raises(JobOptionError, match="'--nod' is ambiguous"):
        parse_job_options(["--nod=2"])


def test_node_range_stores_min_and_max() -> None:
    opts, _ = parse_job_options(["-N", "2-4"])
    assert (opts.nodes_min, opts.nodes_max) == (2, 4)


def test_short_flags_cluster_and_take_attached_values() -> None:
    opts, rest = parse_job_options(["-vvH", "-vN3", "-Jname", "-t", "10", "script.sh"])
    assert opts.verbose == 3
    assert opts.hold is True
    assert opts.nodes_min == 3
    assert opts.job_name == "name"
    assert opts.time_limit == 600
    assert rest == ["script.sh"]


def test_sbatch_stops_at_the_script_and_keeps_its_arguments() -> None:
    opts, rest = parse_job_options(["-N", "2", "job.sh", "-N", "5", "--bogus"])
    assert opts.nodes_min == 2
    assert rest == ["job.sh", "-N", "5", "--bogus"]


def test_double_dash_ends_options() -> None:
    opts, rest = parse_job_options(["-n", "4", "--", "-script-with-dash.sh", "x"], command="srun")
    assert opts.ntasks == 4
    assert rest == ["-script-with-dash.sh", "x"]


def test_lone_dash_is_a_positional() -> None:
    _, rest = parse_job_options(["-p", "debug", "-"])
    assert rest == ["-"]


def test_required_value_may_start_with_a_dash() -> None:
    opts, _ = parse_job_options(["--comment", "-weird-", "--job-name", "--x"])
    assert opts.comment == "-weird-"
    assert opts.job_name == "--x"


def test_srun_command_and_srun_only_options() -> None:
    opts, rest = parse_job_options(
        ["-n", "4", "-l", "-u", "--pty", "--mpi=pmix", "--overlap", "-W", "30", "bash", "-i"], command="srun"
    )
    assert (opts.ntasks, opts.label, opts.unbuffered, opts.pty, opts.mpi, opts.overlap) == (
        4,
        True,
        True,
        True,
        "pmix",
        True,
    )
    assert opts.wait_secs == 30 and opts.wait is None
    assert rest == ["bash", "-i"]


def test_sbatch_wait_is_a_flag() -> None:
    opts, rest = parse_job_options(["-W", "job.sh"])
    assert opts.wait is True
    assert rest == ["job.sh"]


_OK: list[tuple[list[str], str, Any]] = [
    (["-J", "x"], "job_name", "x"),
    (["--job-name=my job"], "job_name", "my job"),
    (["-A", "proj"], "account", "proj"),
    (["-p", "gpu"], "partition", "gpu"),
    (["-q", "high"], "qos", "high"),
    (["-n", "8"], "ntasks", 8),
    (["-c", "4"], "cpus_per_task", 4),
    (["--ntasks-per-node=2"], "ntasks_per_node", 2),
    (["--tasks-per-node=3"], "ntasks_per_node", 3),
    (["--mem=4G"], "mem_mb", 4096),
    (["--mem", "0"], "mem_mb", 0),
    (["--mem-per-cpu=512"], "mem_per_cpu_mb", 512),
    (["-t", "1:30:00"], "time_limit", 5400),
    (["--time=5:30"], "time_limit", 360),
    (["--time=UNLIMITED"], "time_limit", UNLIMITED),
    (["--time=0"], "time_limit", UNLIMITED),
    (["--begin=now+1hour"], "begin", "now+1hour"),
    (["-b", "16:00"], "begin", "16:00"),
    (["-o", "out-%j.txt"], "output", "out-%j.txt"),
    (["-e", "err.txt"], "error", "err.txt"),
    (["-i", "in.txt"], "input", "in.txt"),
    (["-D", "/tmp/w"], "chdir", "/tmp/w"),
    (["--export=ALL,X=1"], "export", "ALL,X=1"),
    (["--export", "NONE"], "export", "NONE"),
    (["-a", "1-20%4"], "array", "1-20%4"),
    (["-d", "afterok:12:13"], "dependency", "afterok:12:13"),
    (["--gres=gpu:a100:2,shard:1"], "gres", "gpu:a100:2,shard:1"),
    (["-G", "2"], "gpus", "2"),
    (["--gpus=a100:4"], "gpus", "a100:4"),
    (["--gpus-per-node=2"], "gpus_per_node", "2"),
    (["--gpus-per-task=1"], "gpus_per_task", "1"),
    (["-w", "n[1-3]"], "nodelist", "n[1-3]"),
    (["-x", "n2"], "exclude", "n2"),
    (["-C", "a100&ib"], "constraint", "a100&ib"),
    (["--exclusive"], "exclusive", True),
    (["--exclusive=user"], "exclusive", True),
    (["-H"], "hold", True),
    (["--hold"], "hold", True),
    (["--requeue"], "requeue", True),
    (["--no-requeue"], "requeue", False),
    (["--signal=B:USR1@90"], "signal", "B:USR1@90"),
    (["--wrap", "hostname"], "wrap", "hostname"),
    (["--parsable"], "parsable", True),
    (["--test-only"], "test_only", True),
    (["--comment=hello"], "comment", "hello"),
    (["--nice"], "nice", 100),
    (["--nice=-5"], "nice", -5),
    (["-Q"], "quiet", True),
    (["-v"], "verbose", 1),
    (["--verbose", "--verbose"], "verbose", 2),
    (["--mail-type=END,FAIL"], "mail_type", "END,FAIL"),
    (["--mail-user=a@b.c"], "mail_user", "a@b.c"),
    (["--open-mode=append"], "open_mode", "append"),
    (["--open-mode=t"], "open_mode", "truncate"),
    (["--kill-on-invalid-dep=yes"], "kill_on_invalid_dep", True),
    (["--kill-on-invalid-dep=no"], "kill_on_invalid_dep", False),
    (["-s"], "oversubscribe", True),
    (["--oversubscribe"], "oversubscribe", True),
    (["--cpu-bind=cores"], "cpu_bind", "cores"),
    (["--uid=alice"], "uid", "alice"),
    (["--gid=100"], "gid", "100"),
    (["-h"], "help", True),
    (["--help"], "help", True),
    (["-V"], "version", True),
    (["--usage"], "usage", True),
]


@pytest.mark.parametrize(("args", "field_name", "value"), _OK)
def test_each_option_sets_its_field(args: list[str], field_name: str, value: Any) -> None:
    opts, rest = parse_job_options(args)
    assert getattr(opts, field_name) == value
    assert rest == []
    others = {k: v for k, v in vars(opts).items() if k != field_name and v is not None}
    assert others == {}


# ---- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "args", "line"),
    [
        ("sbatch", ["--bogus"], "sbatch: unrecognized option '--bogus'"),
        ("srun", ["--bogus=1", "hostname"], "srun: unrecognized option '--bogus'"),
        ("salloc", ["--bogus"], "salloc: unrecognized option '--bogus'"),
        ("sbatch", ["--pty"], "sbatch: unrecognized option '--pty'"),  # srun-only
        ("salloc", ["--array=1-2"], "salloc: unrecognized option '--array'"),
        ("sbatch", ["-y"], "sbatch: invalid option -- 'y'"),
        ("sbatch", ["-vy"], "sbatch: invalid option -- 'y'"),
        ("sbatch", ["--time"], "sbatch: option '--time' requires an argument"),
        ("sbatch", ["-t"], "sbatch: option requires an argument -- 't'"),
        ("sbatch", ["--hold=yes"], "sbatch: option '--hold' doesn't allow an argument"),
        (
            "sbatch",
            ["--exc=n1"],
            "sbatch: option '--exc' is ambiguous; possibilities: '--exclude' '--exclusive'",
        ),
    ],
)
def test_option_errors_print_like_getopt(command: str, args: list[str], line: str) -> None:
    with pytest.raises(JobOptionError) as exc:
        parse_job_options(args, command=command)
    assert str(exc.value) == line
    assert exc.value.hint == f'Try "{command} --help" for more information'


# Slurm 22.05's sbatch's lines and exit status (255: its option parser; 1: later checks or the controller).
@pytest.mark.parametrize(
    ("args", "line", "exit_code"),
    [
        (["--mem=4X"], "sbatch: error: Invalid --mem specification", 255),
        (["--mem-per-cpu=lots"], "sbatch: error: Invalid --mem-per-cpu specification", 255),
        (["-N", "0"], "sbatch: error: Batch job submission failed: Node count specification invalid", 1),
        (["-N", "4-2"], "sbatch: error: Batch job submission failed: Node count specification invalid", 1),
        (["-N", "x"], 'sbatch: error: "x" is not a valid node count', 255),
        (["-N", "99999999999"], 'sbatch: error: "99999999999" is not a valid node count', 255),
        (["-n", "abc"], 'sbatch: error: Invalid numeric value "abc" for --ntasks.', 1),
        (["-n", "-1"], 'sbatch: error: Invalid numeric value "-1" for --ntasks.', 1),
        (["-c", "0"], 'sbatch: error: Invalid numeric value "0" for --cpus-per-task.', 1),
        (["--time=abc"], "sbatch: error: Invalid --time specification", 255),
        (["--begin=someday"], "sbatch: error: Invalid --begin specification", 255),
        (["--array=5-1"], "sbatch: error: Batch job submission failed: Invalid job array specification", 1),
        (["--dependency=afterok"], "sbatch: error: Batch job submission failed: Job dependency problem", 1),
        (["--gres=gpu:x:y:z"], "sbatch: error: Invalid generic resource (gres) specification", 1),
        (["--gpus=x"], "sbatch: error: Invalid --gpus specification", 255),
        (["-w", "n[1-"], "sbatch: error: Batch job submission failed: Invalid node name specified", 1),
        (["-x", "n[3-1]"], "sbatch: error: Invalid --exclude specification", 255),
        (["--signal=FOO"], "sbatch: error: Invalid --signal specification", 255),
        (["--open-mode=sideways"], "sbatch: error: Invalid --open-mode specification", 255),
        (["--kill-on-invalid-dep=maybe"], "sbatch: error: Invalid --kill-on-invalid-dep specification", 255),
        (["--mail-type=SOMETIMES"], "sbatch: error: Invalid --mail-type specification", 255),
        (["--export=1BAD"], "sbatch: error: Invalid --export specification", 255),
        (["--nice=abc"], "sbatch: error: Invalid --nice specification", 255),
        (["--exclusive=bogus"], "sbatch: error: Invalid --exclusive specification", 255),
        (["-p", ""], "sbatch: error: Invalid --partition specification", 255),
    ],
)
def test_bad_values_as_slurm_says_them(args: list[str], line: str, exit_code: int) -> None:
    with pytest.raises(JobOptionError) as exc:
        parse_job_options(args)
    assert (str(exc.value), exc.value.exit_code) == (line, exit_code)


def test_mem_and_mem_per_cpu_together_are_refused() -> None:
    with pytest.raises(JobOptionError, match="mutually exclusive"):
        parse_job_options(["--mem=1G", "--mem-per-cpu=100"])


def test_wrap_with_script_arguments_is_refused() -> None:
    with pytest.raises(JobOptionError, match="Script arguments not permitted with --wrap option"):
        parse_job_options(["--wrap=hostname", "extra"])


def test_quiet_and_verbose_together_are_refused() -> None:
    with pytest.raises(JobOptionError, match="don't specify both"):
        parse_job_options(["-Q", "-v"])


def test_unknown_command_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown command"):
        parse_job_options([], command="scancel")


# ---- script directives ---------------------------------------------------------------------------


def test_script_directives_parse_through_the_same_parser() -> None:
    script = "#!/bin/bash\n#SBATCH -J train --nodes=2-4\n#SBATCH --mem=8G -t 1-0\nsrun python x.py\n"
    opts = parse_script_options(parse_sbatch_directives(script))
    assert (opts.job_name, opts.nodes_min, opts.nodes_max, opts.mem_mb, opts.time_limit) == (
        "train",
        2,
        4,
        8192,
        86400,
    )


def test_positional_in_script_directives_is_an_invalid_directive() -> None:
    with pytest.raises(JobOptionError) as exc:
        parse_script_options(["-N", "2", "oops"])
    assert str(exc.value) == "sbatch: error: Invalid directive found in batch script: oops"


# ---- environment ---------------------------------------------------------------------------------


def test_sbatch_input_environment() -> None:
    env = {
        "SBATCH_JOB_NAME": "envjob",
        "SBATCH_PARTITION": "gpu",
        "SBATCH_TIMELIMIT": "30",
        "SBATCH_ACCOUNT": "proj",
        "SBATCH_QOS": "high",
        "SBATCH_MEM_PER_NODE": "2G",
        "SBATCH_GRES": "gpu:1",
        "SBATCH_EXPORT": "NONE",
        "SBATCH_ARRAY_INX": "0-3",
        "SBATCH_REQUEUE": "1",
        "SBATCH_WAIT": "anything",
        "SBATCH_DEBUG": "2",
        # not input variables for sbatch: ignored
        "SBATCH_NODES": "5",
        "SLURM_NTASKS": "7",
        "SLURM_JOB_NAME": "outer",
    }
    opts = options_from_env(env)
    assert (opts.job_name, opts.partition, opts.time_limit, opts.account, opts.qos) == (
        "envjob",
        "gpu",
        1800,
        "proj",
        "high",
    )
    assert (opts.mem_mb, opts.gres, opts.export, opts.array) == (2048, "gpu:1", "NONE", "0-3")
    assert (opts.requeue, opts.wait, opts.verbose) == (True, True, 2)
    assert opts.nodes_min is None and opts.ntasks is None


def test_srun_reads_allocation_variables_but_not_slurm_nnodes() -> None:
    env = {"SLURM_NTASKS": "4", "SLURM_NNODES": "9", "SLURM_JOB_ID": "77", "SLURM_CPUS_PER_TASK": "2"}
    opts = options_from_env(env, command="srun")
    assert (opts.ntasks, opts.jobid, opts.cpus_per_task, opts.nodes_min) == (4, 77, 2, None)
    opts = options_from_env({"SLURM_JOB_NUM_NODES": "3", "SLURM_LABELIO": "1"}, command="srun")
    assert (opts.nodes_min, opts.label) == (3, True)


def test_srun_export_env_overrides_slurm_export_env() -> None:
    opts = options_from_env({"SLURM_EXPORT_ENV": "NONE", "SRUN_EXPORT_ENV": "ALL"}, command="srun")
    assert opts.export == "ALL"


def test_salloc_environment() -> None:
    opts = options_from_env({"SALLOC_PARTITION": "debug", "SALLOC_TIMELIMIT": "5"}, command="salloc")
    assert (opts.partition, opts.time_limit) == ("debug", 300)


def test_bad_environment_value_is_said_as_on_the_command_line() -> None:
    with pytest.raises(JobOptionError) as exc:
        options_from_env({"SBATCH_TIMELIMIT": "soon"})
    assert str(exc.value) == "sbatch: error: Invalid --time specification"  # Slurm's: no value, no variable


# ---- precedence ----------------------------------------------------------------------------------


def test_precedence_cli_over_env_over_script() -> None:
    script = parse_script_options(["-J", "script", "-p", "s", "-t", "10", "-A", "sa"])
    env = options_from_env({"SBATCH_PARTITION": "e", "SBATCH_TIMELIMIT": "20"})
    cli, _ = parse_job_options(["-t", "30"])
    merged = merge_options(script, env, cli)
    assert (merged.job_name, merged.partition, merged.time_limit, merged.account) == (
        "script",
        "e",
        1800,
        "sa",
    )


def test_merge_treats_nodes_and_memory_as_groups() -> None:
    script = parse_script_options(["-N", "2-4", "--mem-per-cpu=100"])
    cli, _ = parse_job_options(["-N", "3", "--mem=1G"])
    merged = merge_options(script, cli)
    assert (merged.nodes_min, merged.nodes_max) == (3, 3)
    assert (merged.mem_mb, merged.mem_per_cpu_mb) == (1024, None)
    assert merge_options(cli, JobOptions()) == cli
    assert merge_options() == JobOptions()


def test_merge_keeps_false_values() -> None:
    merged = merge_options(parse_job_options(["--requeue"])[0], parse_job_options(["--no-requeue"])[0])
    assert merged.requeue is False


# ---- array / dependency / signal / export ----------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "ids", "limit"),
    [
        ("1-5", [1, 2, 3, 4, 5], None),
        ("1,3,5", [1, 3, 5], None),
        ("0-15:4", [0, 4, 8, 12], None),
        ("1-20%4", list(range(1, 21)), 4),
        ("7", [7], None),
        ("3,1-2,2", [1, 2, 3], None),
        ("0-10:5,20%1", [0, 5, 10, 20], 1),
    ],
)
def test_parse_array_spec(spec: str, ids: list[int], limit: int | None) -> None:
    assert parse_array_spec(spec) == (ids, limit)


@pytest.mark.parametrize(
    "spec", ["", "5-1", "1-5:0", "a", "1-5%0", "1-5%", "1,,2", "-1", "0-99999999999", "1-5000000"]
)
def test_bad_array_specs(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_array_spec(spec)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("afterok:123", Dependency((DependencyCondition("afterok", (DependencyTarget(123),)),))),
        (
            "afterok:1:2_3,afterany:4",
            Dependency(
                (
                    DependencyCondition("afterok", (DependencyTarget(1), DependencyTarget(2, 3))),
                    DependencyCondition("afterany", (DependencyTarget(4),)),
                )
            ),
        ),
        (
            "after:5+10?afternotok:6",
            Dependency(
                (
                    DependencyCondition("after", (DependencyTarget(5, None, 10),)),
                    DependencyCondition("afternotok", (DependencyTarget(6),)),
                ),
                any_of=True,
            ),
        ),
        ("singleton", Dependency((DependencyCondition("singleton"),))),
        ("aftercorr:9_1", Dependency((DependencyCondition("aftercorr", (DependencyTarget(9, 1),)),))),
    ],
)
def test_parse_dependency(spec: str, expected: Dependency) -> None:
    assert parse_dependency(spec) == expected


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "afterok",
        "afterok:",
        "afterok:x",
        "before:1",
        "afterok:1,afterany:2?after:3",
        "singleton:1",
        "afterok:1+5",
        "afterok:0",
        "afterok:1::2",
    ],
)
def test_bad_dependencies(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_dependency(spec)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("USR1", SignalSpec(int(signal.SIGUSR1))),
        ("SIGTERM@120", SignalSpec(int(signal.SIGTERM), 120)),
        ("B:10@30", SignalSpec(10, 30, batch_only=True)),
        ("R:INT", SignalSpec(int(signal.SIGINT), reservation=True)),
        ("RB:usr2@0", SignalSpec(int(signal.SIGUSR2), 0, True, True)),
    ],
)
def test_parse_signal_spec(spec: str, expected: SignalSpec) -> None:
    assert parse_signal_spec(spec) == expected


@pytest.mark.parametrize("spec", ["", "FOO", "0", "65", "USR1@", "USR1@99999", "X:USR1", "USR1@-1"])
def test_bad_signal_specs(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_signal_spec(spec)


ENV = {"HOME": "/home/a", "PATH": "/bin", "SLURM_CONF": "/etc/slurm.conf", "EDITOR": "vi"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, ENV),
        ("ALL", ENV),
        ("all", ENV),
        ("NONE", {"SLURM_CONF": "/etc/slurm.conf"}),
        ("EDITOR,ARG1=test", {"EDITOR": "vi", "ARG1": "test", "SLURM_CONF": "/etc/slurm.conf"}),
        ("ALL,EDITOR=emacs", {**ENV, "EDITOR": "emacs"}),
        ("MISSING,X=1", {"X": "1", "SLURM_CONF": "/etc/slurm.conf"}),
        ('X="a,b",Y=2', {"X": "a,b", "Y": "2", "SLURM_CONF": "/etc/slurm.conf"}),
    ],
)
def test_export_environment(spec: str | None, expected: dict[str, str]) -> None:
    assert export_environment(spec, ENV) == expected


def test_parse_export_modes() -> None:
    assert parse_export("ALL") == ("ALL", [])
    assert parse_export("NONE") == ("NONE", [])
    assert parse_export("ALL,A,B=1") == ("LIST", [("ALL", None), ("A", None), ("B", "1")])
    for bad in ("", "=x", "A,1B=2", 'X="unterminated'):
        with pytest.raises(ValueError):
            parse_export(bad)


# ---- JobSpec -------------------------------------------------------------------------------------


def test_build_job_spec_from_all_layers() -> None:
    script = (
        "#!/bin/bash\n#SBATCH -J train -N 2 --ntasks-per-node=4 -c 8\n#SBATCH --mem=64G --gres=gpu:a100:4,shard:2\n"
        "#SBATCH -o logs/%x-%j.out -w gpu[01-02] -x gpu03 -C 'a100&ib' --exclusive\nsrun python train.py\n"
    )
    env = {"HOME": "/home/a", "SBATCH_PARTITION": "gpu", "SBATCH_ACCOUNT": "ml", "SLURM_CONF": "/c"}
    cli, rest = parse_job_options(["--time=2:00:00", "--nice=10", "--hold", "--comment=c", "job.sh", "arg1"])
    opts = merge_options(parse_script_options(parse_sbatch_directives(script)), options_from_env(env), cli)
    spec = build_job_spec(
        opts, script=script, argv=rest[1:], cwd="/home/a/proj", environ=env, script_path=rest[0]
    )
    assert spec == JobSpec(
        name="train",
        script=script,
        argv=["arg1"],
        work_dir="/home/a/proj",
        stdout_pattern="logs/%x-%j.out",
        environment={**env, "SLURM_CPUS_PER_TASK": "8"},  # -c travels in the environment too
        partition="gpu",
        num_nodes=2,
        cpus_per_task=8,
        mem_per_node_mb=65536,
        gres=["gpu:a100:4", "shard:2"],
        time_limit_secs=7200,
        account="ml",
        nice=10,
        nodelist=["gpu01", "gpu02"],
        exclude=["gpu03"],
        exclusive=True,
        ntasks_per_node=4,
        hold=True,
        comment="c",
        constraint=["a100", "ib"],
    )
    assert spec.tasks == 8


def test_build_job_spec_defaults_and_derived_fields() -> None:
    opts, rest = parse_job_options(
        [
            "-D",
            "../out",
            "--export=NONE",
            "-G",
            "a100:3",
            "--gpus-per-node=2",
            "--gres=gpu:1,shard:1",
            "--mem-per-cpu=100",
            "-t",
            "infinite",
            "-w",
            "n[1-3],n1",
            "-C",
            "a|b",
            "run.sh",
        ]
    )
    spec = build_job_spec(
        opts, script="#!/bin/sh\n", argv=rest[1:], cwd="/home/a/proj", environ=ENV, script_path=rest[0]
    )
    assert spec.name == "run.sh"
    assert spec.work_dir == "/home/a/out"
    assert spec.environment == {
        "SLURM_CONF": "/etc/slurm.conf",
        "SLURM_EXPORT_ENV": "NONE",
    }  # as Slurm's sbatch
    assert spec.gpus_total == 3
    assert spec.gres == ["shard:1", "gpu:2"]
    assert spec.mem_per_cpu_mb == 100 and spec.mem_per_node_mb == 0
    assert spec.time_limit_secs == UNLIMITED
    assert spec.nodelist == ["n1", "n2", "n3", "n1"]
    assert spec.num_nodes == 3  # distinct nodes named by -w when -N is absent
    assert spec.constraint == ["a|b"]
    assert (spec.cpus_per_task, spec.num_tasks, spec.stdout_pattern, spec.interactive) == (1, 0, "", False)


@pytest.mark.parametrize(
    ("args", "command", "script_path", "name"),
    [
        ([], "sbatch", None, ""),  # unknown script path: the caller names it ("sbatch" for stdin)
        (["--wrap=hostname"], "sbatch", None, "wrap"),
        (["x", "y"], "sbatch", "/path/to/job.sh", "job.sh"),  # not the first script argument
        (["-J", "named", "x"], "sbatch", "/path/to/job.sh", "named"),
        (["/usr/bin/hostname", "-s"], "srun", None, "hostname"),
        ([], "salloc", None, "salloc"),
    ],
)
def test_default_job_names(args: list[str], command: str, script_path: str | None, name: str) -> None:
    opts, rest = parse_job_options(args, command=command)
    spec = build_job_spec(
        opts, script="", argv=rest, cwd="/", environ={}, command=command, script_path=script_path
    )
    assert spec.name == name
    assert spec.argv == rest
    assert spec.time_limit_secs == 0
    assert spec.interactive == (command != "sbatch")


# ---- issue 3: every sbatch option reaches the JobSpec ---------------------------------------------


def test_build_job_spec_fills_array_dependency_and_control_fields() -> None:
    opts, _ = parse_job_options(
        [
            "--array=0-19%4",
            "--dependency=afterok:12:13",
            "--begin=now+1hour",
            "--no-requeue",
            "--signal=B:USR1@90",
            "--open-mode=append",
            "--qos=high",
            "--wckey=proj",
            "--gpus-per-task=2",
            "--kill-on-invalid-dep=yes",
            "--ntasks-per-gpu=3",
            "--hold",
        ]
    )
    spec = build_job_spec(opts, script="#!/bin/sh\n", argv=[], cwd="/w", environ={}, now=1_700_000_000.0)
    assert (spec.array, spec.dependency, spec.begin_time) == ("0-19%4", "afterok:12:13", 1_700_003_600.0)
    assert (spec.no_requeue, spec.signal, spec.open_mode) == (True, "B:USR1@90", "append")
    assert (spec.qos, spec.wckey, spec.gpus_per_task) == ("high", "proj", 2)
    assert (spec.kill_on_invalid_dep, spec.ntasks_per_gpu, spec.hold) == (True, 3, True)
    assert spec.allocation_only is False


def test_requeue_defaults_and_salloc_allocation_only() -> None:
    spec = build_job_spec(parse_job_options(["--requeue"])[0], script="", argv=[], cwd="/w", environ={})
    assert spec.no_requeue is False and spec.begin_time == 0.0
    salloc_opts, _ = parse_job_options(["-N2"], command="salloc")
    salloc = build_job_spec(salloc_opts, script="", argv=[], cwd="/w", environ={}, command="salloc")
    assert salloc.allocation_only and salloc.interactive


@pytest.mark.parametrize(("text", "mb"), [("2GB", 2048), ("512MB", 512), ("1gb", 1024), ("4G", 4096)])
def test_memory_accepts_unit_with_b_suffix(text: str, mb: int) -> None:
    opts, _ = parse_job_options([f"--mem={text}"])
    assert opts.mem_mb == mb


def test_memory_rejects_bare_b_suffix() -> None:
    with pytest.raises(JobOptionError, match="Invalid --mem specification"):
        parse_job_options(["--mem=12B"])


def test_wckey_from_environment() -> None:
    assert options_from_env({"SBATCH_WCKEY": "w1"}).wckey == "w1"


# ---- --uid / --gid: root only (Slurm's slurm_opt.c arg_set_uid / arg_set_gid) -----------------------


@pytest.mark.parametrize("command", ["sbatch", "salloc", "srun"])
@pytest.mark.parametrize("option", ["uid", "gid"])
def test_uid_gid_only_permitted_by_root(command: str, option: str) -> None:
    opts, _ = parse_job_options([f"--{option}=0", "x"], command=command)
    with pytest.raises(JobOptionError) as exc:
        check_root_only(opts, real_uid=1000, command=command)
    assert str(exc.value) == f"{command}: error: --{option} only permitted by root user"
    check_root_only(opts, real_uid=0, command=command)  # root may


def test_uid_from_a_directive_is_refused_too() -> None:
    directives = parse_script_options(parse_sbatch_directives("#!/bin/sh\n#SBATCH --uid=root\ntrue\n"))
    with pytest.raises(JobOptionError, match="--uid only permitted by root user"):
        check_root_only(merge_options(directives, JobOptions()), real_uid=1000, command="sbatch")
    check_root_only(JobOptions(), real_uid=1000, command="sbatch")  # nothing given: nothing refused
