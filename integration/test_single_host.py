"""End to end on one host: real spurctld + spurd processes, driven through the CLI and gRPC."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

from integration.harness import BIN, Cluster, free_port, wait_for

HELLO = """#!/bin/bash
#SBATCH -J hello
#SBATCH -o %x-%j.out
echo "hello from $SLURM_JOB_ID on $SLURM_NODELIST ntasks=$SLURM_NTASKS cpus=$SLURM_CPUS_ON_NODE"
echo "spur job $SPUR_JOB_ID submitted from $SLURM_SUBMIT_DIR"
"""


def test_submit_runs_and_writes_output(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1")
    cluster.wait_nodes("node1")
    (tmp_path / "hello.sh").write_text(HELLO)
    out = cluster.cli("sbatch", "hello.sh", cwd=tmp_path)
    assert out.stdout == "Submitted batch job 1\n"
    job = cluster.wait_job(1, "COMPLETED")
    assert job.exit_code == 0
    text = wait_for(lambda: (tmp_path / "hello-1.out").read_text(), what="output file")
    # no task count asked: SLURM_NTASKS is unset, as in Slurm
    assert text == f"hello from 1 on node1 ntasks= cpus=1\nspur job 1 submitted from {tmp_path}\n"
    show = cluster.cli("scontrol", "show", "job", "1").stdout
    assert "JobState=COMPLETED" in show and "ExitCode=0:0" in show and "JobName=hello" in show


def test_failing_job_reports_exit_code(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1")
    cluster.wait_nodes("node1")
    out = cluster.cli("sbatch", "--parsable", "--wrap", "echo oops >&2; exit 3", cwd=tmp_path)
    job_id = int(out.stdout.strip())
    job = cluster.wait_job(job_id, "FAILED")
    assert job.exit_code == 3
    assert (tmp_path / f"slurm-{job_id}.out").read_text() == "oops\n"
    assert "ExitCode=3:0" in cluster.cli("scontrol", "show", "job", str(job_id)).stdout


def test_squeue_and_sinfo_show_running_job_then_cancel(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1", cpus=2)
    cluster.wait_nodes("node1")
    marker = tmp_path / "started"
    job_id = int(
        cluster.cli(
            "sbatch", "--parsable", "-J", "sleeper", "--wrap", f"touch {marker}; exec sleep 300", cwd=tmp_path
        ).stdout
    )
    wait_for(marker.exists, what="job to start")
    queue = cluster.cli("squeue").stdout.splitlines()
    assert queue[0] == "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
    fields = queue[1].split()
    assert fields[0] == str(job_id) and fields[2] == "sleeper" and fields[4] == "R" and fields[-1] == "node1"
    sinfo = cluster.cli("sinfo").stdout.splitlines()
    assert sinfo[0] == "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST"
    assert sinfo[1].split() == ["default*", "up", "infinite", "1", "mix", "node1"]

    cluster.cli("scancel", str(job_id))
    job = cluster.wait_job(job_id, "CANCELLED")
    assert job.end_time > 0
    assert cluster.cli("squeue", "-h").stdout == ""
    cluster.wait_nodes("node1", state="idle")


def test_time_limit_gives_timeout(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1")
    cluster.wait_nodes("node1")
    job_id = cluster.submit_spec(script="#!/bin/sh\necho start\nexec sleep 300\n", time_limit_secs=2)
    job = cluster.wait_job(job_id, "TIMEOUT", timeout=30)
    assert job.end_time - job.start_time >= 2
    assert (tmp_path / f"slurm-{job_id}.out").read_text() == "start\n"


def test_two_node_job_gets_both_nodes(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1")
    cluster.start_agent("node2")
    cluster.wait_nodes("node1", "node2")
    job_id = int(
        cluster.cli(
            "sbatch",
            "--parsable",
            "-N2",
            "--wrap",
            "echo $SLURM_JOB_NODELIST $SLURM_NNODES; sleep 1",
            cwd=tmp_path,
        ).stdout
    )
    running = cluster.wait_job(job_id, "RUNNING", "COMPLETED")
    assert sorted(a.node for a in running.allocation) == ["node1", "node2"]
    cluster.wait_job(job_id, "COMPLETED")
    assert (tmp_path / f"slurm-{job_id}.out").read_text() == "node[1-2] 2\n"


def test_srun_streams_output_and_exit_code(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1")
    cluster.wait_nodes("node1")
    out = cluster.cli("spur", "run", "--", "hostname")
    assert out.stdout == socket.gethostname() + "\n"
    failing = cluster.cli("srun", "-n2", "sh", "-c", "echo task $SLURM_PROCID; exit 7", check=False)
    assert failing.returncode == 7
    assert sorted(failing.stdout.splitlines()) == ["task 0", "task 1"]


def test_drain_and_resume_node(cluster: Cluster):
    cluster.start_agent("node1")
    cluster.wait_nodes("node1")
    refused = cluster.cli("scontrol", "update", "NodeName=node1", "State=DRAIN", check=False)
    assert refused.returncode == 1 and "reason" in refused.stderr.lower()
    cluster.cli("scontrol", "update", "NodeName=node1", "State=DRAIN", "Reason=maintenance")
    cluster.wait_nodes("node1", state="drained")
    assert "Reason=maintenance" in cluster.cli("scontrol", "show", "node", "node1").stdout
    job_id = int(cluster.cli("sbatch", "--parsable", "--wrap", "true").stdout)
    assert cluster.job(job_id).state == "PENDING"
    cluster.cli("scontrol", "update", "NodeName=node1", "State=RESUME")
    cluster.wait_job(job_id, "COMPLETED")


def test_controller_kill9_restart_loses_no_job(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1", cpus=1)
    cluster.wait_nodes("node1")
    ids = [
        int(cluster.cli("sbatch", "--parsable", "--wrap", "sleep 0.2", cwd=tmp_path).stdout) for _ in range(8)
    ]
    assert ids == list(range(1, 9))
    cluster.controller.kill(signal.SIGKILL)
    cluster.start_controller()
    jobs = cluster.jobs(*ids)
    assert sorted(jobs) == ids
    for job_id in ids:
        cluster.wait_job(job_id, "COMPLETED", timeout=60)
    assert int(cluster.cli("sbatch", "--parsable", "--wrap", "true").stdout) == 9


def test_agent_restart_readopts_running_job(cluster: Cluster, tmp_path: Path):
    agent = cluster.start_agent("node1")
    cluster.wait_nodes("node1")
    go = tmp_path / "go"
    started = tmp_path / "started"
    script = f"touch {started}; while [ ! -e {go} ]; do sleep 0.1; done; echo finished"
    job_id = int(cluster.cli("sbatch", "--parsable", "--wrap", script, cwd=tmp_path).stdout)
    wait_for(started.exists, what="job start")
    agent.kill(signal.SIGKILL)
    cluster.start_agent("node1")
    wait_for(lambda: "adopt" in cluster.agents["node1"].log().lower(), what="agent to re-adopt the job")
    assert cluster.job(job_id).state == "RUNNING"
    go.touch()
    job = cluster.wait_job(job_id, "COMPLETED")
    assert job.exit_code == 0
    assert (tmp_path / f"slurm-{job_id}.out").read_text() == "finished\n"


def test_node_goes_down_after_missed_heartbeats(cluster: Cluster):
    agent = cluster.start_agent("node1")
    cluster.wait_nodes("node1")
    agent.kill(signal.SIGSTOP)
    try:
        cluster.wait_nodes("node1", state="down", timeout=30)
        assert "down*" in cluster.cli("sinfo", "-h").stdout
    finally:
        agent.kill(signal.SIGCONT)
    cluster.wait_nodes("node1", state="idle", timeout=30)


def test_bad_batch_script_is_rejected_clearly(cluster: Cluster, tmp_path: Path):
    (tmp_path / "bad.sh").write_text("echo no shebang\n")
    out = cluster.cli("sbatch", "bad.sh", cwd=tmp_path, check=False)
    assert out.returncode != 0
    assert "line must start with #! followed by the path to an interpreter" in out.stderr
    bogus = cluster.cli("sbatch", "--bogus", "x.sh", check=False)
    assert bogus.returncode == 255
    assert bogus.stderr.startswith("sbatch: unrecognized option '--bogus'")
    missing = cluster.cli("sbatch", "nope.sh", cwd=tmp_path, check=False)
    assert missing.returncode == 1 and "nope.sh" in missing.stderr
    assert cluster.jobs() == {}


def test_bad_config_fails_fast_naming_the_key(tmp_path: Path):
    conf = tmp_path / "spur.conf"
    conf.write_text('[scheduler]\ninterval_secs = "soon"\n')
    out = subprocess.run(
        [str(BIN / "spurctld"), "-D", "-f", str(conf), "--state-dir", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 78  # spur.startup.EXIT_CONFIG, the same in every daemon
    assert "scheduler.interval_secs" in out.stderr and "soon" in out.stderr and str(conf) in out.stderr


def test_missing_scheduler_plugin_names_the_package(tmp_path: Path):
    conf = tmp_path / "spur.conf"
    conf.write_text('[scheduler]\nplugin = "fancy"\n')
    out = subprocess.run(
        [
            str(BIN / "spurctld"),
            "-D",
            "-f",
            str(conf),
            "--state-dir",
            str(tmp_path / "s"),
            "--listen",
            f"127.0.0.1:{free_port()}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 78  # a config naming a plugin that is not installed: EXIT_CONFIG
    assert "pip install spur-sched-fancy" in out.stderr


def test_cli_without_controller_says_so(tmp_path: Path):
    env = dict(os.environ, SPUR_CONTROLLER=f"127.0.0.1:{free_port()}")
    out = subprocess.run([str(BIN / "squeue")], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 1
    assert "Unable to contact" in out.stderr
