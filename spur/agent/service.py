"""The Agent gRPC service (LaunchJob, LaunchStep, SignalJob, StreamOutput, Status) over an Executor.

Status mapping: a launch the job caused to fail -> FAILED_PRECONDITION with the reason (the failure is
also reported to the controller as a finished job or step with ``launch_failed``); an agent-side
launch failure -> INTERNAL (also reported); a launch fenced by an older controller term than one
already seen -> FAILED_PRECONDITION; unknown job or step -> NOT_FOUND; invalid signal number, unknown
action or malformed request -> INVALID_ARGUMENT.

LaunchStep is called by srun (a user's process), not by the controller, so when the servicer has a
``lookup_job`` (spurd wires the controller's GetJobs) the job record the step runs under -- its user,
allocation and time limit -- is the controller's, not the caller's: a step of a job the controller
does not know as running on this node, or of another user's job (the caller's identity headers), is
refused (NOT_FOUND / FAILED_PRECONDITION / PERMISSION_DENIED; the caller is the identity the auth
interceptor verified), and the step's
allocation is taken from the controller's record when it lists the step. StreamOutput serves only the
owner of the job (or an administrator) when the call carries an identity.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from spur.agent.backends import BackendError
from spur.agent.executor import Executor, UnknownJob
from spur.agent.launchspec import LaunchError
from spur.agent.output import stream_output
from spur.auth.admin import is_admin
from spur.auth.identity import IdentityError, require_identity
from spur.rpc.proto import spur_pb2
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode

__all__ = ["AgentServicer", "JobLookup"]

log = logging.getLogger("spur.agent.service")

# Job states in which a job's steps may start.
_STEP_STATES = frozenset({"RUNNING"})

JobLookup = Callable[[int], Awaitable[spur_pb2.JobInfo | None]]


class AgentServicer:
    def __init__(self, executor: Executor, *, node_name: str, lookup_job: JobLookup | None = None) -> None:
        self.executor = executor
        self.node_name = node_name
        self.fence_term = 0
        self.lookup_job = lookup_job

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
        if request.cluster_id:
            try:
                self.executor.use_cluster(request.cluster_id)
            except BackendError as e:
                raise RpcError(StatusCode.INTERNAL, f"node {self.node_name}: {e}") from None
        if request.job.spec.allocation_only or (not request.batch and not request.job.spec.interactive):
            # salloc allocations and non-first nodes of a batch job: nothing runs there until steps start.
            return spur_pb2.LaunchJobResponse(already_running=False)
        try:
            known = await self.executor.launch(request)
        except LaunchError as e:
            raise RpcError(StatusCode.FAILED_PRECONDITION, str(e)) from None
        except BackendError as e:
            raise RpcError(StatusCode.INTERNAL, f"node {self.node_name}: {e}") from None
        return spur_pb2.LaunchJobResponse(already_running=known)

    async def LaunchStep(
        self, request: spur_pb2.LaunchStepRequest, context: CallContext
    ) -> spur_pb2.LaunchJobResponse:
        job_id = request.job.job_id
        if job_id == 0 or not request.HasField("step"):
            raise RpcError(
                StatusCode.INVALID_ARGUMENT, "LaunchStep needs a job with a non-zero job_id and a step"
            )
        step_name = f"{job_id}.{request.step.step_id}"
        if not request.step.spec.argv:
            raise RpcError(StatusCode.INVALID_ARGUMENT, f"step {step_name} has no command to run")
        request.node = request.node or self.node_name
        if request.node != self.node_name:
            raise RpcError(
                StatusCode.INVALID_ARGUMENT,
                f"LaunchStep for node {request.node} reached node {self.node_name}",
            )
        if self.lookup_job is not None and not self.executor.knows(job_id, request.step.step_id):
            await self._authorize_step(request, step_name, context)
        try:
            known = await self.executor.launch_step(request)
        except LaunchError as e:
            raise RpcError(StatusCode.FAILED_PRECONDITION, str(e)) from None
        except BackendError as e:
            raise RpcError(StatusCode.INTERNAL, f"node {self.node_name}: {e}") from None
        return spur_pb2.LaunchJobResponse(already_running=known)

    async def _authorize_step(
        self, request: spur_pb2.LaunchStepRequest, step_name: str, context: CallContext
    ) -> None:
        """Replace the caller's job record with the controller's (see the module docstring)."""
        assert self.lookup_job is not None
        job_id = request.job.job_id
        try:
            job = await self.lookup_job(job_id)
        except RpcError as e:
            raise RpcError(
                StatusCode.UNAVAILABLE, f"cannot confirm job {job_id} with the controller: {e.message}"
            ) from None
        if job is None:
            raise RpcError(StatusCode.NOT_FOUND, f"job {job_id} is not known to the controller")
        if job.state not in _STEP_STATES:
            raise RpcError(
                StatusCode.FAILED_PRECONDITION,
                f"job {job_id} is {job.state}, so step {step_name} cannot start",
            )
        try:
            caller = require_identity(context.identity, context.metadata)
        except IdentityError as e:
            raise RpcError(StatusCode.UNAUTHENTICATED, str(e)) from None
        if not is_admin(caller) and caller.uid != job.uid:
            raise RpcError(
                StatusCode.PERMISSION_DENIED,
                f"Access/permission denied: job {job_id} belongs to uid {job.uid}, not to uid {caller.uid}",
            )
        if not any(a.node == self.node_name for a in job.allocation):
            raise RpcError(
                StatusCode.FAILED_PRECONDITION, f"node {self.node_name} is not allocated to job {job_id}"
            )
        request.job.CopyFrom(job)
        known_step = next((s for s in job.steps if s.step_id == request.step.step_id), None)
        if known_step is not None and known_step.allocation:
            del request.step.allocation[:]
            request.step.allocation.extend(known_step.allocation)

    async def SignalJob(self, request: spur_pb2.SignalJobRequest, context: CallContext) -> spur_pb2.Empty:
        step_id = request.step_id if request.HasField("step_id") else None
        try:
            if request.action == "":
                self.executor.signal(
                    request.job_id,
                    request.signal,
                    request.grace_secs,
                    step_id=step_id,
                    batch_only=request.batch_only,
                )
            elif request.action == "suspend":
                self.executor.suspend(request.job_id)
            elif request.action == "resume":
                self.executor.resume(request.job_id)
            elif request.action == "requeue":
                self.executor.requeue(request.job_id, request.grace_secs)
            elif request.action == "set_time_limit":
                self.executor.set_time_limit(request.job_id, request.time_limit_secs)
            else:
                raise ValueError(
                    f"unknown SignalJob action {request.action!r} "
                    "(expected suspend, resume, requeue or set_time_limit)"
                )
        except UnknownJob as e:
            raise RpcError(StatusCode.NOT_FOUND, str(e)) from None
        except ValueError as e:
            raise RpcError(StatusCode.INVALID_ARGUMENT, str(e)) from None
        return spur_pb2.Empty()

    async def StreamOutput(
        self, request: spur_pb2.StreamOutputRequest, context: CallContext
    ) -> AsyncIterator[spur_pb2.OutputChunk]:
        step_id = request.step_id if request.HasField("step_id") else None
        try:
            job = self.executor.get(request.job_id, step_id)
        except UnknownJob as e:
            raise RpcError(StatusCode.NOT_FOUND, str(e)) from None
        caller = context.identity
        owner = job.spec.uid if job.spec is not None else None
        if caller is not None and not caller.anonymous and owner is not None:
            if not is_admin(caller) and caller.uid != owner:
                raise RpcError(
                    StatusCode.PERMISSION_DENIED,
                    f"Access/permission denied: the output of {job.name} belongs to uid {owner}, "
                    f"not to uid {caller.uid}",
                )
        complete = False
        async for chunk in stream_output(job, follow=request.follow):
            yield chunk
            complete = chunk.stream == "exit"
        if complete and not request.observer:
            self.executor.mark_streamed(request.job_id, step_id)

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
