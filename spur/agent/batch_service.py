"""``spur.batch.v1.AgentBatch`` on spurd: many launches in one call, each served as its ``LaunchJob``
(same checks, same outcome per item), different jobs concurrently."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spur.rpc.batching import AGENT_BATCH, serve_items
from spur.rpc.proto import batch_pb2, spur_pb2
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError

if TYPE_CHECKING:
    from spur.agent.service import AgentServicer

__all__ = ["AGENT_BATCH", "AgentBatchServicer"]


class AgentBatchServicer:
    def __init__(self, agent: AgentServicer, observe_launch: Callable[[str, bool], None] | None = None) -> None:
        self.agent = agent
        # each item counts as one launch in spurd's metrics, exactly as a LaunchJob call would
        self.observe_launch = observe_launch or (lambda kind, ok: None)

    async def LaunchJobs(
        self, request: batch_pb2.LaunchJobsRequest, context: CallContext
    ) -> batch_pb2.BatchOutcomes:
        return await serve_items(
            request.launches,
            spur_pb2.LaunchJobRequest.FromString,
            lambda req: self._launch(req, context),
            key=lambda req: req.job.job_id,
            fill=lambda outcome, resp: setattr(outcome, "already_running", resp.already_running),
        )

    async def _launch(self, request: spur_pb2.LaunchJobRequest, context: CallContext) -> Any:
        try:
            response = await self.agent.LaunchJob(request, context)
        except RpcError:
            self.observe_launch("job", False)
            raise
        self.observe_launch("job", True)
        return response
