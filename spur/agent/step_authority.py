"""What a ``LaunchStep`` may run on this node, decided from the controller's record alone (pure).

srun (a user's process) calls ``LaunchStep``; only the job and step ids of its request are used. The
rest comes from the controller's ``JobInfo`` (:mod:`spur.agent.service` asks the controller for it on
every call): the job's user, uid, gid, restarts, allocation and time limit, and the step's command
and allocation, with this node's first task rank computed from the step's allocation (srun numbers
ranks the same way). :func:`step_launch` refuses, with the gRPC status and a message saying why:

- NOT_FOUND: the controller does not know the job, or the job has no such step (srun creates a step
  with ``CreateStep`` before launching it);
- PERMISSION_DENIED: the caller is neither the job's owner nor an administrator;
- FAILED_PRECONDITION: the job or the step is not running, this node is not allocated to the job or
  not part of the step, or the step's tasks on this node already ended.
"""

from __future__ import annotations

from spur.auth.admin import is_admin
from spur.auth.identity import Identity
from spur.auth.tokens import AUD_CONTROLLER
from spur.rpc.proto import spur_pb2
from spur.rpc.status import RpcError, StatusCode

__all__ = ["is_controller", "may_act_for", "step_launch"]

# Job (and step) states in which a step may start.
_RUNNING = "RUNNING"


def may_act_for(caller: Identity, owner_uid: int) -> bool:
    """Whether ``caller`` may act on a job (or unit) of ``owner_uid`` as a user: its owner or an
    administrator user. A daemon credential is neither (spur.auth.admin), whatever its uid."""
    return (caller.uid == owner_uid and not caller.daemon) or is_admin(caller)


def is_controller(caller: Identity) -> bool:
    """A verified controller credential (audience ``controller``): the controller's own calls, which
    carry its decisions (signals, REST's output streams), not a user's."""
    return caller.verified and caller.audience == AUD_CONTROLLER


def step_launch(
    job: spur_pb2.JobInfo | None, job_id: int, step_id: int, *, node: str, caller: Identity
) -> spur_pb2.LaunchStepRequest:
    """The launch of step ``job_id.step_id`` on ``node`` built from ``job`` (the controller's record,
    None when it has none) once ``caller`` may start it; RpcError otherwise (module docstring)."""
    step_name = f"{job_id}.{step_id}"
    if job is None or job.job_id != job_id:
        raise RpcError(StatusCode.NOT_FOUND, f"job {job_id} is not known to the controller")
    if not may_act_for(caller, job.uid):
        raise RpcError(
            StatusCode.PERMISSION_DENIED,
            f"Access/permission denied: job {job_id} belongs to uid {job.uid}, not to uid {caller.uid}",
        )
    if job.state != _RUNNING:
        raise RpcError(
            StatusCode.FAILED_PRECONDITION, f"job {job_id} is {job.state}, so step {step_name} cannot start"
        )
    if not any(a.node == node for a in job.allocation):
        raise RpcError(StatusCode.FAILED_PRECONDITION, f"node {node} is not allocated to job {job_id}")
    step = next((s for s in job.steps if s.step_id == step_id), None)
    if step is None:
        raise RpcError(
            StatusCode.NOT_FOUND, f"step {step_name} is not known to the controller (srun creates it first)"
        )
    if step.state != _RUNNING:
        raise RpcError(StatusCode.FAILED_PRECONDITION, f"step {step_name} is {step.state or 'not running'}")
    if node in step.exited_nodes:
        raise RpcError(
            StatusCode.FAILED_PRECONDITION, f"the tasks of step {step_name} on node {node} have already ended"
        )
    first_task = 0
    for alloc in step.allocation:
        if alloc.node == node:
            break
        first_task += alloc.tasks
    else:
        raise RpcError(StatusCode.FAILED_PRECONDITION, f"node {node} is not part of step {step_name}")
    return spur_pb2.LaunchStepRequest(job=job, step=step, node=node, first_task=first_task)
