"""Following a job's state from the CLI (sbatch --wait, srun)."""

from __future__ import annotations

from spur.cli.client import with_controller


def wait_for_job(job_id: int):  # -> pb.JobInfo
    """Block until the job reaches a terminal state; return its final record."""
    from spur.rpc.proto import spur_pb2 as pb

    async def body(stub):
        last = None
        async for info in stub.WatchJob(pb.GetJobsRequest(job_ids=[job_id])):
            last = info
        return last

    return with_controller(body, timeout=None)
