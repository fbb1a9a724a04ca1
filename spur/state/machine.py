"""The cluster state machine: jobs, nodes, partitions, counters.

``ClusterState.apply`` is pure and deterministic: it reads only the command (whose leader stamped
every time and term into it) and the current state, and returns a result instead of raising for a
client's mistake (``Rejected``). The controller feeds it through Raft, so every controller that
applies the same log holds the same state, and a restart replays to the same place.
"""

from __future__ import annotations

import json
import sys
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

import orjson

from spur.core.eligibility import BEGIN_TIME, DEPENDENCY, NEVER, DepStatus, dependency_status
from spur.core.job import (
    UNLIMITED,
    Job,
    JobSpec,
    JobState,
    Node,
    NodeAllocation,
    Partition,
    PartitionState,
    Step,
)
from spur.core.serde import first_difference, from_plain, to_plain
from spur.state import commands as c
from spur.state.compact import task_spec
from spur.state.domain import Rejected as Rejected
from spur.state.domain import StateDomain
from spur.state.feasibility import PartitionSummary, partition_reason, submit_refusal
from spur.state.validation import validate_spec

if TYPE_CHECKING:
    from spur.state.feasibility import Refusal

# Slurm's priority/basic plugin gives the first job a high priority and each later one one less.
PRIORITY_BASE = 4294901760
# Slurm's MaxArraySize default is 1001 (task ids 0..1000); we allow more but keep a bound.
MAX_ARRAY_TASKS = 100_000

D = TypeVar("D", bound=StateDomain)



@dataclass
class Usage:
    """Resources held on one node by RUNNING/COMPLETING jobs (derived, never stored)."""

    cpus: int = 0
    mem_mb: int = 0
    gpus: set[int] = field(default_factory=set)
    jobs: set[int] = field(default_factory=set)
    exclusive: bool = False


class ProposedMismatch(AssertionError):
    """A proposed command is not exactly what its entry decodes to (``ClusterState.verify_proposed``):
    a leader applying it would hold a state its followers do not. A fault of the code that built it."""


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
        self.array_tasks: dict[int, list[Job]] = {}
        # Raft node id -> the address clients use for that controller.
        self.controllers: dict[int, str] = {}
        # Random, set once by the first leader (InitClusterId), never changed: tells clusters apart.
        self.cluster_id = ""
        from spur.state.domains import DOMAINS

        self.domains: dict[str, StateDomain] = {}
        self._domain_of: dict[type, StateDomain] = {}
        for domain_cls in DOMAINS:
            domain = domain_cls(self)
            self.domains[domain.name] = domain
            for cmd_cls in domain.commands:
                self._domain_of[cmd_cls] = domain
        self._summaries: dict[tuple[str, str], Any] = {}  # derived: see partition_summary
        from spur.state.sched_index import SchedIndex

        self.sched_index = SchedIndex()  # derived: the scheduler's incremental views
        from spur.state.compact import Interner

        self.interner = Interner()  # shares repeated strings and environments between jobs
        # Derived: jobs the leader's dispatcher must look at again (see take_dispatch_marks).
        self._dispatch_marks: set[int] = set()
        self._dispatch_all = True
        # Decode the leader's own entries too and compare them with what was proposed (the Controller
        # sets it from SPUR_VERIFY_PROPOSED=1, which the test runs set). Not state: changes no result.
        self.verify_proposed = False

    # ------------------------------------------------------------------ Raft protocol

    def apply(self, index: int, data: bytes, proposed: object | None = None) -> Any:
        """Raft's apply: the command ``data`` encodes, or ``proposed`` (the leader's own proposal, the
        object ``data`` was encoded from) when it is of the types ``commands.as_proposed`` takes, which
        saves decoding the leader's own entry. With ``verify_proposed`` set, such an object is decoded
        anyway and raises :class:`ProposedMismatch` (nothing applied) unless it is exactly the decoding."""
        cmd = c.as_proposed(proposed) if proposed is not None else None
        if cmd is None or self.verify_proposed:
            try:
                decoded = c.decode(data)
            except (ValueError, TypeError, KeyError) as exc:
                self.applied_index = index
                return Rejected("INVALID_ARGUMENT", f"undecodable command: {exc}")
            if cmd is None:
                cmd = decoded
            else:
                difference = first_difference(cmd, decoded)
                if difference is not None:
                    raise ProposedMismatch(
                        f"entry {index}: the proposed {type(cmd).__name__} is not what its entry decodes to "
                        f"(at {difference})"
                    )
        self.applied_index = index
        return self.apply_command(cmd)

    def apply_command(self, cmd: Any) -> Any:
        if type(cmd) is c.Batch:
            return [self.apply_command(inner) for inner in cmd.commands]
        domain = self._domain_of.get(type(cmd))
        if domain is not None:
            return domain.apply(cmd)
        handler = getattr(self, f"_apply_{type(cmd).__name__}")
        result = handler(cmd)
        self.sched_index.after_command(self, cmd)
        return result

    def snapshot(self) -> bytes:
        body = {
            "next_job_id": self.next_job_id,
            "applied_index": self.applied_index,
            "jobs": [to_plain(j) for j in self.jobs.values()],
            "nodes": [to_plain(n) for n in self.nodes.values()],
            "partitions": [to_plain(p) for p in self.partitions.values()],
            "controllers": {str(k): v for k, v in self.controllers.items()},
            "cluster_id": self.cluster_id,
            "domains": {name: d.snapshot() for name, d in self.domains.items()},
        }
        return json.dumps(body, separators=(",", ":")).encode()

    def decode_snapshot(self, data: bytes) -> ClusterState:
        """A fresh ClusterState restored from `data` (untrusted bytes); this state is untouched. Raises
        ValueError naming the problem when `data` is not a snapshot this code can restore."""
        scratch = ClusterState(history_max_jobs=self.history_max_jobs)
        try:
            scratch.restore(data)
        except Exception as exc:  # whatever the bytes make restore() raise, the answer is "not a snapshot"
            raise ValueError(f"not a cluster state snapshot ({type(exc).__name__}: {exc})"[:300]) from exc
        return scratch

    def adopt(self, decoded: object) -> None:
        """Take over the whole state of `decoded` (from `decode_snapshot`). This object, its domain objects
        and the domains dict keep their identity (collaborators hold references to them)."""
        if not isinstance(decoded, ClusterState):
            raise TypeError(
                f"adopt() takes a ClusterState from decode_snapshot, not {type(decoded).__name__}"
            )
        for name, domain in self.domains.items():
            vars(domain).update(vars(decoded.domains[name]))
            domain.state = self
        keep = {"domains", "_domain_of"}
        vars(self).update({k: v for k, v in vars(decoded).items() if k not in keep})

    def check_command(self, data: bytes) -> None:
        """Raise ValueError unless `data` is a command envelope of a known type (``{"type": name, "body":
        {...}}``, or a Batch of them). Cheap (one orjson parse, no objects built): Raft runs it on every
        replicated entry before storing it; `apply` still rejects a body that does not fit its type."""
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            obj = json.loads(data)  # what orjson refuses and json writes (NaN, Infinity); raises ValueError
        known = c.registry()
        if not isinstance(obj, dict) or not isinstance(obj.get("body"), dict):
            raise ValueError("not a command envelope (want an object with 'type' and an object 'body')")
        if obj.get("type") == "Batch":
            inner = obj["body"].get("commands")
            if not isinstance(inner, list):
                raise ValueError("a Batch body needs a list of commands")
            envelopes = inner
        else:
            envelopes = [obj]
        for envelope in envelopes:
            if not isinstance(envelope, dict) or not isinstance(envelope.get("body"), dict):
                raise ValueError("not a command envelope (want an object with 'type' and an object 'body')")
            name = envelope.get("type")
            if not isinstance(name, str) or name not in known:
                raise ValueError(f"unknown state command {str(name)[:64]!r}")

    def restore(self, data: bytes) -> None:
        body = json.loads(data)
        self.next_job_id = body["next_job_id"]
        self.applied_index = body.get("applied_index", 0)
        interner = self.interner
        self.jobs = {j["job_id"]: interner.job(from_plain(Job, j)) for j in body["jobs"]}
        self.nodes = {n["name"]: from_plain(Node, n) for n in body["nodes"]}
        self.partitions = {p["name"]: from_plain(Partition, p) for p in body["partitions"]}
        self.controllers = {int(k): v for k, v in body.get("controllers", {}).items()}
        self.cluster_id = body.get("cluster_id", "")
        domains = body.get("domains", {})
        for name, domain in self.domains.items():
            domain.restore(domains.get(name))
        self._rebuild_derived()

    def _rebuild_derived(self) -> None:
        self._summaries = {}
        self._dispatch_marks.clear()
        self._dispatch_all = True
        self._usage = {name: Usage() for name in self.nodes}
        self.sched_index.reset(self)
        for job in self.jobs.values():
            if job.state.holds_resources:
                self._hold(job)
        done = sorted(
            (j for j in self.jobs.values() if j.state.is_terminal), key=lambda j: (j.end_time, j.job_id)
        )
        self._finished = deque(j.job_id for j in done)
        self.array_tasks = {}
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            if job.array_job_id:
                self.array_tasks.setdefault(job.array_job_id, []).append(job)

    # ------------------------------------------------------------------ queries

    def default_partition(self) -> Partition | None:
        for p in self.partitions.values():
            if p.is_default:
                return p
        return next(iter(self.partitions.values()), None)

    def domain(self, cls: type[D]) -> D:
        """This state's instance of the domain class ``cls`` (``domains[cls.name]``, typed)."""
        domain = self.domains[cls.name]
        if not isinstance(domain, cls):
            raise TypeError(f"state domain {cls.name!r} is a {type(domain).__name__}, not a {cls.__name__}")
        return domain

    def partition_nodes(self, partition: Partition) -> list[str]:
        """Registered nodes belonging to ``partition`` (ALL = every registered node), in name order."""
        if partition.nodes_expr.strip().upper() in ("ALL", ""):
            return sorted(self.nodes)
        from spur.core.hostlist import expand

        members = set(expand(partition.nodes_expr))
        return sorted(n for n in self.nodes if n in members)

    def partitions_of(self, node_name: str) -> list[str]:
        return self.node_partitions().get(node_name, [])

    def node_partitions(self) -> dict[str, list[str]]:
        """Node name -> names of the partitions it belongs to (one hostlist expansion per partition)."""
        out: dict[str, list[str]] = {}
        for part in self.partitions.values():
            for name in self.partition_nodes(part):
                out.setdefault(name, []).append(part.name)
        return out

    def usage(self, node_name: str) -> Usage:
        """What ``node_name``'s running jobs hold (a fresh empty record the first time it is asked)."""
        used = self._usage.get(node_name)
        if used is None:  # not setdefault: that would build a Usage and its two sets on every call
            used = self._usage[node_name] = Usage()
        return used

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

    def active_jobs(self) -> list[Job]:
        """Jobs holding resources (running, completing, suspended) in job id order (from the
        scheduler index of holding jobs: no scan of the nodes)."""
        return [self.jobs[i] for i in sorted(self.sched_index.holding) if i in self.jobs]

    def live_job_count(self) -> int:
        """Jobs not finished (pending, running, completing, suspended): O(1), from the history index."""
        return max(0, len(self.jobs) - len(self._finished))

    def finished_job_ids(self) -> list[int]:
        return list(self._finished)

    # Unconsumed dispatch marks kept before falling back to "look at every job" (a follower never
    # consumes them).
    MAX_DISPATCH_MARKS = 100_000

    def take_dispatch_marks(self) -> set[int] | None:
        """Ids of the jobs that started, were launched, were asked to stop or released their
        resources since the last call: the only jobs whose launch, cancellation or clean-up can have
        become due. None: every job holding resources must be looked at (first call, after a
        restore, or after too many marks went unconsumed)."""
        if self._dispatch_all:
            self._dispatch_all = False
            self._dispatch_marks.clear()
            return None
        marks, self._dispatch_marks = self._dispatch_marks, set()
        return marks

    def _mark_dispatch(self, job_id: int) -> None:
        if len(self._dispatch_marks) >= self.MAX_DISPATCH_MARKS:
            self._dispatch_marks.clear()
            self._dispatch_all = True
        elif not self._dispatch_all:
            self._dispatch_marks.add(job_id)

    # ------------------------------------------------------------------ resource bookkeeping

    def _hold(self, job: Job) -> None:
        for a in job.allocation:
            u = self.usage(a.node)
            u.cpus += a.cpus
            u.mem_mb += a.mem_mb
            u.gpus.update(a.gpus)
            u.jobs.add(job.job_id)
            u.exclusive = u.exclusive or job.spec.exclusive
        self.sched_index.held(job)
        self._mark_dispatch(job.job_id)

    def _release(self, job: Job) -> None:
        for a in job.allocation:
            u = self.usage(a.node)
            u.cpus -= a.cpus
            u.mem_mb -= a.mem_mb
            u.gpus.difference_update(a.gpus)
            u.jobs.discard(job.job_id)
            if job.spec.exclusive:
                u.exclusive = False
        self.sched_index.released(job)
        self._mark_dispatch(job.job_id)

    def _finish(self, job: Job, state: JobState, end_time: float, reason: str | None = None) -> None:
        if job.state.holds_resources:
            self._release(job)
        job.state = state
        self.sched_index.finished(job)  # PENDING again when a node failure cut a requeue short
        job.end_time = end_time
        job.pending_final_state = None
        if reason is not None:
            job.reason = reason
        elif state is not JobState.PENDING:
            job.reason = "None"
        for step in job.steps:
            if not step.state.is_terminal:
                step.state = JobState.CANCELLED if state is JobState.CANCELLED else state
                step.end_time = end_time
        for domain in self.domains.values():
            domain.on_job_finished(job)
        self._finished.append(job.job_id)
        while len(self._finished) > self.history_max_jobs:
            gone = self.jobs.pop(self._finished.popleft(), None)
            if gone is not None and gone.array_job_id:
                tasks = self.array_tasks.get(gone.array_job_id, [])
                tasks[:] = [t for t in tasks if t.job_id != gone.job_id]
                if not tasks:
                    self.array_tasks.pop(gone.array_job_id, None)

    def _fits(self, job: Job, alloc: list[NodeAllocation]) -> str | None:
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
                return Rejected(
                    "INVALID_ARGUMENT",
                    f"invalid partition specified: {spec.partition}\nInvalid partition name specified",
                )
        else:
            part = self.default_partition()
            if part is None:
                return Rejected("INVALID_ARGUMENT", "no partition specified and no default partition")
        if part.state is PartitionState.INACTIVE:
            return Rejected("FAILED_PRECONDITION", f"partition {part.name} is inactive")
        refusal, limit_reason = self.feasibility(spec, part)
        if refusal is not None:
            return Rejected(refusal.code, refusal.message)
        limit = resolve_time_limit(spec.time_limit_secs, part)
        if limit is None:
            return Rejected(
                "INVALID_ARGUMENT", "requested time limit is invalid (missing or exceeds some limit)"
            )
        if spec.dependency:
            from spur.core.eligibility import dependency_error

            error = dependency_error(spec.dependency, self._known_ids())
            if error:
                return Rejected("INVALID_ARGUMENT", error)
        task_ids: list[int | None] = [None]
        max_running = 0
        if spec.array:
            from spur.core.job_options import parse_array_spec

            try:
                ids, limit_running = parse_array_spec(spec.array)
            except ValueError as exc:
                return Rejected("INVALID_ARGUMENT", str(exc))
            if len(ids) > MAX_ARRAY_TASKS:
                return Rejected(
                    "INVALID_ARGUMENT", f"job array of {len(ids)} tasks exceeds {MAX_ARRAY_TASKS}"
                )
            task_ids, max_running = list(ids), limit_running or 0
        accounting = self.domains.get("accounting")
        if accounting is not None:  # last check: on "" it has counted the jobs as submitted
            refused = accounting.admit(spec, cmd.user, part.name, len(task_ids))  # type: ignore[attr-defined]
            if refused:
                return Rejected("INVALID_ARGUMENT", refused)
        first = self.next_job_id
        self.next_job_id += len(task_ids)
        self.interner.spec(spec)
        user, group = sys.intern(cmd.user), sys.intern(cmd.group)
        for offset, task_id in enumerate(task_ids):
            job_id = first + offset
            job = Job(
                job_id=job_id,
                spec=spec if offset == 0 else task_spec(spec),
                user=user,
                uid=cmd.uid,
                gid=cmd.gid,
                group=group,
                partition=part.name,
                time_limit_secs=limit,
                submit_time=cmd.submit_time,
                priority=0 if spec.hold else self._base_priority(job_id, spec.nice),
                reason="JobHeldUser" if spec.hold else (limit_reason or "None"),
                eligible_time=max(cmd.submit_time, spec.begin_time),
            )
            if task_id is not None:
                job.array_job_id = first
                job.array_task_id = task_id
                job.array_max_running = max_running
                job.array_task_count = len(task_ids)
                job.array_task_min = cast(int, task_ids[0])  # an array: every id is a task id
                job.array_task_max = cast(int, task_ids[-1])
                self.array_tasks.setdefault(first, []).append(job)
            self.jobs[job_id] = job
            if not spec.hold:
                job.reason = self._submit_reason(job, cmd.submit_time) or job.reason
            self.sched_index.maybe_pending(job)
        if cmd.grant and task_ids == [None]:
            job = self.jobs[first]
            # The leader's immediate grant (spur.state.immediate): taken when the job may run at once
            # and the resources are still free here; otherwise the job pends for the scheduler pass.
            runnable = job.priority > 0 and job.reason == "None" and not spec.dependency
            if runnable and spec.begin_time <= cmd.submit_time and self._fits(job, cmd.grant) is None:
                self._start(job, list(cmd.grant), cmd.submit_time, cmd.term)
        return first

    def _submit_reason(self, job: Job, now: float) -> str | None:
        """The reason a job waits from the moment it is submitted, as slurmctld sets it at submit
        (``BeginTime``, ``Dependency``, ``DependencyNeverSatisfied``), or None."""
        if job.spec.begin_time and job.spec.begin_time > now:
            return BEGIN_TIME
        if job.spec.dependency:
            status = dependency_status(job, self.jobs, self.array_tasks, now)
            if status is DepStatus.WAITING:
                return DEPENDENCY
            if status is DepStatus.NEVER:
                return NEVER
        return None

    def partition_summary(self, part: Partition) -> PartitionSummary:
        """What ``part``'s registered nodes offer at most (cached until a node registers)."""
        key = (part.name, part.nodes_expr)
        summary = self._summaries.get(key)
        if summary is None:
            summary = PartitionSummary.of(self.nodes[n] for n in self.partition_nodes(part))
            self._summaries[key] = summary
        return summary

    def feasibility(self, spec: JobSpec, part: Partition) -> tuple[Refusal | None, str | None]:
        """Slurm's verdict at submission (see spur.state.feasibility): refused, or the pending reason."""
        summary = self.partition_summary(part)
        configured = None
        if spec.nodelist and part.nodes_expr.strip().upper() not in ("ALL", ""):
            from spur.core.hostlist import expand

            configured = set(expand(part.nodes_expr))
        refusal = submit_refusal(spec, summary, self.nodes, configured, part.enforce_limits)
        return refusal, (None if refusal else partition_reason(spec, summary))

    @staticmethod
    def _base_priority(job_id: int, nice: int) -> int:
        return max(1, PRIORITY_BASE - job_id - nice)

    def _known_ids(self) -> set[int]:
        return set(self.jobs) | set(self.array_tasks)

    def resolve_targets(self, job_id: int, array_task_id: int | None = None) -> list[Job]:
        """Jobs named by an id as Slurm reads it: a job, a whole array, or one task (A_T)."""
        if array_task_id is not None:
            return [j for j in self.array_tasks.get(job_id, []) if j.array_task_id == array_task_id]
        if job_id in self.array_tasks:
            return list(self.array_tasks[job_id])
        job = self.jobs.get(job_id)
        return [job] if job is not None else []

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
        self._summaries = {}
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

    def _apply_RemoveNode(self, cmd: c.RemoveNode) -> Any:
        unknown = [n for n in cmd.names if n not in self.nodes]
        if unknown:
            return Rejected("NOT_FOUND", f"Invalid node name specified: {','.join(unknown)}")
        busy = [n for n in cmd.names if self.usage(n).jobs]
        if busy:
            return Rejected(
                "FAILED_PRECONDITION",
                f"node(s) {','.join(busy)} still run jobs: drain them and wait for the jobs to end first",
            )
        for name in cmd.names:
            del self.nodes[name]
            self._usage.pop(name, None)
        self._summaries = {}
        return list(cmd.names)

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

    def _apply_ForgetNode(self, cmd: c.ForgetNode) -> Any:
        """Returns the ids of the jobs that ended NODE_FAIL because they ran there."""
        if cmd.name not in self.nodes:
            return Rejected("NOT_FOUND", f"Invalid node name specified: {cmd.name}")
        failed = sorted(self.usage(cmd.name).jobs)
        self._fail_jobs_on(cmd.name, cmd.time)
        del self.nodes[cmd.name]
        self._usage.pop(cmd.name, None)
        self._summaries = {}
        return failed

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
        self._start(job, cmd.allocation, cmd.start_time, cmd.term)
        return True

    def _start(self, job: Job, allocation: list[NodeAllocation], when: float, term: int) -> None:
        """``job`` (pending, ``allocation`` checked by ``_fits``) runs from ``when`` on ``allocation``."""
        job.state = JobState.RUNNING
        job.reason = "None"
        job.allocation = allocation
        job.start_time = when
        job.alloc_term = term
        job.launched = False
        job.exited_nodes = []
        self._hold(job)

    def _apply_JobLaunched(self, cmd: c.JobLaunched) -> Any:
        job = self.jobs.get(cmd.job_id)
        if job is None or not job.state.holds_resources:
            return False
        job.launched = True
        self._mark_dispatch(job.job_id)  # a stop that came while the launch was in flight is due now
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
        self.sched_index.maybe_pending(job)
        if job.restarts >= 3:
            self._finish(job, JobState.FAILED, cmd.time, f"launch failed: {cmd.message}")
        else:
            job.start_time = 0.0
            job.reason = "launch failed requeued"
        return True

    def _apply_CancelJob(self, cmd: c.CancelJob) -> Any:
        targets = self.resolve_targets(cmd.job_id, cmd.array_task_id)
        if not targets:
            return Rejected("NOT_FOUND", "Invalid job id specified")
        if not (cmd.admin or cmd.requester_uid == 0) and any(cmd.requester_uid != j.uid for j in targets):
            return Rejected(
                "PERMISSION_DENIED",
                f"Access/permission denied: cancelling job {cmd.job_id} of another user needs the "
                "administrator privilege",
            )
        live = [j for j in targets if not j.state.is_terminal]
        if not live:
            return Rejected("FAILED_PRECONDITION", "Job/step already completing or completed")
        for job in live:
            if job.state is JobState.PENDING:
                self._finish(job, JobState.CANCELLED, cmd.time)
            elif job.state in (JobState.RUNNING, JobState.SUSPENDED):
                self._stop(job, JobState.CANCELLED, cmd.time)
        return live[0].state.value

    def _stop(self, job: Job, final: JobState, when: float) -> None:
        """Ask the agents to end a running job; it becomes ``final`` once they report it gone."""
        if job.state is JobState.SUSPENDED:
            job.suspended_secs += max(0.0, when - job.suspend_time)
            job.suspend_time = 0.0
        job.state = JobState.COMPLETING
        job.pending_final_state = final
        job.end_time = when
        self._mark_dispatch(job.job_id)

    def _requeue(self, job: Job, hold: bool) -> None:
        """Back to PENDING for a fresh allocation (resources already released)."""
        job.state = JobState.PENDING
        self.sched_index.maybe_pending(job)
        job.pending_final_state = None
        job.allocation = []
        job.launched = False
        job.exited_nodes = []
        job.start_time = job.end_time = 0.0
        job.exit_code = job.signal = 0
        job.restarts += 1
        job.steps = []
        job.next_step_id = 0
        job.requeue_hold = False
        if hold:
            job.priority = 0
            job.reason = "JobHeldUser"
        else:
            job.reason = "None"

    def _apply_UpdateJob(self, cmd: c.UpdateJob) -> Any:
        targets = self.resolve_targets(cmd.job_id, cmd.array_task_id)
        if not targets:
            return Rejected("NOT_FOUND", "Invalid job id specified")
        admin = cmd.admin or cmd.requester_uid == 0
        if any(not admin and cmd.requester_uid != j.uid for j in targets):
            return Rejected(
                "PERMISSION_DENIED",
                f"Access/permission denied: updating job {cmd.job_id} of another user needs the "
                "administrator privilege",
            )
        if cmd.priority is not None and not admin:
            return Rejected(
                "PERMISSION_DENIED", "Access/permission denied: only an administrator may set Priority"
            )
        for job in targets:
            error = self._check_update(job, cmd, admin)
            if error:
                return error
        for job in targets:
            self._update_one(job, cmd, admin)
        return [j.job_id for j in targets]

    def _check_update(self, job: Job, cmd: c.UpdateJob, admin: bool) -> Rejected | None:
        if job.state.is_terminal and cmd.action not in ("requeue", "requeuehold"):
            return Rejected("FAILED_PRECONDITION", "Job has already finished")  # Slurm's ESLURM_ALREADY_DONE
        pending = job.state is JobState.PENDING
        if cmd.partition is not None:
            if not pending:
                return Rejected("FAILED_PRECONDITION", "Job is no longer pending execution")
            if cmd.partition not in self.partitions:
                return Rejected("INVALID_ARGUMENT", "Invalid partition name specified")
        if cmd.time_limit_secs is not None:
            if job.state.is_terminal or job.state is JobState.COMPLETING:
                return Rejected("FAILED_PRECONDITION", "Job/step already completing or completed")
            current = job.time_limit_secs
            raising = cmd.time_limit_secs == UNLIMITED or (
                current != UNLIMITED and cmd.time_limit_secs > current
            )
            if not pending and raising and not admin:
                return Rejected(
                    "PERMISSION_DENIED",
                    "Access/permission denied: only an administrator may raise the time limit of a running job",
                )
            part = self.partitions.get(cmd.partition or job.partition)
            if part is None or (
                not admin and resolve_time_limit(cmd.time_limit_secs or UNLIMITED, part) is None
            ):
                return Rejected(
                    "INVALID_ARGUMENT", "Requested time limit is invalid (missing or exceeds some limit)"
                )
        if cmd.nice is not None and cmd.nice < 0 and not admin:
            return Rejected(
                "PERMISSION_DENIED", "Access/permission denied: only an administrator may set a negative nice"
            )
        action = cmd.action
        if action in ("hold", "uhold", "release") and not pending:
            return Rejected("FAILED_PRECONDITION", "Job is no longer pending execution")
        if action == "release" and job.held_by_admin and not admin:
            return Rejected("PERMISSION_DENIED", "Access/permission denied: job held by an administrator")
        if action in ("requeue", "requeuehold"):
            if job.spec.interactive:
                return Rejected("FAILED_PRECONDITION", "Only batch jobs are accepted or processed")
            if job.state in (JobState.PENDING, JobState.COMPLETING):
                return Rejected(
                    "FAILED_PRECONDITION", "Job is pending execution" if pending else "Job is completing"
                )
        if action == "suspend":
            if not admin:
                return Rejected(
                    "PERMISSION_DENIED", "Access/permission denied: suspend requires an administrator"
                )
            if job.state is not JobState.RUNNING or not job.launched:
                return Rejected("FAILED_PRECONDITION", "Job is not running")
        if action == "resume":
            if not admin:
                return Rejected(
                    "PERMISSION_DENIED", "Access/permission denied: resume requires an administrator"
                )
            if job.state is not JobState.SUSPENDED:
                return Rejected("FAILED_PRECONDITION", "Job is not suspended")
        if action not in ("", "hold", "uhold", "release", "requeue", "requeuehold", "suspend", "resume"):
            return Rejected("INVALID_ARGUMENT", f"unknown job action {action!r}")
        return None

    def _update_one(self, job: Job, cmd: c.UpdateJob, admin: bool) -> None:
        if cmd.partition is not None:
            job.partition = cmd.partition
        if cmd.time_limit_secs is not None:
            part = self.partitions[job.partition]
            job.time_limit_secs = resolve_time_limit(cmd.time_limit_secs, part) or cmd.time_limit_secs
        if cmd.name is not None:
            job.spec.name = cmd.name
        if cmd.comment is not None:
            job.spec.comment = cmd.comment
        if cmd.nice is not None:
            job.spec.nice = cmd.nice
            if job.priority:
                job.priority = self._base_priority(job.job_id, cmd.nice)
        if cmd.priority is not None:
            job.priority = max(0, cmd.priority)
            job.reason = "JobHeldAdmin" if job.priority == 0 else job.reason
        action = cmd.action
        if action in ("hold", "uhold"):
            job.priority = 0
            job.held_by_admin = admin and action == "hold"
            job.reason = "JobHeldAdmin" if job.held_by_admin else "JobHeldUser"
        elif action == "release":
            if job.priority == 0:
                job.priority = self._base_priority(job.job_id, job.spec.nice)
            job.held_by_admin = False
            job.reason = "None"
        elif action in ("requeue", "requeuehold"):
            hold = action == "requeuehold"
            if job.state.is_terminal:
                self._finished = deque(i for i in self._finished if i != job.job_id)
                self._requeue(job, hold)
            else:
                self._stop(job, JobState.PENDING, cmd.time)
                job.requeue_hold = hold
        elif action == "suspend":
            job.state = JobState.SUSPENDED
            job.suspend_time = cmd.time
        elif action == "resume":
            job.suspended_secs += max(0.0, cmd.time - job.suspend_time)
            job.suspend_time = 0.0
            job.state = JobState.RUNNING

    def _apply_CreateStep(self, cmd: c.CreateStep) -> Any:
        job = self.jobs.get(cmd.job_id)
        if job is None:
            return Rejected("NOT_FOUND", "Invalid job id specified")
        if not (cmd.admin or cmd.requester_uid == 0) and cmd.requester_uid != job.uid:
            return Rejected(
                "PERMISSION_DENIED",
                f"Access/permission denied: a step in job {cmd.job_id} of another user needs the "
                "administrator privilege",
            )
        if job.state is not JobState.RUNNING or not job.launched:
            return Rejected("FAILED_PRECONDITION", "Job is not running: cannot create a step")
        spec = cmd.spec
        nodes = list(job.allocation)
        if spec.nodelist:
            wanted = set(spec.nodelist)
            nodes = [a for a in nodes if a.node in wanted]
            if len(nodes) != len(wanted):
                return Rejected("INVALID_ARGUMENT", "Requested nodes are not part of the job's allocation")
        if spec.num_nodes > len(nodes):
            return Rejected(
                "INVALID_ARGUMENT",
                f"Requested node configuration is not available: {spec.num_nodes} nodes asked, "
                f"{len(nodes)} in the allocation",
            )
        per = spec.ntasks_per_node
        if per:
            count = spec.num_nodes or (
                min(len(nodes), -(-spec.num_tasks // per)) if spec.num_tasks else len(nodes)
            )
            tasks = spec.num_tasks or per * count
            if tasks > per * count:
                return Rejected(
                    "INVALID_ARGUMENT",
                    f"{tasks} tasks do not fit {count} node(s) at --ntasks-per-node={per}",
                )
        else:
            tasks = spec.num_tasks or (spec.num_nodes or len(nodes))
            count = spec.num_nodes or min(len(nodes), tasks)
        if tasks < count:
            return Rejected("INVALID_ARGUMENT", f"fewer tasks ({tasks}) than nodes ({count})")
        chosen = nodes[:count]
        per_node = [tasks // count + (1 if i < tasks % count else 0) for i in range(count)]
        cpt = spec.cpus_per_task or job.spec.cpus_per_task
        if any(n * cpt > a.cpus for a, n in zip(chosen, per_node, strict=True)):
            # As slurmctld: a step gets at most the CPUs its job holds on each node.
            return Rejected("INVALID_ARGUMENT", "More processors requested than permitted")
        allocation = [
            NodeAllocation(
                node=a.node, cpus=min(a.cpus, n * cpt), mem_mb=a.mem_mb, gpus=list(a.gpus), tasks=n
            )
            for a, n in zip(chosen, per_node, strict=True)
        ]
        step = Step(step_id=job.next_step_id, spec=spec, start_time=cmd.time, allocation=allocation)
        job.next_step_id += 1
        job.steps.append(step)
        return step

    def _apply_StepExited(self, cmd: c.StepExited) -> Any:
        job = self.jobs.get(cmd.job_id)
        if job is None:
            return False
        step = next((st for st in job.steps if st.step_id == cmd.step_id), None)
        if step is None or step.state.is_terminal or cmd.node not in {a.node for a in step.allocation}:
            return False
        if cmd.node not in step.exited_nodes:
            step.exited_nodes.append(cmd.node)
        step.exit_code = max(step.exit_code, cmd.exit_code)
        step.signal = step.signal or cmd.signal
        if len(step.exited_nodes) < len(step.allocation) and not cmd.launch_failed:
            return True
        if cmd.cancelled and not step.exit_code:  # a task that failed first (-K) makes it FAILED
            step.state = JobState.CANCELLED
        elif step.exit_code or step.signal or cmd.launch_failed:
            step.state = JobState.FAILED
        else:
            step.state = JobState.COMPLETED
        step.end_time = cmd.end_time
        return True

    def _apply_JobExited(self, cmd: c.JobExited) -> Any:
        job = self.jobs.get(cmd.job_id)
        if job is None or not job.state.holds_resources or cmd.node not in job.nodes:
            return False
        if cmd.node not in job.exited_nodes:
            job.exited_nodes.append(cmd.node)
        job.exit_code = max(job.exit_code, cmd.exit_code)
        job.signal = job.signal or cmd.signal
        waits_for_all = job.spec.interactive and not job.spec.allocation_only
        if waits_for_all and len(job.exited_nodes) < len(job.allocation) and not cmd.launch_failed:
            return True
        if job.pending_final_state is JobState.PENDING:  # requeue: the processes are gone, start over
            self._release(job)
            self._requeue(job, job.requeue_hold)
            return True
        if job.pending_final_state is not None:
            final, reason = job.pending_final_state, None
        elif cmd.timed_out:
            final, reason = JobState.TIMEOUT, "TimeLimit"
        elif cmd.cancelled:
            final, reason = JobState.CANCELLED, None
        elif cmd.launch_failed:
            final, reason = JobState.FAILED, cmd.message or "launch failed"
        elif cmd.out_of_memory:
            final, reason = JobState.OUT_OF_MEMORY, "OutOfMemory"
        elif job.exit_code != 0 or job.signal != 0:
            final, reason = JobState.FAILED, "NonZeroExitCode"
        else:
            final, reason = JobState.COMPLETED, None
        self._finish(job, final, cmd.end_time, reason)
        return True

    def _apply_AnnounceController(self, cmd: c.AnnounceController) -> Any:
        if cmd.node_id < 1 or not cmd.address:
            return Rejected("INVALID_ARGUMENT", "controller announcement needs a node id and an address")
        self.controllers[cmd.node_id] = cmd.address
        return True

    def _apply_InitClusterId(self, cmd: c.InitClusterId) -> Any:
        if not cmd.cluster_id:
            return Rejected("INVALID_ARGUMENT", "a cluster id must not be empty")
        if not self.cluster_id:
            self.cluster_id = cmd.cluster_id
        return self.cluster_id

    def _apply_SetPendingReasons(self, cmd: c.SetPendingReasons) -> Any:
        for key, reason in cmd.reasons.items():
            job = self.jobs.get(int(key))
            if job is not None and job.state is JobState.PENDING and job.priority != 0:
                job.reason = reason
        return True


def resolve_time_limit(requested: int, part: Partition) -> int | None:
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
