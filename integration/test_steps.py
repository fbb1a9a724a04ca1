"""Job steps end to end: srun inside sbatch and salloc, with real spurctld/spurd processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

from integration.harness import BIN, Cluster, wait_for

STEPS_SCRIPT = """#!/bin/bash
#SBATCH -n 2
#SBATCH -o batch-%j.out
srun -l sh -c 'echo rank=$SLURM_PROCID step=$SLURM_STEP_ID ntasks=$SLURM_NTASKS'
srun -n1 --output step-%j-%s-%t.out sh -c 'echo to-file $SLURM_STEP_ID'
srun -n1 sh -c 'exit 3'
echo srun-rc=$?
"""


def test_srun_in_sbatch_runs_steps(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1", cpus=2)
    cluster.wait_nodes("node1")
    (tmp_path / "steps.sh").write_text(STEPS_SCRIPT)
    job_id = int(cluster.cli("sbatch", "--parsable", "steps.sh", cwd=tmp_path).stdout.strip())
    job = cluster.wait_job(job_id, "COMPLETED", "FAILED", timeout=60)
    out = (tmp_path / f"batch-{job_id}.out").read_text()
    assert job.state == "COMPLETED", out
    lines = out.splitlines()
    assert sorted(line for line in lines if "rank=" in line) == [
        "0: rank=0 step=0 ntasks=2",
        "1: rank=1 step=0 ntasks=2",
    ]
    assert "srun-rc=3" in lines
    assert (tmp_path / f"step-{job_id}-1-0.out").read_text() == "to-file 1\n"
    steps = {s.step_id: s for s in cluster.job(job_id).steps}
    assert sorted(steps) == [0, 1, 2]
    assert steps[2].exit_code == 3


def test_salloc_runs_command_with_steps_and_returns_its_exit_code(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1", cpus=2)
    cluster.wait_nodes("node1")
    proc = cluster.cli(
        "salloc",
        "-N1",
        "sh",
        "-c",
        "srun echo in-step; srun -l echo again; exit 3",
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "in-step\n0: again\n"
    granted = [
        line for line in proc.stderr.splitlines() if line.startswith("salloc: Granted job allocation ")
    ]
    assert len(granted) == 1, proc.stderr
    job_id = int(granted[0].rsplit(" ", 1)[1])
    assert f"salloc: Relinquishing job allocation {job_id}" in proc.stderr
    job = cluster.wait_job(job_id, "FAILED", timeout=30)
    assert job.exit_code == 3
    assert [s.step_id for s in job.steps] == [0, 1]


def test_scancel_of_the_job_ends_a_running_step(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1", cpus=2)
    cluster.wait_nodes("node1")
    marker = tmp_path / "step-started"
    script = f"#!/bin/sh\nsrun sh -c 'touch {marker}; exec sleep 300'\necho after-srun=$?\n"
    job_id = int(cluster.cli("sbatch", "--parsable", "--wrap", script, cwd=tmp_path).stdout.strip())
    wait_for(marker.exists, timeout=30, what="the step to start")
    cluster.cli("scancel", str(job_id))
    job = cluster.wait_job(job_id, "CANCELLED", timeout=30)
    assert job.state == "CANCELLED"
    wait_for(
        lambda: all(s.state != "RUNNING" for s in cluster.job(job_id).steps), timeout=30, what="step end"
    )


def test_scancel_of_a_step_ends_that_step_only(cluster: Cluster, tmp_path: Path):
    """``scancel <job>.<step>`` cancels the step (srun ends 128+SIGTERM); the batch script goes on."""
    cluster.start_agent("node1", cpus=2)
    cluster.wait_nodes("node1")
    started, out = tmp_path / "step-started", tmp_path / "steps.out"
    script = f"#!/bin/sh\nsrun sh -c 'touch {started}; exec sleep 300'\necho srun=$?\nexit 4\n"
    job_id = int(cluster.cli("sbatch", "--parsable", "-o", str(out), "--wrap", script, cwd=tmp_path).stdout)
    wait_for(started.exists, timeout=30, what="the step to start")
    cluster.cli("scancel", f"{job_id}.7")  # no such step: nothing happens (an unknown id is no error)
    assert [(s.step_id, s.state) for s in cluster.job(job_id).steps] == [(0, "RUNNING")]
    cluster.cli("scancel", f"{job_id}.0")
    job = cluster.wait_job(job_id, "FAILED", timeout=30)
    assert job.exit_code == 4 and "srun=143" in out.read_text()
    assert [(s.step_id, s.state) for s in job.steps] == [(0, "CANCELLED")]


def test_srun_with_jobid_outside_the_allocation(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1", cpus=2)
    cluster.wait_nodes("node1")
    marker = tmp_path / "started"
    job_id = int(
        cluster.cli("sbatch", "--parsable", "--wrap", f"touch {marker}; exec sleep 300", cwd=tmp_path).stdout
    )
    wait_for(marker.exists, timeout=30, what="the batch job to start")
    env = {k: v for k, v in cluster.env.items() if not k.startswith("SLURM_")}
    proc = subprocess.run(
        [str(BIN / "srun"), f"--jobid={job_id}", "--overlap", "sh", "-c", "echo attached $SLURM_JOB_ID"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"attached {job_id}\n"
    cluster.cli("scancel", str(job_id))
