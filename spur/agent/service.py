"""The Agent gRPC service (LaunchJob, LaunchStep, SignalJob, StreamOutput, Status) over an Executor.

Status mapping: a launch the job caused to fail -> FAILED_PRECONDITION with the reason (the failure is
also reported to the controller as a finished job or step with ``launch_failed``); an agent-side
launch failure -> INTERNAL (also reported); a launch fenced by an older controller term than one
already seen -> FAILED_PRECONDITION; unknown job or step -> NOT_FOUND; invalid signal number, unknown
action or malformed request -> INVALID_ARGUMENT.

Who decides what runs:

- ``LaunchJob`` (batch scripts, interactive tasks) is the controller's: the auth policy admits only a
  daemon credential to it. Nothing a ``LaunchStep`` caller sends reaches it (a step is always a unit
  ``(job, step_id)``, never the job's own unit).
- ``LaunchStep`` is called by srun (a user's process), so nothing in its request is trusted but the
  ids: every call, a re-delivery included, asks the controller (``lookup_job``: spurd wires the
  controller's GetJobs; UNAVAILABLE when it cannot be asked) and launches the request
  :func:`spur.agent.step_authority.step_launch` rebuilds from the controller's record alone, which
  also says who may start which step. A unit this agent already runs or ran is not a reason to skip
  any of this; once the checks pass, a re-delivered step answers ``already_running`` and starts
  nothing. There is no servicer without a lookup: an agent that cannot ask a controller runs no steps.
  The one thing taken from the caller is ``pmi_server``/``pmi_token`` of a ``--mpi=pmi2`` step: where
  srun serves that step's PMI fences. It only tells the step's own ranks where to exchange their
  key-value pairs, which is the caller's business.
- ``SignalJob`` and ``StreamOutput`` serve only the owner of the unit (or an administrator or the
  controller) when the call carries an identity, and a user may only signal or cancel (suspend,
  resume, requeue and time limits are the controller's); the auth policy keeps SignalJob to daemons
  in ``required`` mode.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from spur.agent.backends import BackendError
from spur.agent.executor import Executor, UnknownJob
from spur.agent.launchspec import LaunchError
from spur.agent.output import stream_output
from spur.agent.step_authority import is_controller, may_act_for, step_launch
from spur.auth.admin import is_admin
from spur.auth.identity import IdentityError, require_identity
from spur.rpc.proto import spur_pb2
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode

__all__ = ["AgentServicer", "JobLookup"]

log = logging.getLogger("spur.agent.service")

JobLookup = Callable[[int], Awaitable[spur_pb2.JobInfo | None]]


class AgentServicer:
    def __init__(self, executor: Executor, *, node_name: str, lookup_job: JobLookup) -> None:
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
        node = request.node or self.node_name
        if node != self.node_name:
            raise RpcError(
                StatusCode.INVALID_ARGUMENT,
                f"LaunchStep for node {node} reached node {self.node_name}",
            )
        launch = await self._authorized_step(job_id, request.step.step_id, context)
        # srun's own PMI fence server for this step: only the caller's step talks to it.
        launch.pmi_server, launch.pmi_token = request.pmi_server, request.pmi_token
        try:
            known = await self.executor.launch_step(launch)
        except LaunchError as e:
            raise RpcError(StatusCode.FAILED_PRECONDITION, str(e)) from None
        except BackendError as e:
            raise RpcError(StatusCode.INTERNAL, f"node {self.node_name}: {e}") from None
        return spur_pb2.LaunchJobResponse(already_running=known)

    async def _authorized_step(
        self, job_id: int, step_id: int, context: CallContext
    ) -> spur_pb2.LaunchStepRequest:
        """The launch of step ``job_id.step_id`` on this node, built from the controller's record
        alone, once the caller may start it; RpcError otherwise (:mod:`spur.agent.step_authority`)."""
        try:
            caller = require_identity(context.identity, context.metadata)
        except IdentityError as e:
            raise RpcError(StatusCode.UNAUTHENTICATED, str(e)) from None
        try:
            job = await self.lookup_job(job_id)
        except RpcError as e:
            raise RpcError(
                StatusCode.UNAVAILABLE, f"cannot confirm job {job_id} with the controller: {e.message}"
            ) from None
        return step_launch(job, job_id, step_id, node=self.node_name, caller=caller)

    async def SignalJob(self, request: spur_pb2.SignalJobRequest, context: CallContext) -> spur_pb2.Empty:
        step_id = request.step_id if request.HasField("step_id") else None
        try:
            self._check_signal_caller(request, step_id, context)
            if request.action == "":
                self.executor.signal(
                    request.job_id,
                    request.signal,
                    request.grace_secs,
                    step_id=step_id,
                    batch_only=request.batch_only,
                    full=request.full,
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

    def _check_signal_caller(
        self, request: spur_pb2.SignalJobRequest, step_id: int | None, context: CallContext
    ) -> None:
        """A caller with an identity that is not an administrator (or the controller) may only signal
        or cancel its own units; the other actions (suspend, requeue, time limits) are the
        controller's. Raises RpcError PERMISSION_DENIED, or UnknownJob."""
        caller = context.identity
        if caller is None or caller.anonymous or is_admin(caller) or is_controller(caller):
            return
        if request.action != "":
            raise RpcError(
                StatusCode.PERMISSION_DENIED,
                f"Access/permission denied: SignalJob action {request.action!r} is the controller's "
                f"(caller is uid {caller.uid}; use scontrol)",
            )
        steps_only = self.executor.steps_only(request.signal, step_id, request.batch_only, request.full)
        units = self.executor.select(request.job_id, step_id, batch_only=request.batch_only, steps_only=steps_only)
        for unit in units:
            owner = unit.spec.uid if unit.spec is not None else None
            if owner is not None and not may_act_for(caller, owner):
                raise RpcError(
                    StatusCode.PERMISSION_DENIED,
                    f"Access/permission denied: {unit.name} belongs to uid {owner}, not to uid {caller.uid}",
                )

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
            if not (is_controller(caller) or may_act_for(caller, owner)):
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
