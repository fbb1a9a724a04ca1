"""The cluster state machine: jobs, nodes, partitions, counters.

``ClusterState.apply`` is pure and deterministic: it reads only the command (whose leader stamped
every time and term into it) and the current state, and returns a result instead of raising for a
client's mistake (``Rejected``). The controller feeds it through Raft, so every controller that
applies the same log holds the same state, and a restart replays to the same place.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from spur.core.job import (
    UNLIMITED,
    Job,
    JobState,
    Node,
    Partition,
    PartitionState,
)
from spur.core.serde import from_plain, to_plain
from spur.state import commands as c
from spur.state.validation import validate_spec

# Slurm's priority/basic plugin gives the first job a high priority and each later one one less.
PRIORITY_BASE = 4294901760


@dataclass
class Rejected:
    """A command the state refused; ``code`` is a gRPC status name, ``message`` is for the user."""

    code: str
    message: str


@dataclass
class Usage:
    """Resources held on one node by RUNNING/COMPLETING jobs (derived, never stored)."""

    cpus: int = 0
    mem_mb: int = 0
    gpus: set[int] = field(default_factory=set)
    jobs: set[int] = field(default_factory=set)
    exclusive: bool = False


class ClusterState:
    """All replicated cluster state. Implements the Raft ``StateMachine`` protocol."""

    def __init__(self, *, history_max_jobs: int = 100_000) -> None:
        self.history_max_jobs = history_max_jobs
        self.jobs: dict[int, Job] = {}
        self.nodes: dict[str, Node] = {}
        self.partitions: dict[str, Partition] = {"default": Partition("default", is_default=True)}
        self.next_job_id = 1
        self.applied_index = 0
        self._usage: dict[str, Usage] = {}
        self._finished: deque[int] = deque()

    # ------------------------------------------------------------------ Raft protocol

    def apply(self, index: int, data: bytes) -> Any:
        self.applied_index = index
        try:
            cmd = c.decode(data)
        except (ValueError, TypeError, KeyError) as exc:
            return Rejected("INVALID_ARGUMENT", f"undecodable command: {exc}")
        return self.apply_command(cmd)

    def apply_command(self, cmd: Any) -> Any:
        handler = getattr(self, f"_apply_{type(cmd).__name__}")
        return handler(cmd)

    def snapshot(self) -> bytes:
        body = {
            "next_job_id": self.next_job_id,
            "applied_index": self.applied_index,
            "jobs": [to_plain(j) for j in self.jobs.values()],
            "nodes": [to_plain(n) for n in self.nodes.values()],
            "partitions": [to_plain(p) for p in self.partitions.values()],
        }
        return json.dumps(body, separators=(",", ":")).encode()

    def restore(self, data: bytes) -> None:
        body = json.loads(data)
        self.next_job_id = body["next_job_id"]
        self.applied_index = body.get("applied_index", 0)
        self.jobs = {j["job_id"]: from_plain(Job, j) for j in body["jobs"]}
        self.nodes = {n["name"]: from_plain(Node, n) for n in body["nodes"]}
        self.partitions = {p["name"]: from_plain(Partition, p) for p in body["partitions"]}
        self._rebuild_derived()

    def _rebuild_derived(self) -> None:
        self._usage = {name: Usage() for name in self.nodes}
        for job in self.jobs.values():
            if job.state.holds_resources:
                self._hold(job)
        done = sorted(
            (j for j in self.jobs.values() if j.state.is_terminal), key=lambda j: (j.end_time, j.job_id)
        )
        self._finished = deque(j.job_id for j in done)

    # ------------------------------------------------------------------ queries

    def default_partition(self) -> Partition | None:
        for p in self.partitions.values():
            if p.is_default:
                return p
        return next(iter(self.partitions.values()), None)

    def partition_nodes(self, partition: Partition) -> list[str]:
        """Registered nodes belonging to ``partition`` (ALL = every registered node), in name order."""
        if partition.nodes_expr.strip().upper() in ("ALL", ""):
            return sorted(self.nodes)
        from spur.core.hostlist import expand

        members = set(expand(partition.nodes_expr))
        return sorted(n for n in self.nodes if n in members)

    def partitions_of(self, node_name: str) -> list[str]:
        return [p.name for p in self.partitions.values() if node_name in self.partition_nodes(p)]

    def usage(self, node_name: str) -> Usage:
        return self._usage.setdefault(node_name, Usage())

    def node_state(self, name: str) -> str:
        """Slurm's long node state: idle, mixed, allocated, down, drained, draining."""
        node = self.nodes[name]
        used = self.usage(name)
        if node.down:
            return "down"
        if node.drain:
            return "draining" if used.jobs else "drained"
        if not used.jobs:
            return "idle"
        if used.exclusive or used.cpus >= node.cpus:
            return "allocated"
        return "mixed"

    def node_available(self, name: str) -> bool:
        node = self.nodes.get(name)
        return node is not None and not node.down and not node.drain

    def finished_job_ids(self) -> list[int]:
        return list(self._finished)

    # ------------------------------------------------------------------ resource bookkeeping

    def _hold(self, job: Job) -> None:
        for a in job.allocation:
            u = self.usage(a.node)
            u.cpus += a.cpus
            u.mem_mb += a.mem_mb
            u.gpus.update(a.gpus)
            u.jobs.add(job.job_id)
            u.exclusive = u.exclusive or job.spec.exclusive

    def _release(self, job: Job) -> None:
        for a in job.allocation:
            u = self.usage(a.node)
            u.cpus -= a.cpus
            u.mem_mb -= a.mem_mb
            u.gpus.difference_update(a.gpus)
            u.jobs.discard(job.job_id)
            if job.spec.exclusive:
                u.exclusive = False

    def _finish(self, job: Job, state: JobState, end_time: float, reason: str | None = None) -> None:
        if job.state.holds_resources:
            self._release(job)
        job.state = state
        job.end_time = end_time
        job.pending_final_state = None
        if reason is not None:
            job.reason = reason
        elif state is not JobState.PENDING:
            job.reason = "None"
        self._finished.append(job.job_id)
        while len(self._finished) > self.history_max_jobs:
            self.jobs.pop(self._finished.popleft(), None)

    def _fits(self, job: Job, alloc: list) -> str | None:
        """Why ``alloc`` cannot be granted to ``job`` now, or None when it can."""
        if not alloc:
            return "empty allocation"
        if len({a.node for a in alloc}) != len(alloc):
            return "allocation names a node twice"
        for a in alloc:
            node = self.nodes.get(a.node)
            if node is None:
                return f"unknown node {a.node}"
            if node.down or node.drain:
                return f"node {a.node} is not available"
            used = self.usage(a.node)
            if used.exclusive or (job.spec.exclusive and used.jobs):
                return f"node {a.node} is held exclusively"
            if used.cpus + a.cpus > node.cpus:
                return f"node {a.node} lacks cpus"
            if a.mem_mb and node.memory_mb and used.mem_mb + a.mem_mb > node.memory_mb:
                return f"node {a.node} lacks memory"
            known = {g.index for g in node.gpus}
            if not set(a.gpus) <= known or set(a.gpus) & used.gpus:
                return f"node {a.node} lacks the requested GPUs"
        return None

    # ------------------------------------------------------------------ command handlers

    def _apply_ConfigurePartitions(self, cmd: c.ConfigurePartitions) -> Any:
        if not cmd.partitions:
            return Rejected("INVALID_ARGUMENT", "at least one partition is required")
        self.partitions = {p.name: p for p in cmd.partitions}
        return True

    def _apply_SubmitJob(self, cmd: c.SubmitJob) -> Any:
        spec = cmd.spec
        error = validate_spec(spec)
        if error:
            return Rejected("INVALID_ARGUMENT", error)
        if spec.partition:
            part = self.partitions.get(spec.partition)
            if part is None:
                return Rejected("INVALID_ARGUMENT", "invalid partition name specified")
        else:
            part = self.default_partition()
            if part is None:
                return Rejected("INVALID_ARGUMENT", "no partition specified and no default partition")
        if part.state is PartitionState.INACTIVE:
            return Rejected("FAILED_PRECONDITION", f"partition {part.name} is inactive")
        limit = _resolve_time_limit(spec.time_limit_secs, part)
        if limit is None:
            return Rejected(
                "INVALID_ARGUMENT", "requested time limit is invalid (missing or exceeds some limit)"
            )
        job_id = self.next_job_id
        self.next_job_id += 1
        job = Job(
            job_id=job_id,
            spec=spec,
            user=cmd.user,
            uid=cmd.uid,
            gid=cmd.gid,
            group=cmd.group,
            partition=part.name,
            time_limit_secs=limit,
            submit_time=cmd.submit_time,
            priority=0 if spec.hold else max(1, PRIORITY_BASE - job_id - spec.nice),
            reason="JobHeldUser" if spec.hold else "None",
        )
        self.jobs[job_id] = job
        return job_id

    def _apply_RegisterNode(self, cmd: c.RegisterNode) -> Any:
        new = cmd.node
        old = self.nodes.get(new.name)
        if old is not None:
            # Admin state survives re-registration; a node that was lost is back in service.
            new.drain = old.drain
            new.down = old.down and old.reason != "Not responding"
            new.reason = "" if not (new.down or new.drain) else old.reason
            new.reason_time = old.reason_time
        new.registered_time = cmd.time
        self.nodes[new.name] = new
        self._usage.setdefault(new.name, Usage())
        return True

    def _apply_UpdateNode(self, cmd: c.UpdateNode) -> Any:
        unknown = [n for n in cmd.names if n not in self.nodes]
        if unknown:
            return Rejected("NOT_FOUND", f"Invalid node name specified: {','.join(unknown)}")
        action = cmd.action.upper()
        if action in ("DRAIN", "DOWN") and not cmd.reason:
            return Rejected(
                "INVALID_ARGUMENT",
                "You must specify a reason when DOWNING or DRAINING a node. Request denied",
            )
        if action not in ("DRAIN", "DOWN", "RESUME", "UNDRAIN", "IDLE"):
            return Rejected("INVALID_ARGUMENT", f"Invalid node state specified: {cmd.action}")
        for name in cmd.names:
            node = self.nodes[name]
            if action == "DRAIN":
                node.drain, node.reason, node.reason_time = True, cmd.reason, cmd.time
            elif action == "DOWN":
                node.down, node.reason, node.reason_time = True, cmd.reason, cmd.time
                self._fail_jobs_on(name, cmd.time)
            elif action == "UNDRAIN":
                node.drain = False
                if not node.down:
                    node.reason = ""
            else:
                node.down = node.drain = False
                node.reason = ""
        return True

    def _fail_jobs_on(self, node_name: str, when: float) -> None:
        for job_id in sorted(self.usage(node_name).jobs):
            job = self.jobs[job_id]
            final = job.pending_final_state or JobState.NODE_FAIL
            self._finish(job, final, when)

    def _apply_NodeLost(self, cmd: c.NodeLost) -> Any:
        for name in cmd.names:
            node = self.nodes.get(name)
            if node is None or node.down:
                continue
            node.down, node.reason, node.reason_time = True, cmd.reason, cmd.time
            self._fail_jobs_on(name, cmd.time)
        return True

    def _apply_NodeReturned(self, cmd: c.NodeReturned) -> Any:
        node = self.nodes.get(cmd.name)
        if node is None:
            return Rejected("NOT_FOUND", f"unknown node {cmd.name}")
        if node.down and node.reason == "Not responding":
            node.down, node.reason = False, ""
        return True

    def _apply_StartJob(self, cmd: c.StartJob) -> Any:
        job = self.jobs.get(cmd.job_id)
        if job is None or job.state is not JobState.PENDING or job.priority == 0:
            return Rejected("FAILED_PRECONDITION", f"job {cmd.job_id} is not startable")
        why = self._fits(job, cmd.allocation)
        if why:
            return Rejected("FAILED_PRECONDITION", why)
        job.state = JobState.RUNNING
        job.reason = "None"
        job.allocation = cmd.allocation
        job.start_time = cmd.start_time
        job.alloc_term = cmd.term
        job.launched = False
        job.exited_nodes = []
        self._hold(job)
        return True

    def _apply_JobLaunched(self, cmd: c.JobLaunched) -> Any:
        job = self.jobs.get(cmd.job_id)
        if job is None or not job.state.holds_resources:
            return False
        job.launched = True
        return True

    def _apply_LaunchFailed(self, cmd: c.LaunchFailed) -> Any:
        job = self.jobs.get(cmd.job_id)
        if job is None or not job.state.holds_resources:
            return False
        if job.pending_final_state is not None:
            self._finish(job, job.pending_final_state, cmd.time)
            return True
        self._release(job)
        job.restarts += 1
        job.allocation = []
        job.launched = False
        job.state = JobState.PENDING  # holds nothing now, so _finish below releases nothing
        if job.restarts >= 3:
            self._finish(job, JobState.FAILED, cmd.time, f"launch failed: {cmd.message}")
        else:
            job.start_time = 0.0
            job.reason = "launch failed requeued"
        return True

    def _apply_CancelJob(self, cmd: c.CancelJob) -> Any:
        job = self.jobs.get(cmd.job_id)
        if job is None:
            return Rejected("NOT_FOUND", "Invalid job id specified")
        if cmd.requester_uid not in (0, job.uid):
            return Rejected("PERMISSION_DENIED", "Access/permission denied")
        if job.state.is_terminal:
            return Rejected("FAILED_PRECONDITION", "Job/step already completing or completed")
        if job.state is JobState.PENDING:
            self._finish(job, JobState.CANCELLED, cmd.time)
        elif job.state is JobState.RUNNING:
            job.state = JobState.COMPLETING
            job.pending_final_state = JobState.CANCELLED
            job.end_time = cmd.time
        return job.state.value

    def _apply_JobExited(self, cmd: c.JobExited) -> Any:
        job = self.jobs.get(cmd.job_id)
        if job is None or not job.state.holds_resources or cmd.node not in job.nodes:
            return False
        if cmd.node not in job.exited_nodes:
            job.exited_nodes.append(cmd.node)
        job.exit_code = max(job.exit_code, cmd.exit_code)
        job.signal = job.signal or cmd.signal
        if job.spec.interactive and len(job.exited_nodes) < len(job.allocation) and not cmd.launch_failed:
            return True
        if job.pending_final_state is not None:
            final, reason = job.pending_final_state, None
        elif cmd.timed_out:
            final, reason = JobState.TIMEOUT, "TimeLimit"
        elif cmd.cancelled:
            final, reason = JobState.CANCELLED, None
        elif cmd.launch_failed:
            final, reason = JobState.FAILED, cmd.message or "launch failed"
        elif job.exit_code != 0 or job.signal != 0:
            final, reason = JobState.FAILED, "NonZeroExitCode"
        else:
            final, reason = JobState.COMPLETED, None
        self._finish(job, final, cmd.end_time, reason)
        return True

    def _apply_SetPendingReasons(self, cmd: c.SetPendingReasons) -> Any:
        for key, reason in cmd.reasons.items():
            job = self.jobs.get(int(key))
            if job is not None and job.state is JobState.PENDING and job.priority != 0:
                job.reason = reason
        return True


def _resolve_time_limit(requested: int, part: Partition) -> int | None:
    """Effective limit in seconds (UNLIMITED allowed); None when it exceeds the partition's MaxTime."""
    if requested == 0:
        limit = part.default_time_secs if part.default_time_secs != UNLIMITED else part.max_time_secs
    elif requested == UNLIMITED:
        limit = part.max_time_secs
    else:
        limit = requested
    if part.max_time_secs != UNLIMITED and (limit == UNLIMITED or limit > part.max_time_secs):
        return None
    return limit
