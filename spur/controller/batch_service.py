"""``spur.batch.v1.ControllerBatch``: many final job reports in one call (agents, the fleet simulator),
and many submissions in one call (programs that submit jobs by the hundred).

Each report is checked and turned into its command exactly as a ``ReportJobStatus`` call would be
(same checks, same command, same outcome), through
:class:`~spur.controller.service.ControllerService`, and all of a call's commands are proposed
together in the reports' order (``propose_many``: shared Raft entries, one wait).

Each submission is served as a ``SubmitJob`` call would be, for the authenticated caller (whatever
the request holds), through ``ControllerService.submit_many``: accepted ones get increasing ids in the
request's order. A follower forwards either call whole, with the caller's credentials, to the leader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf.message import Message

from spur.auth.callers import caller
from spur.core.job import JobSpec
from spur.rpc import convert
from spur.rpc.batching import CONTROLLER_BATCH, fail_item, parse_items
from spur.rpc.proto import batch_pb2
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import Stub

if TYPE_CHECKING:
    from spur.controller.service import ControllerService

__all__ = ["CONTROLLER_BATCH", "MAX_SUBMISSIONS", "ControllerBatchService"]

# Submissions one SubmitJobs call may carry: past max_submit_queue (256 by default) items are refused
# RESOURCE_EXHAUSTED anyway, and a bound keeps one call's parsing from holding the event loop.
MAX_SUBMISSIONS = 1000


class ControllerBatchService:
    def __init__(self, controller_service: ControllerService) -> None:
        self.svc = controller_service

    async def ReportJobStatuses(
        self, request: batch_pb2.JobStatusReports, context: CallContext
    ) -> batch_pb2.BatchOutcomes:
        ctl = self.svc.ctl
        if not ctl.is_leader:
            return await self._forward("ReportJobStatuses", request, context)
        await ctl.leader_ready()
        parsed, outcomes = parse_items(request.reports, pb.JobStatusReport.FromString)
        positions = [i for i, report in enumerate(parsed) if report is not None]
        reports = [report for report in parsed if report is not None]
        errors = await self.svc.report_many(reports, context)
        for i, error in zip(positions, errors, strict=True):
            if error is not None:
                fail_item(outcomes[i], error)
        return batch_pb2.BatchOutcomes(outcomes=outcomes)

    async def _forward(self, method: str, request: Message, context: CallContext) -> batch_pb2.BatchOutcomes:
        """A follower passes the whole call, with the caller's credentials, to the leader."""
        leader = await self.svc.ctl.leader_stub()
        remaining = context.time_remaining() if context.deadline is not None else None
        forwarded: batch_pb2.BatchOutcomes = await getattr(Stub(leader.channel, CONTROLLER_BATCH), method)(
            request, timeout=remaining or 30.0, metadata=dict(context.metadata)
        )
        return forwarded

    async def SubmitJobs(
        self, request: batch_pb2.SubmitJobsRequest, context: CallContext
    ) -> batch_pb2.BatchOutcomes:
        ctl = self.svc.ctl
        if not ctl.is_leader:
            return await self._forward("SubmitJobs", request, context)
        await ctl.leader_ready()
        ident = caller(context)
        if len(request.submissions) > MAX_SUBMISSIONS:
            raise RpcError(
                StatusCode.INVALID_ARGUMENT,
                f"SubmitJobs carries {len(request.submissions)} submissions; at most {MAX_SUBMISSIONS} per call",
            )
        outcomes = [batch_pb2.ItemOutcome() for _ in request.submissions]
        specs: list[JobSpec] = []
        positions: list[int] = []
        for i, raw in enumerate(request.submissions):
            try:
                specs.append(convert.spec_from_proto(pb.SubmitJobRequest.FromString(raw).spec))
            except RpcError as exc:
                fail_item(outcomes[i], exc)
                continue
            except Exception as exc:  # protobuf's DecodeError, a value the job spec refuses
                outcomes[i].code = StatusCode.INVALID_ARGUMENT.value
                outcomes[i].message = f"submission {i} is not a valid SubmitJobRequest: {exc}"
                continue
            positions.append(i)
        results = await self.svc.submit_many(specs, ident)
        for i, result in zip(positions, results, strict=True):
            if isinstance(result, RpcError):
                fail_item(outcomes[i], result)
            else:
                outcomes[i].job_id = result
        return batch_pb2.BatchOutcomes(outcomes=outcomes)
