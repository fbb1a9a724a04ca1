"""The Agent gRPC service (LaunchJob, SignalJob, StreamOutput, Status) over an Executor.

Status mapping: a launch the job caused to fail -> FAILED_PRECONDITION with the reason (the failure is
also reported to the controller as a finished job with ``launch_failed``); an agent-side launch failure
-> INTERNAL (also reported); a launch fenced by an older controller term than one already seen ->
FAILED_PRECONDITION; unknown job -> NOT_FOUND; invalid signal number -> INVALID_ARGUMENT.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from spur.agent.backends import BackendError
from spur.agent.executor import Executor, UnknownJob
from spur.agent.launchspec import LaunchError
from spur.agent.output import stream_output
from spur.rpc.proto import spur_pb2
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode

__all__ = ["AgentServicer"]

log = logging.getLogger("spur.agent.service")


class AgentServicer:
    def __init__(self, executor: Executor, *, node_name: str) -> None:
        self.executor = executor
        self.node_name = node_name
        self.fence_term = 0

    async def LaunchJob(
        self, request: spur_pb2.LaunchJobRequest, context: CallContext
    ) -> spur_pb2.LaunchJobResponse:
        job_id = request.job.job_id
        if job_id == 0:
            raise RpcError(StatusCode.INVALID_ARGUMENT, "LaunchJob needs a job with a non-zero job_id")
        if request.fence_term and request.fence_term < self.fence_term:
            raise RpcError(
                StatusCode.FAILED_PRECONDITION,
                f"launch of job {job_id} comes from controller term {request.fence_term}, "
                f"older than term {self.fence_term} already seen",
            )
        self.fence_term = max(self.fence_term, request.fence_term)
        if not request.batch and not request.job.spec.interactive:
            # Non-first nodes of a batch job: nothing runs there until the script starts steps.
            return spur_pb2.LaunchJobResponse(already_running=False)
        try:
            known = await self.executor.launch(request)
        except LaunchError as e:
            raise RpcError(StatusCode.FAILED_PRECONDITION, str(e)) from None
        except BackendError as e:
            raise RpcError(StatusCode.INTERNAL, f"node {self.node_name}: {e}") from None
        return spur_pb2.LaunchJobResponse(already_running=known)

    async def SignalJob(self, request: spur_pb2.SignalJobRequest, context: CallContext) -> spur_pb2.Empty:
        try:
            self.executor.signal(request.job_id, request.signal, request.grace_secs)
        except UnknownJob as e:
            raise RpcError(StatusCode.NOT_FOUND, str(e)) from None
        except ValueError as e:
            raise RpcError(StatusCode.INVALID_ARGUMENT, str(e)) from None
        return spur_pb2.Empty()

    async def StreamOutput(
        self, request: spur_pb2.StreamOutputRequest, context: CallContext
    ) -> AsyncIterator[spur_pb2.OutputChunk]:
        try:
            job = self.executor.get(request.job_id)
        except UnknownJob as e:
            raise RpcError(StatusCode.NOT_FOUND, str(e)) from None
        complete = False
        async for chunk in stream_output(job, follow=request.follow):
            yield chunk
            complete = chunk.stream == "exit"
        if complete:
            self.executor.mark_streamed(request.job_id)

    async def Status(self, request: spur_pb2.Empty, context: CallContext) -> spur_pb2.AgentStatus:
        return spur_pb2.AgentStatus(
            name=self.node_name,
            jobs=[
                spur_pb2.AgentJob(
                    job_id=j.job_id, pid=j.pid, start_time=j.start_time, finished=j.finished.is_set()
                )
                for j in self.executor.jobs()
            ],
        )
