"""``spur.batch.v1.ControllerBatch``: many final job reports in one call (agents, the fleet simulator).

Each report is served exactly as a ``ReportJobStatus`` call would be (same checks, same command, same
outcome), through :class:`~spur.controller.service.ControllerService`; reports of different jobs run
concurrently so that their ``JobExited`` proposals leave in shared Raft entries, a job's own reports
in order. On a follower each report is forwarded to the leader like the single call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spur.rpc.batching import CONTROLLER_BATCH, serve_items
from spur.rpc.proto import batch_pb2
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext

if TYPE_CHECKING:
    from spur.controller.service import ControllerService

__all__ = ["CONTROLLER_BATCH", "ControllerBatchService"]


class ControllerBatchService:
    def __init__(self, controller_service: ControllerService) -> None:
        self.svc = controller_service

    async def ReportJobStatuses(
        self, request: batch_pb2.JobStatusReports, context: CallContext
    ) -> batch_pb2.BatchOutcomes:
        outcomes = await serve_items(
            request.reports,
            pb.JobStatusReport.FromString,
            lambda report: self.svc.ReportJobStatus(report, context),
            key=lambda report: report.job_id,
        )
        return outcomes
