"""Immediate grant against real spurctld/spurd processes: a job that fits an idle node starts in its own
submit entry (its StartTime is its SubmitTime, stamped by the one command), srun and salloc say what
Slurm says then, a job behind a runnable higher-priority one is not granted ahead of it, and the
replicas of an HA group agree on all of it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from integration.conftest import _cleanup_jobs
from integration.harness import BIN, Cluster, wait_for

pytestmark = pytest.mark.integration


def _sbatch(c: Cluster, *args: str) -> int:
    return int(c.cli("sbatch", "--parsable", *args).stdout.strip())


def _granted_at_submit(job) -> bool:
    return job.state != "PENDING" and job.start_time == job.submit_time


def _idle(c: Cluster) -> None:
    c.wait_nodes("node1")


def test_sbatch_on_an_idle_node_starts_in_its_submit_entry(one_node: Cluster) -> None:
    _idle(one_node)
    job_id = _sbatch(one_node, "-n1", "--wrap", "sleep 30")
    try:
        job = one_node.job(job_id)  # read right after sbatch returned: no scheduler pass in between
        assert job.state == "RUNNING" and job.reason == "None", job
        assert _granted_at_submit(job), (job.submit_time, job.start_time)
        shown = one_node.cli("scontrol", "show", "job", str(job_id)).stdout
        submit = re.search(r"SubmitTime=(\S+)", shown).group(1)
        assert f"StartTime={submit} " in shown
    finally:
        one_node.cli("scancel", str(job_id))
        one_node.wait_job(job_id, "CANCELLED")


def test_salloc_on_an_idle_node_is_granted_at_once(one_node: Cluster, tmp_path: Path) -> None:
    _idle(one_node)
    proc = one_node.cli("salloc", "-n1", "true", cwd=tmp_path)
    job_id = int(re.search(r"allocation (\d+)", proc.stderr).group(1))
    assert proc.stderr.splitlines() == [
        f"salloc: Granted job allocation {job_id}",
        f"salloc: Relinquishing job allocation {job_id}",
    ]
    assert one_node.job(job_id).start_time == one_node.job(job_id).submit_time


def test_srun_on_an_idle_node_gets_its_allocation_at_once(one_node: Cluster, tmp_path: Path) -> None:
    _idle(one_node)
    proc = subprocess.run(
        [str(BIN / "srun"), "-n1", "printenv", "SLURM_JOB_ID"],
        cwd=tmp_path,
        env=one_node.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    job = one_node.job(int(proc.stdout.strip()))
    assert job.state == "COMPLETED" and job.start_time == job.submit_time


def test_a_job_behind_a_runnable_higher_priority_job_is_not_granted_ahead(one_node: Cluster) -> None:
    _idle(one_node)
    first = _sbatch(one_node, "-n1", "-t", "10", "--wrap", "sleep 60")
    big = _sbatch(one_node, "-n2", "-t", "10", "--wrap", "true")  # needs both CPUs: waits for `first`
    small = _sbatch(one_node, "-n1", "-t", "60", "--wrap", "true")  # one CPU is free, but `big` is ahead
    try:
        assert _granted_at_submit(one_node.job(first))
        jobs = one_node.jobs(big, small)
        assert jobs[big].state == "PENDING" and jobs[small].state == "PENDING", jobs
        # The scheduler pass agrees: `small` would delay `big`'s reservation, so it waits behind it.
        wait_for(lambda: one_node.job(small).reason == "Priority", what="the pass to rank small behind big")
        assert one_node.job(small).state == "PENDING"
        # With `big` gone, the pass (not the submit) starts `small`.
        one_node.cli("scancel", str(big))
        started = one_node.wait_job(small, "RUNNING", "COMPLETED")
        assert started.start_time > started.submit_time
    finally:
        one_node.cli("scancel", str(first), str(big), str(small), check=False)
        one_node.wait_job(first, "CANCELLED")


def test_a_held_job_does_not_keep_others_from_an_immediate_grant(one_node: Cluster) -> None:
    _idle(one_node)
    held = _sbatch(one_node, "-H", "-n1", "--wrap", "true")
    job_id = _sbatch(one_node, "-n1", "--wrap", "sleep 30")
    try:
        assert one_node.job(held).state == "PENDING"
        assert _granted_at_submit(one_node.job(job_id))
    finally:
        one_node.cli("scancel", str(held), str(job_id), check=False)
        one_node.wait_job(job_id, "CANCELLED")


def test_ha_replicas_agree_on_an_immediate_grant(tmp_path: Path) -> None:
    from integration.ha_harness import HACluster

    c = HACluster(tmp_path, size=3)
    c.start()
    try:
        c.start_agent("node1", cpus=2)
        c.wait_nodes("node1")
        env = c.env

        def sbatch(*args: str) -> int:
            proc = subprocess.run(
                [str(BIN / "sbatch"), "--parsable", *args],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert proc.returncode == 0, proc.stderr
            return int(proc.stdout.strip())

        granted = sbatch("-n2", "--wrap", "sleep 30")
        waiting = sbatch("-n1", "--wrap", "true")  # the node is full: pends for the scheduler pass
        leader = c.wait_leader()
        c.wait_caught_up(leader)
        views = {m.node_id: c.local_jobs(m.node_id) for m in c.members}
        for node_id, jobs in views.items():
            job = jobs[granted]
            assert job.state == "RUNNING" and job.start_time == job.submit_time, (node_id, job)
            assert [(a.node, a.cpus) for a in job.allocation] == [("node1", 2)], (node_id, job)
            assert jobs[waiting].start_time != jobs[waiting].submit_time, (node_id, jobs[waiting])
        first = views[leader][granted]
        assert all(v[granted] == first for v in views.values())
        c.call_member(leader, "CancelJob", _cancel(granted))
    finally:
        c.stop()
        _cleanup_jobs(c)  # type: ignore[arg-type]  # a job's processes outlive its agent by design


def _cancel(job_id: int):
    from spur.rpc.proto import spur_pb2 as pb

    return pb.CancelJobRequest(job_id=job_id)
