"""scontrol job control against real processes: time limits, hold/release, suspend/resume, requeue."""

from __future__ import annotations

from pathlib import Path

from integration.harness import Cluster, wait_for
from spur.rpc.proto import spur_pb2 as pb


def _proc_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_lowering_a_running_jobs_time_limit_takes_effect(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1")
    cluster.wait_nodes("node1")
    job_id = int(
        cluster.cli("sbatch", "--parsable", "-t", "10", "--wrap", "exec sleep 300", cwd=tmp_path).stdout
    )
    running = cluster.wait_job(job_id, "RUNNING")
    wait_for(lambda: cluster.job(job_id).spec.name and running, what="job start")
    cluster.call("UpdateJob", pb.UpdateJobRequest(job_id=job_id, time_limit_secs=3))
    job = cluster.wait_job(job_id, "TIMEOUT", timeout=30)
    assert job.time_limit_secs == 3
    assert job.end_time - job.start_time < 20


def test_hold_and_release(cluster: Cluster, tmp_path: Path):
    job_id = cluster.cli("sbatch", "--parsable", "--hold", "--wrap", "true", cwd=tmp_path).stdout.strip()
    assert cluster.cli("squeue", "-h", "-j", job_id, "-o", "%t %r").stdout.split() == ["PD", "JobHeldUser"]
    cluster.start_agent("node1")
    cluster.wait_nodes("node1")
    assert cluster.job(int(job_id)).state == "PENDING"
    cluster.cli("scontrol", "release", job_id)
    cluster.wait_job(int(job_id), "COMPLETED")


def test_suspend_stops_the_processes_and_resume_continues_them(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1")
    cluster.wait_nodes("node1")
    pidfile = tmp_path / "pid"
    job_id = cluster.cli(
        "sbatch", "--parsable", "--wrap", f"sleep 300 & echo $! > {pidfile}; wait", cwd=tmp_path
    ).stdout.strip()
    pid = int(wait_for(lambda: pidfile.read_text().strip(), what="job pid"))
    cluster.cli("scontrol", "suspend", job_id)
    assert cluster.job(int(job_id)).state == "SUSPENDED"
    wait_for(lambda: _proc_state(pid) == "T", what="the job's process to stop")
    assert cluster.cli("squeue", "-h", "-j", job_id, "-o", "%t").stdout.strip() == "S"
    cluster.cli("scontrol", "resume", job_id)
    wait_for(lambda: _proc_state(pid) in ("S", "R"), what="the job's process to continue")
    assert cluster.job(int(job_id)).state == "RUNNING"
    cluster.cli("scancel", job_id)
    cluster.wait_job(int(job_id), "CANCELLED")


def test_requeue_runs_the_job_again(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1")
    cluster.wait_nodes("node1")
    runs = tmp_path / "runs"
    go = tmp_path / "go"
    script = f"echo run >> {runs}; while [ ! -e {go} ]; do sleep 0.1; done"
    job_id = cluster.cli("sbatch", "--parsable", "--wrap", script, cwd=tmp_path).stdout.strip()
    wait_for(lambda: runs.exists() and runs.read_text() == "run\n", what="first run")
    cluster.cli("scontrol", "requeue", job_id)
    wait_for(lambda: runs.read_text() == "run\nrun\n", timeout=40, what="second run after requeue")
    go.touch()
    job = cluster.wait_job(int(job_id), "COMPLETED")
    assert job.restarts == 1
