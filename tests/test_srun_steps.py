"""srun inside an allocation and salloc: option handling and environments (no cluster needed)."""

from __future__ import annotations

import pytest

from spur.cli import salloc, srun
from spur.cli.client import CliError
from spur.rpc.proto import spur_pb2 as pb

BATCH_ENV = {
    "SLURM_JOB_ID": "42",
    "SLURM_JOB_NAME": "train",
    "SLURM_NTASKS": "4",
    "SLURM_JOB_NUM_NODES": "2",
    "PATH": "/usr/bin:/bin",
    "MYVAR": "x",
}


def test_srun_sees_the_allocation_from_env_or_jobid() -> None:
    assert srun.step_job_id(["hostname"], BATCH_ENV) == 42
    assert srun.step_job_id(["--jobid=7", "hostname"], {}) == 7
    assert srun.step_job_id(["hostname"], {"PATH": "/bin"}) is None


def test_step_spec_from_submitit_style_options() -> None:
    argv = [
        "--unbuffered",
        "--output",
        "/logs/%j_%t_log.out",
        "--error",
        "/logs/%j_%t_log.err",
        "python",
        "-u",
        "x.py",
    ]
    spec, _opts = srun.prepare_step(argv, BATCH_ENV, "/work")
    assert list(spec.argv) == ["python", "-u", "x.py"]
    assert spec.name == "python"  # SLURM_JOB_NAME names the job, not its steps
    assert (spec.stdout_pattern, spec.stderr_pattern) == ("/logs/%j_%t_log.out", "/logs/%j_%t_log.err")
    assert spec.unbuffered and not spec.label
    assert spec.num_tasks == 4 and spec.num_nodes == 2  # srun inherits the allocation's layout
    assert spec.work_dir == "/work"
    assert spec.environment["MYVAR"] == "x"


def test_step_spec_explicit_layout() -> None:
    argv = ["-n1", "-c2", "-l", "--overlap", "-J", "probe", "-w", "n[1-2]", "-o", "none", "hostname"]
    spec, _opts = srun.prepare_step(argv, BATCH_ENV, "/work")
    assert spec.num_tasks == 1
    assert spec.num_nodes == 0  # 2 nodes came from the environment but only 1 task is wanted
    assert spec.cpus_per_task == 2 and spec.label and spec.overlap and spec.name == "probe"
    assert list(spec.nodelist) == ["n1", "n2"]
    assert spec.stdout_pattern == "/dev/null"


def test_step_without_command_is_an_error() -> None:
    with pytest.raises(CliError, match="No command given"):
        srun.prepare_step(["-n2"], BATCH_ENV, "/work")


def test_label_prefixes_whole_lines_across_chunks(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    writer = srun.OutputWriter(label=True)
    writer.write(0, "stdout", b"hel")
    writer.write(1, "stdout", b"one\ntw")
    writer.write(0, "stdout", b"lo\n")
    writer.write(1, "stderr", b"err\n")
    writer.close()
    out, err = capsysbinary.readouterr()
    assert out == b"1: one\n0: hello\n1: tw\n"
    assert err == b"1: err\n"


def test_salloc_spec_is_allocation_only() -> None:
    spec, opts, command = salloc.prepare(
        ["-N2", "-n4", "-t", "10", "--signal=B:USR1@30"], {"SHELL": "/bin/bash", "HOME": "/h"}, "/work"
    )
    assert command == ["/bin/bash"]
    assert spec.allocation_only and spec.interactive and spec.argv == []
    assert (spec.num_nodes, spec.num_tasks, spec.time_limit_secs) == (2, 4, 600)
    assert spec.signal == "B:USR1@30"
    assert spec.name == "bash"
    _spec, _opts, command = salloc.prepare(["sh", "-c", "exit 3"], {}, "/work")
    assert command == ["sh", "-c", "exit 3"]


def test_submitting_session_and_command_line_are_recorded() -> None:
    # Slurm's AllocSID is the submitting shell's session; sacct's SubmitLine the words as typed.
    import os

    from spur.cli import sbatch, srun

    argv = ["-n", "1", "--wrap", "echo a  b"]
    spec, _opts = sbatch.prepare(argv, {}, "/work")
    assert (spec.alloc_sid, spec.submit_line) == (os.getsid(0), "sbatch -n 1 --wrap echo a  b")
    spec, _opts = srun.prepare(["-N1", "hostname"], {}, "/work")
    assert (spec.alloc_sid, spec.submit_line) == (os.getsid(0), "srun -N1 hostname")
    spec, _opts, _command = salloc.prepare(["-t", "5"], {"SHELL": "/bin/sh"}, "/work")
    assert (spec.alloc_sid, spec.submit_line) == (os.getsid(0), "salloc -t 5")


def test_salloc_environment() -> None:
    job = pb.JobInfo(
        job_id=9,
        partition="debug",
        nodelist="n[1-2]",
        spec=pb.JobSpec(
            name="bash", work_dir="/work", num_tasks=3, environment={"SLURM_SUBMIT_HOST": "login"}
        ),
        allocation=[
            pb.NodeAllocation(node="n1", cpus=4, tasks=2),
            pb.NodeAllocation(node="n2", cpus=4, tasks=1),
        ],
    )
    env = salloc.allocation_environment(job, {"HOME": "/h"}, ntasks_given=True)
    assert env["HOME"] == "/h"
    expected = {
        "SLURM_JOB_ID": "9",
        "SLURM_JOB_NODELIST": "n[1-2]",
        "SLURM_NNODES": "2",
        "SLURM_NTASKS": "3",
        "SLURM_TASKS_PER_NODE": "2,1",
        "SLURM_JOB_CPUS_PER_NODE": "4(x2)",
        "SLURM_SUBMIT_DIR": "/work",
        "SLURM_SUBMIT_HOST": "login",
        "SLURM_JOB_PARTITION": "debug",
        "SPUR_JOB_ID": "9",
    }
    assert {k: env.get(k) for k in expected} == expected
    assert "SLURM_NTASKS" not in salloc.allocation_environment(job, {}, ntasks_given=False)


def test_failed_tasks_are_named_one_line_per_way_they_ended_as_slurm_does() -> None:
    from spur.cli.srun import task_failure_lines

    assert task_failure_lines("n1", [(0, 3, 0), (1, 0, 0)]) == [
        "srun: error: n1: task 0: Exited with exit code 3"
    ]
    assert task_failure_lines("n2", [(5, 0, 9), (2, 0, 9), (4, 0, 0), (3, 0, 9), (6, 5, 0)]) == [
        "srun: error: n2: tasks 2-3,5: Killed",
        "srun: error: n2: task 6: Exited with exit code 5",
    ]
    assert task_failure_lines("n3", [(0, 0, 0)]) == []
