"""Hand-built JobInfo / NodeInfo / PartitionInfo records for the CLI formatting tests."""

from __future__ import annotations

from spur.rpc.proto import spur_pb2 as pb

NOW = 1_800_000_000.0


def job(job_id: int, name: str = "job", state: str = "RUNNING", **kw) -> pb.JobInfo:
    spec_kw = kw.pop("spec", {})
    spec = pb.JobSpec(name=name, work_dir="/tmp/slurmbench", num_nodes=1, cpus_per_task=1, **spec_kw)
    running = state not in ("PENDING",)
    defaults = dict(
        user="root",
        uid=0,
        gid=0,
        group="root",
        reason="None",
        partition="debug",
        time_limit_secs=-1,
        submit_time=NOW - 10,
        start_time=NOW - 3 if running else 0,
        nodelist="vm" if running else "",
        allocation=[pb.NodeAllocation(node="vm", cpus=1, tasks=1)] if running else [],
    )
    defaults.update(kw)
    return pb.JobInfo(job_id=job_id, spec=spec, state=state, **defaults)


def array_task(job_id: int, array_job_id: int, task: int, state: str, **kw) -> pb.JobInfo:
    kw.setdefault("array_max_running", 2)
    return job(job_id, "arr", state, array_job_id=array_job_id, array_task_id=task, **kw)


def reference_queue() -> list[pb.JobInfo]:
    """The jobs behind the squeue outputs in shared/reference/slurm-22.05-outputs.txt."""
    return [
        job(216, "longname_job_for_width", time_limit_secs=600, priority=1),
        job(217, "held", "PENDING", reason="JobHeldUser", time_limit_secs=86400),
        array_task(218, 218, 1, "RUNNING", priority=1),
        array_task(219, 218, 2, "RUNNING", priority=1),
        array_task(220, 218, 3, "PENDING", reason="JobArrayTaskLimit", priority=1),
        array_task(221, 218, 4, "PENDING", reason="JobArrayTaskLimit", priority=1),
        array_task(222, 218, 5, "PENDING", reason="JobArrayTaskLimit", priority=1),
    ]
