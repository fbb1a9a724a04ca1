"""The dispatcher's fast path: a scheduling pass's batch-job launches to one agent in one call.

``LaunchJobs`` (spur.batch.v1.AgentBatch) carries the very ``LaunchJobRequest`` each job's own
``LaunchJob`` would carry. What the batch cannot settle goes the single-launch way
(``Dispatcher._launch``), which keeps every per-job rule: an agent that does not offer the batch
service (UNIMPLEMENTED) or a failed call sends each job on its own; an item refused by the agent is
retried, requeued or failed by the launch policy exactly as a single launch would be; a job that was
cancelled, ended or launched meanwhile is left to the single path's checks. The acknowledged jobs'
``JobLaunched`` commands go in one proposal, so they share Raft entries.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import trio

from spur.core.job import Job, JobState
from spur.rpc.batching import AGENT_BATCH, outcome_error
from spur.rpc.convert import job_to_proto, launch_request_bytes
from spur.rpc.proto import batch_pb2
from spur.rpc.status import RpcError, StatusCode
from spur.rpc.stub import Stub
from spur.state import commands as c
from spur.trace import span

if TYPE_CHECKING:
    from spur.controller.host import ControllerHost
    from spur.rpc.pool import ChannelPool

__all__ = ["AGENT_CALL_TIMEOUT", "BatchDispatcher", "batch_target", "launch_batch"]

log = logging.getLogger(__name__)

# Deadline of every call the dispatcher makes to an agent (launch, signal, time limit), in seconds.
AGENT_CALL_TIMEOUT = 10.0


class BatchDispatcher(Protocol):
    """What a batch launch uses of ``spur.controller.duties.Dispatcher``, which starts it: the
    single-launch path for what the batch cannot settle, and its busy marks."""

    @property
    def ctl(self) -> ControllerHost: ...

    @property
    def _busy(self) -> set[tuple[int, str]]: ...

    async def _launch(self, pool: ChannelPool, job_id: int) -> None: ...

    async def _send_time_limit(self, pool: ChannelPool, job: Job) -> None: ...


def batch_target(state, job: Job) -> tuple[str, int] | None:
    """(address, port) of the one agent a job's launch goes to, when it can travel in a batch: a batch
    (not interactive) job, allocated, not cancelled before launch, on a known node. None otherwise."""
    if job.spec.interactive or job.state is not JobState.RUNNING or not job.allocation:
        return None
    node = state.nodes.get(job.allocation[0].node)
    if node is None:
        return None
    return node.address, node.port


async def launch_batch(
    dispatcher: BatchDispatcher, pool: ChannelPool, target: tuple[str, int], job_ids: list[int]
) -> None:
    """Launch ``job_ids`` (all marked busy by the caller) on the agent at ``target`` in one call."""
    ctl = dispatcher.ctl
    sent: list[tuple[int, int, int]] = []  # (job id, alloc term, time limit sent)
    requests: list[bytes] = []
    leftovers: list[int] = []
    for job_id in job_ids:
        job = ctl.state.jobs.get(job_id)
        if job is None or job.launched or batch_target(ctl.state, job) != target:
            leftovers.append(job_id)  # changed since the pass: the single path decides
            continue
        info = job_to_proto(job)
        requests.append(
            launch_request_bytes(
                info,
                node=job.allocation[0].node,
                first_task=0,
                batch=True,
                fence_term=ctl.raft.term,
                cluster_id=ctl.state.cluster_id,
            )
        )
        sent.append((job_id, job.alloc_term, info.time_limit_secs))
    errors: list[RpcError | None]
    try:
        agent = await pool.stub(*target)
        for job_id, _, _ in sent:
            span(job_id, "ctl.launch-sent")
        answer = await Stub(agent.channel, AGENT_BATCH).LaunchJobs(
            batch_pb2.LaunchJobsRequest(launches=requests), timeout=AGENT_CALL_TIMEOUT
        )
        errors = [outcome_error(o) for o in answer.outcomes]
        if len(errors) != len(sent):
            raise RpcError(StatusCode.INTERNAL, "LaunchJobs answered a different number of outcomes")
    except RpcError as exc:
        errors = [exc] * len(sent)  # UNIMPLEMENTED (an older agent) or a failed call: one by one
    acked: list[tuple[int, int, int]] = []
    async with trio.open_nursery() as nursery:
        for item, error in zip(sent, errors, strict=True):
            if error is None:
                acked.append(item)
            else:
                nursery.start_soon(dispatcher._launch, pool, item[0])  # discards its busy mark
        for job_id in leftovers:
            nursery.start_soon(dispatcher._launch, pool, job_id)
        if acked:
            nursery.start_soon(_launched, dispatcher, pool, acked)


async def _launched(
    dispatcher: BatchDispatcher, pool: ChannelPool, acked: list[tuple[int, int, int]]
) -> None:
    """Record the acknowledged launches (job id, alloc term, time limit sent) in one proposal, so
    their ``JobLaunched`` commands share entries without a task and a wait each; then send a time
    limit changed while its launch was in flight. Every job's busy mark is discarded at the end."""
    ctl = dispatcher.ctl
    try:
        outcomes = await ctl.propose_many(
            [c.JobLaunched(job_id, alloc_term) for job_id, alloc_term, _ in acked]
        )
        for (job_id, _, limit_sent), outcome in zip(acked, outcomes, strict=True):
            if isinstance(outcome, RpcError):
                log.info("JobLaunched of job %s not applied: %s", job_id, outcome)
                continue
            current = ctl.state.jobs.get(job_id)
            if current is not None and current.time_limit_secs != limit_sent:
                # scontrol update TimeLimit= landed while the launch was in flight
                await dispatcher._send_time_limit(pool, current)
    finally:
        for job_id, _, _ in acked:
            dispatcher._busy.discard((job_id, "launch"))
