"""spurd counts each item of a LaunchJobs batch as one launch (or launch failure) in its metrics,
exactly as a LaunchJob call of its own is counted."""

from __future__ import annotations

from prometheus_client import generate_latest

from spur.agent.batch_service import AgentBatchServicer
from spur.metrics.agent import AgentMetrics
from spur.rpc.proto import batch_pb2, spur_pb2
from spur.rpc.status import RpcError, StatusCode


class _Agent:
    async def LaunchJob(self, request, context):  # noqa: N802, ANN001, ANN201 (the servicer's contract)
        if request.job.job_id == 2:
            raise RpcError(StatusCode.FAILED_PRECONDITION, "no such cluster")
        return spur_pb2.LaunchJobResponse()


def _sample(metrics: AgentMetrics, name: str) -> float:
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_each_batched_launch_counts_once():
    metrics = AgentMetrics(lambda: [])
    servicer = AgentBatchServicer(_Agent(), metrics.observe_launch)
    items = [
        spur_pb2.LaunchJobRequest(job=spur_pb2.JobInfo(job_id=i)).SerializeToString() for i in (1, 2, 3)
    ]
    out = await servicer.LaunchJobs(batch_pb2.LaunchJobsRequest(launches=items), context=None)
    assert [o.code for o in out.outcomes] == [0, StatusCode.FAILED_PRECONDITION.value, 0]
    assert _sample(metrics, 'spur_agent_launches_total{kind="job"}') == 2
    assert _sample(metrics, 'spur_agent_launch_failures_total{kind="job"}') == 1
    metrics.observe_rpc("/spur.v1.Agent/LaunchJob", "OK", 0.01)  # a single call counts the same way
    assert _sample(metrics, 'spur_agent_launches_total{kind="job"}') == 3
