"""Leader-only duties: the scheduler loop, the dispatcher (launch/cancel on agents), the health sweep.

Each runs inside the leader-duties nursery, so a step-down cancels all of them. They read state and
propose commands with the outcome of their side effects; they never change state directly.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from spur.accounting.shares import weights_of
from spur.controller.launch_batch import AGENT_CALL_TIMEOUT, batch_target, launch_batch
from spur.controller.launch_policy import Fail, LaunchPolicy, Requeue, Retry, next_step
from spur.core.job import Job, JobState
from spur.rpc.convert import job_to_proto
from spur.rpc.pool import ChannelPool, agent_pool
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.status import RpcError, StatusCode
from spur.state import commands as c
from spur.state.sched_view import eligible_jobs, snapshot
from spur.trace import span

if TYPE_CHECKING:
    from spur.controller.host import ControllerHost

log = logging.getLogger("spur.controller")

LAUNCH_POLICY = LaunchPolicy()

# The controller is under load when, since the last pass began, it spent at least this share of the
# time on CPU, or at least this many log entries were applied after that pass ended.
BUSY_SHARE = 0.5
BUSY_CHANGES = 8


def pace_delay(
    *, since_pass: float, changes: int, cpu: float, wall: float, min_interval: float, interval: float
) -> float:
    """Seconds to hold back a pass that a kick asks for (kicks come with every submission and job end).

    ``since_pass``: seconds since the last pass ended; ``changes``: log entries applied since then
    (the pass's own excluded); ``cpu``/``wall``: the controller's CPU time and the wall time since
    that pass began. Under load (``changes >= BUSY_CHANGES`` or ``cpu >= BUSY_SHARE * wall``) the
    pass waits until ``min_interval`` after the last one ended, so the kicks of that time are served
    by one pass, which starts more jobs at once (Slurm's sched_min_interval). Otherwise (an idle
    controller: a job ended, nothing else is going on) it starts at once, so the freed CPUs do not
    wait out ``min_interval``. The changes count matters on a machine so busy that the controller
    gets little CPU: it then looks idle by its CPU time alone. Never more than ``interval``.
    """
    if since_pass >= min_interval:
        return 0.0
    busy = changes >= BUSY_CHANGES or (wall > 0 and cpu >= BUSY_SHARE * wall)
    return max(0.0, min(interval, min_interval - since_pass)) if busy else 0.0


class SchedulerLoop:
    """Every ``scheduler.interval_secs`` (or sooner when kicked by a submit/exit) plan and start jobs.

    A pass is always followed by twice its CPU time (passes never take more than a third of the
    controller's CPU however often they are asked for), and a kicked pass is held back as
    ``pace_delay`` says. ``cpu_clock`` is the controller's CPU clock (injected for tests; trio's
    clock gives the wall time).
    """

    def __init__(self, ctl: ControllerHost, *, cpu_clock: Callable[[], float] = time.process_time) -> None:
        self.ctl = ctl
        self.cpu_clock = cpu_clock

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        seen_index = -1
        last_end = -math.inf  # when the last pass ended (trio's clock)
        began_wall, began_cpu = trio.current_time(), self.cpu_clock()  # when the last pass began
        index_after = self.ctl.state.applied_index  # the applied index when the last pass ended
        while True:
            interval = self.ctl.cfg.scheduler.interval_secs  # re-read: scontrol reconfigure may change it
            with trio.move_on_after(interval):
                await self.ctl.scheduler_kick.wait()
            self.ctl.scheduler_kick = trio.Event()
            if self.ctl.state.applied_index == seen_index:
                continue  # nothing changed since the last pass: the plan would be the same
            now = trio.current_time()
            hold = pace_delay(
                since_pass=now - last_end,
                changes=self.ctl.state.applied_index - index_after,
                cpu=self.cpu_clock() - began_cpu,
                wall=now - began_wall,
                min_interval=self.ctl.cfg.scheduler.min_interval_secs,
                interval=interval,
            )
            if hold > 0:
                await trio.sleep(hold)
                self.ctl.scheduler_kick = trio.Event()  # what kicked meanwhile, this pass sees
            seen_index = self.ctl.state.applied_index
            began_wall, began_cpu = trio.current_time(), self.cpu_clock()
            wall = time.perf_counter()
            try:
                await self.cycle()
            except RpcError as exc:
                log.warning("scheduler cycle could not commit: %s", exc)
            if self.ctl.metrics is not None:
                self.ctl.metrics.observe_scheduler_cycle(time.perf_counter() - wall)
            last_end, index_after = trio.current_time(), self.ctl.state.applied_index
            spacing = min(interval, 2 * (self.cpu_clock() - began_cpu))
            if spacing > 0:
                await trio.sleep(spacing)

    async def cycle(self) -> int:
        """One scheduling pass; returns the number of jobs started."""
        ctl = self.ctl
        now = ctl.clock.wall()
        eligible, reasons = eligible_jobs(ctl.state, now)
        await self._cancel_never_satisfiable(reasons)
        started = 0
        cap = ctl.cfg.scheduler.max_job_test
        accounting = ctl.state.domains["accounting"]
        prio = accounting.priorities(eligible, weights_of(ctl.cfg.priority), now)  # type: ignore[attr-defined]
        if cap and len(eligible) > cap:
            # Only the first max_job_test jobs by priority are tested (Slurm's bf_max_job_test); the
            # rest wait behind them, so building their views would be wasted work.
            eligible.sort(key=lambda j: (-prio.get(j.job_id, j.priority), j.submit_time, j.job_id))
            for job in eligible[cap:]:
                reasons[job.job_id] = "Priority"
            eligible = eligible[:cap]
        if eligible:
            view = snapshot(
                ctl.state,
                now,
                max_job_test=cap,
                eligible=eligible,
                priorities=prio,
                limits=accounting.scheduling_gate(),  # type: ignore[attr-defined]
            )
            assert ctl.plugin_manager is not None  # loaded by Controller.run before any duty starts
            plan = ctl.plugin_manager.hook.spur_schedule(snapshot=view, options={})
            results: list[object] = []

            async def start(assignment) -> None:
                command = c.StartJob(
                    assignment.job_id, list(assignment.allocation), ctl.clock.wall(), ctl.raft.term
                )
                results.append(await ctl.raft_propose_quiet(command))

            # Proposed together so Raft commits them in one batch (one fsync), not one by one.
            async with trio.open_nursery() as nursery:
                for assignment in plan.assignments:
                    nursery.start_soon(start, assignment)
            started = sum(1 for r in results if r is True)
            reasons.update(plan.reasons)
        changed = {
            str(job_id): reason
            for job_id, reason in reasons.items()
            if job_id in ctl.state.jobs
            and ctl.state.jobs[job_id].state is JobState.PENDING
            and ctl.state.jobs[job_id].reason != reason
        }
        if changed:
            await ctl.propose(c.SetPendingReasons(changed))
        return started

    async def _cancel_never_satisfiable(self, reasons: dict[int, str]) -> None:
        from spur.core.eligibility import NEVER

        for job_id, reason in list(reasons.items()):
            job = self.ctl.state.jobs.get(job_id)
            if reason == NEVER and job is not None and job.spec.kill_on_invalid_dep:
                await self.ctl.raft_propose_quiet(c.CancelJob(job_id, 0, self.ctl.clock.wall()))
                reasons.pop(job_id)


class Dispatcher:
    """Launches newly allocated jobs on their agents and delivers cancellations.

    One task per job and action; ``_busy`` keeps a second one from starting while the first is in
    flight, so a launch is sent at most once per allocation by this leader (the agent also refuses
    duplicate launches of a job id).
    """

    def __init__(self, ctl: ControllerHost) -> None:
        self.ctl = ctl
        self._busy: set[tuple[int, str]] = set()
        self._cancel_sent: set[tuple[int, int]] = set()  # (job id, restarts): one cancel per run
        self._active: set[int] = set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with agent_pool(self.ctl.auth.daemon_metadata, tls=self.ctl.client_tls) as pool, trio.open_nursery() as nursery:
            task_status.started()
            nursery.start_soon(self._sweep, pool, nursery, name="dispatcher-sweep")
            while True:
                # A change wakes it for the jobs it touched (no timeout here: a cancel scope per applied
                # entry cost about 1% of a loaded controller; the sweep covers the rest).
                self._spawn_work(pool, nursery, full=False)
                await self.ctl.wait_change()

    async def _sweep(self, pool: ChannelPool, nursery: trio.Nursery) -> None:
        """Once a second, look at every job, so whatever a failed call left undone is tried again,
        however busy or quiet the state is."""
        while True:
            self._spawn_work(pool, nursery, full=True)
            await trio.sleep(1.0)

    def _spawn_work(self, pool: ChannelPool, nursery: trio.Nursery, *, full: bool = True) -> None:
        """Start the launches, cancellations and clean-ups that are due: of the jobs the state marked
        since the last call (``ClusterState.take_dispatch_marks``), or of every job when ``full``."""
        state = self.ctl.state
        marks = state.take_dispatch_marks()
        holding = state.sched_index.holding
        if full or marks is None:
            candidates = sorted(set(holding) | self._active)
        else:
            candidates = sorted(marks)
        by_agent: dict[tuple[str, int], list[int]] = {}  # batch-job launches, one call per agent
        for job_id in candidates:
            job = state.jobs.get(job_id)
            if job is None or job_id not in holding:
                if job_id in self._active:
                    self._active.discard(job_id)
                    if job is not None and job.state.is_terminal and len(job.allocation) > 1:
                        nursery.start_soon(self._clean_up, pool, job, name=f"cleanup-{job_id}")
                continue
            self._active.add(job_id)
            if not job.launched and (job_id, "launch") not in self._busy:
                self._busy.add((job_id, "launch"))
                target = batch_target(state, job)
                if target is not None:
                    by_agent.setdefault(target, []).append(job_id)
                else:
                    nursery.start_soon(self._launch, pool, job_id, name=f"launch-{job_id}")
            elif (
                job.launched
                and job.state is JobState.COMPLETING
                and (job_id, job.restarts) not in self._cancel_sent
                and (job_id, "cancel") not in self._busy
            ):
                self._busy.add((job_id, "cancel"))
                nursery.start_soon(self._cancel, pool, job_id, name=f"cancel-{job_id}")
        for target, ids in by_agent.items():
            if len(ids) == 1:
                nursery.start_soon(self._launch, pool, ids[0], name=f"launch-{ids[0]}")
            else:
                nursery.start_soon(launch_batch, self, pool, target, ids, name=f"launch-{len(ids)}-jobs")

    async def _send_time_limit(self, pool: ChannelPool, job: Job) -> None:
        request = pb.SignalJobRequest(
            job_id=job.job_id, action="set_time_limit", time_limit_secs=job.time_limit_secs
        )
        for alloc in job.allocation:
            node = self.ctl.state.nodes[alloc.node]
            try:
                stub = await pool.stub(node.address, node.port)
                await stub.SignalJob(request, timeout=AGENT_CALL_TIMEOUT)
            except RpcError as exc:
                if exc.code is not StatusCode.NOT_FOUND:
                    log.warning("job %s: time limit update on %s failed: %s", job.job_id, alloc.node, exc)

    async def _clean_up(self, pool: ChannelPool, job: Job) -> None:
        """A multi-node job ended: make sure no step of it lingers on the other nodes."""
        request = pb.SignalJobRequest(
            job_id=job.job_id, signal=0, grace_secs=float(self.ctl.cfg.controller.kill_grace_secs)
        )
        for alloc in job.allocation[1:]:
            node = self.ctl.state.nodes.get(alloc.node)
            if node is None or node.down:
                continue
            try:
                stub = await pool.stub(node.address, node.port)
                await stub.SignalJob(request, timeout=AGENT_CALL_TIMEOUT)
            except RpcError as exc:
                if exc.code is not StatusCode.NOT_FOUND:
                    log.info("job %s: cleanup on %s failed: %s", job.job_id, alloc.node, exc)

    def _launch_targets(self, job: Job) -> list[tuple[str, int, bool]]:
        """(node, first global task rank, batch) for each agent that must start something."""
        if not job.spec.interactive:
            return [(job.allocation[0].node, 0, True)]
        targets, rank = [], 0
        for a in job.allocation:
            targets.append((a.node, rank, False))
            rank += a.tasks
        return targets

    async def _launch(self, pool: ChannelPool, job_id: int) -> None:
        ctl = self.ctl
        try:
            job = ctl.state.jobs.get(job_id)
            if job is None or not job.state.holds_resources or job.launched:
                return
            if job.state is JobState.COMPLETING:  # cancelled before it was ever sent
                await ctl.raft_propose_quiet(
                    c.LaunchFailed(job_id, "cancelled before launch", ctl.clock.wall())
                )
                return
            info = job_to_proto(job)
            requeueable = not (job.spec.no_requeue or job.spec.interactive)
            for node_name, first_task, batch in self._launch_targets(job):
                node = ctl.state.nodes[node_name]
                req = pb.LaunchJobRequest(
                    job=info,
                    node=node_name,
                    first_task=first_task,
                    batch=batch,
                    fence_term=ctl.raft.term,
                    cluster_id=ctl.state.cluster_id,
                )
                outcome = await self._call_launch(pool, node.address, node.port, req, requeueable)
                if isinstance(outcome, Requeue):
                    log.warning("job %s: %s; requeueing", job_id, outcome.reason)
                    await ctl.raft_propose_quiet(c.LaunchFailed(job_id, outcome.reason, ctl.clock.wall()))
                    return
                if isinstance(outcome, Fail):
                    log.warning("job %s: %s", job_id, outcome.reason)
                    await ctl.raft_propose_quiet(
                        c.JobExited(
                            job_id,
                            node_name,
                            1,
                            0,
                            ctl.clock.wall(),
                            launch_failed=True,
                            message=outcome.reason,
                        )
                    )
                    return
            await ctl.raft_propose_quiet(c.JobLaunched(job_id, job.alloc_term))
            current = ctl.state.jobs.get(job_id)
            if current is not None and current.time_limit_secs != info.time_limit_secs:
                # scontrol update TimeLimit= landed while the launch was in flight
                await self._send_time_limit(pool, current)
        finally:
            self._busy.discard((job_id, "launch"))

    async def _call_launch(
        self, pool: ChannelPool, address: str, port: int, req: pb.LaunchJobRequest, requeueable: bool
    ) -> Requeue | Fail | None:
        """Send the launch until acknowledged (None) or ``next_step`` gives up; backoff on Trio's clock."""
        attempt = 0
        while True:
            attempt += 1
            try:
                stub = await pool.stub(address, port)
                span(req.job.job_id, "ctl.launch-sent")
                await stub.LaunchJob(req, timeout=AGENT_CALL_TIMEOUT)
                span(req.job.job_id, "ctl.launch-acked")
                return None
            except RpcError as exc:
                step = next_step(
                    LAUNCH_POLICY, attempt, exc.code, exc.message, node=req.node, requeueable=requeueable
                )
            if not isinstance(step, Retry):
                return step
            await trio.sleep(step.delay)

    async def _cancel(self, pool: ChannelPool, job_id: int) -> None:
        """Signal every node of the allocation (batch script and steps alike) to end the job.

        Which agents' reports finish the job: the batch node for a batch job, every node for an
        interactive job; an allocation-only (salloc) job has no agent-side job, so once its steps
        are signalled the controller records its end itself.
        """
        ctl = self.ctl
        try:
            job = ctl.state.jobs.get(job_id)
            if job is None or job.state is not JobState.COMPLETING:
                return
            grace = float(ctl.cfg.controller.kill_grace_secs)
            reporters = set() if job.spec.allocation_only else {t[0] for t in self._launch_targets(job)}
            for alloc in job.allocation:
                node = ctl.state.nodes[alloc.node]
                try:
                    stub = await pool.stub(node.address, node.port)
                    await stub.SignalJob(
                        pb.SignalJobRequest(job_id=job_id, signal=0, grace_secs=grace),
                        timeout=AGENT_CALL_TIMEOUT,
                    )
                except RpcError as exc:
                    if exc.code is StatusCode.NOT_FOUND:
                        if alloc.node in reporters:
                            await ctl.raft_propose_quiet(
                                c.JobExited(job_id, alloc.node, 0, 0, ctl.clock.wall(), cancelled=True)
                            )
                    else:
                        log.warning(
                            "job %s: cancel on %s failed: %s (node sweep will settle it)",
                            job_id,
                            alloc.node,
                            exc,
                        )
                        return
            if job.spec.allocation_only:
                await ctl.raft_propose_quiet(
                    c.JobExited(job_id, job.allocation[0].node, 0, 0, ctl.clock.wall(), cancelled=True)
                )
            self._cancel_sent.add((job_id, job.restarts))
        finally:
            self._busy.discard((job_id, "cancel"))


class HealthSweep:
    """Marks nodes DOWN (and their jobs NODE_FAIL) after ``node_timeout_secs`` without a heartbeat."""

    def __init__(self, ctl: ControllerHost) -> None:
        self.ctl = ctl

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            timeout = float(self.ctl.cfg.controller.node_timeout_secs)  # re-read after reconfigure
            await trio.sleep(max(1.0, timeout / 6))
            await self.sweep(timeout)

    async def sweep(self, timeout: float) -> list[str]:
        ctl = self.ctl
        now = trio.current_time()
        lost = [
            name
            for name, node in ctl.state.nodes.items()
            if not node.down and now - ctl.last_seen.setdefault(name, now) > timeout
        ]
        if lost:
            log.warning("nodes not responding, marking DOWN: %s", ",".join(lost))
            await ctl.raft_propose_quiet(c.NodeLost(lost, "Not responding", ctl.clock.wall()))
        return lost
