"""``spur.batch.v1.AgentBatch`` on spurd: many launches in one call, each served as its ``LaunchJob``
(same checks, same outcome per item), different jobs concurrently."""

from __future__ import annotations

from typing import Any

from spur.rpc.batching import AGENT_BATCH, serve_items
from spur.rpc.proto import batch_pb2, spur_pb2
from spur.rpc.server import CallContext

__all__ = ["AGENT_BATCH", "AgentBatchServicer"]


class AgentBatchServicer:
    def __init__(self, agent: Any) -> None:
        self.agent = agent  # spur.agent.service.AgentServicer

    async def LaunchJobs(
        self, request: batch_pb2.LaunchJobsRequest, context: CallContext
    ) -> batch_pb2.BatchOutcomes:
        return await serve_items(
            request.launches,
            spur_pb2.LaunchJobRequest.FromString,
            lambda req: self.agent.LaunchJob(req, context),
            key=lambda req: req.job.job_id,
            fill=lambda outcome, resp: setattr(outcome, "already_running", resp.already_running),
        )
