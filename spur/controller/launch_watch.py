"""Jobs a node should be running but no longer mentions: a lost or ignored launch. Leader-only.

Every heartbeat lists the jobs the agent still runs (``running_job_ids``) and those that ended there
but whose final report the controller has not acknowledged yet (``unreported_job_ids``). A launched,
RUNNING (or SUSPENDED) job whose processes belong on that node -- the first node of a batch job,
every node of an interactive job that has not reported its tasks' end -- and that the node's
heartbeats leave out for longer than ``grace`` (``controller.node_timeout_secs``) was never started
there or vanished without a report: the agent refused or ignored its launch. Such a job is requeued
(``Reason=launch_failed_requeued``), or failed when it may not be requeued, instead of staying
RUNNING forever with no process.

:func:`missing_jobs` is the pure decision; :class:`LaunchWatch` keeps, between heartbeats, since when
each job has been missing (Trio clock, like ``Controller.last_seen``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from spur.core.job import Job, JobState

if TYPE_CHECKING:
    from spur.controller.host import ControllerHost
    from spur.rpc.proto import spur_pb2 as pb
    from spur.state.machine import ClusterState

__all__ = ["LaunchWatch", "expected_on", "missing_jobs"]

log = logging.getLogger("spur.controller")

_WATCHED_STATES = (JobState.RUNNING, JobState.SUSPENDED)


def _runs_on(job: Job, node: str) -> bool:
    if not job.allocation or job.spec.allocation_only:
        return False
    if job.spec.interactive:
        return node in job.nodes and node not in job.exited_nodes
    return job.allocation[0].node == node


def expected_on(state: ClusterState, node: str) -> set[int]:
    """Ids of launched jobs whose processes should be on ``node`` now."""
    jobs = (state.jobs.get(job_id) for job_id in state.usage(node).jobs)  # only this node's jobs
    return {
        job.job_id
        for job in jobs
        if job is not None and job.state in _WATCHED_STATES and job.launched and _runs_on(job, node)
    }


def missing_jobs(
    expected: set[int],
    present: set[int],
    missing_since: dict[int, float],
    now: float,
    grace: float,
) -> tuple[dict[int, float], list[int]]:
    """(new ``missing_since``, jobs missing for longer than ``grace``) after one heartbeat.

    ``missing_since`` maps a job id to the time it was first found missing; a job seen again, or no
    longer expected, is forgotten.
    """
    since = {job_id: missing_since.get(job_id, now) for job_id in expected - present}
    lost = sorted(job_id for job_id, first in since.items() if now - first > grace)
    for job_id in lost:
        del since[job_id]
    return since, lost


class LaunchWatch:
    """Per node: since when each expected job has been missing from its heartbeats."""

    def __init__(self) -> None:
        self.missing: dict[str, dict[int, float]] = {}

    def _judge(
        self, ctl: ControllerHost, request: pb.HeartbeatRequest, now: float
    ) -> tuple[dict[int, float], list[int]]:
        """(the node's new ``missing_since``, its lost jobs) after one heartbeat; records nothing."""
        expected = expected_on(ctl.state, request.name)
        if not expected:  # most heartbeats: nothing can be missing, and nothing was
            return {}, []
        present = set(request.running_job_ids) | set(request.unreported_job_ids)
        grace = float(ctl.cfg.controller.node_timeout_secs)
        return missing_jobs(expected, present, self.missing.get(request.name, {}), now, grace)

    def _record(self, node: str, since: dict[int, float]) -> None:
        if since:
            self.missing[node] = since
        else:
            self.missing.pop(node, None)

    def quiet(self, ctl: ControllerHost, request: pb.HeartbeatRequest, now: float) -> bool:
        """Check one heartbeat without waiting: True when it shows no job lost, and is then recorded
        as :meth:`heartbeat` would record it; False (nothing recorded) when :meth:`heartbeat` must
        requeue or fail jobs."""
        since, lost = self._judge(ctl, request, now)
        if lost:
            return False
        self._record(request.name, since)
        return True

    async def heartbeat(self, ctl: ControllerHost, request: pb.HeartbeatRequest, now: float) -> list[int]:
        """Check one heartbeat; requeue (or fail) the jobs it shows lost. Returns their ids."""
        since, lost = self._judge(ctl, request, now)
        self._record(request.name, since)
        if not lost:
            return []
        from spur.state import commands as c

        grace = float(ctl.cfg.controller.node_timeout_secs)
        for job_id in lost:
            job = ctl.state.jobs[job_id]
            message = (
                f"node {request.name} is not running job {job_id} ({grace:.0f}s without it in the "
                "node's heartbeats): its launch was lost or ignored"
            )
            log.warning("job %s: %s", job_id, message)
            cmd: c.JobExited | c.LaunchFailed
            if job.spec.no_requeue or job.spec.interactive:
                cmd = c.JobExited(
                    job_id, request.name, 1, 0, ctl.clock.wall(), launch_failed=True, message=message
                )
            else:
                cmd = c.LaunchFailed(job_id, message, ctl.clock.wall())
            await ctl.raft_propose_quiet(cmd)
        ctl.kick_scheduler()
        return lost
