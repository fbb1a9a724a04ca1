"""Immediate grant: slurmctld's quick path, which allocates a job that fits now at submission.

slurmctld's ``job_allocate`` starts a new job in the same call that creates it when the job could
run at once (no hold, dependency or future begin time, no partition limit in the way), no other
runnable job of its partition has a higher priority, and the nodes it needs are free. Spur does the
same in two halves:

- here, on the leader before it proposes ``SubmitJob``: :func:`decide_grant` reads the state and asks
  the scheduler plugin where the job would start now (``spur_place_now``). The answer travels in the
  command (``SubmitJob.grant``), so every replica applies the same decision;
- in ``ClusterState._apply_SubmitJob``: the job starts in that same entry when the grant still fits the
  free resources it sees (another entry applied in between may have taken them: then the job simply
  pends for the scheduler pass, which handles every job that is not granted here).

Submissions the leader decided on but Raft has not applied yet are ``InFlight``: a granted one's
resources count as taken, and one that pends ahead of a new job keeps the new one from overtaking it.
Pure: no I/O; the plugin and the priority and limit calculations come in as callables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import count, islice
from typing import TYPE_CHECKING, Protocol

from spur.core.eligibility import ineligible_reason
from spur.core.frozen_init import quick_init
from spur.core.job import Job, JobSpec, JobState, NodeAllocation, PartitionState
from spur.core.scheduling import NodeLayout, NodeView, PartitionView, PendingView, RunningView, SchedSnapshot
from spur.state.machine import PRIORITY_BASE, resolve_time_limit
from spur.state.sched_index import pending_view

if TYPE_CHECKING:
    from spur.state.machine import ClusterState


class Placer(Protocol):
    """The scheduler plugin's ``spur_place_now``: where ``job`` starts now, or None."""

    def __call__(self, snapshot: SchedSnapshot, job: PendingView) -> tuple[NodeAllocation, ...] | None: ...


class JobLimits(Protocol):
    """Account/QOS limits: the pending reason starting ``job`` now would meet ("" when none)."""

    def check_job(self, job: Job) -> str: ...


@quick_init
@dataclass(frozen=True)
class InFlight:
    """A submission the leader proposed and Raft has not applied yet."""

    partition: str
    allocation: tuple[NodeAllocation, ...]  # its grant; () when proposed without one
    waits: bool  # proposed without a grant although it could run: it is ahead of later jobs


@quick_init
@dataclass(frozen=True)
class Decision:
    """What the leader carries in ``SubmitJob``: the grant (empty: the job pends), and how to track
    the submission while it is in flight."""

    allocation: tuple[NodeAllocation, ...]
    in_flight: InFlight | None  # None: the job could not have started anyway (held, array, ...)


NO_GRANT = Decision((), None)
# Pending reasons of jobs their partition cannot run as configured: they never outrank a new job.
PARTITION_LIMITS = frozenset(
    {"PartitionNodeLimit", "PartitionTimeLimit", "PartitionConfig", "BadConstraints"}
)


def provisional_job(state: ClusterState, spec: JobSpec, user: str, now: float) -> Job | None:
    """The job ``SubmitJob`` would create, as far as the decision needs it, or None when it could
    not be granted at submission whatever the load: an array (tasks start from the scheduler pass),
    held, with a dependency or a later begin time, or a partition that is unknown, not up, or too
    small for it (the submission then pends with Slurm's reason, or is refused)."""
    if spec.array or spec.hold or spec.dependency or spec.begin_time > now:
        return None
    part = state.partitions.get(spec.partition) if spec.partition else state.default_partition()
    if part is None or part.state is not PartitionState.UP:
        return None
    refusal, limit_reason = state.feasibility(spec, part)
    limit = resolve_time_limit(spec.time_limit_secs, part)
    if refusal is not None or limit_reason or limit is None:
        return None
    job_id = state.next_job_id
    return Job(
        job_id=job_id,
        spec=spec,
        user=user,
        partition=part.name,
        time_limit_secs=limit,
        submit_time=now,
        priority=max(1, PRIORITY_BASE - job_id - spec.nice),
        eligible_time=now,
    )


def outranked(
    state: ClusterState,
    job: Job,
    now: float,
    *,
    priorities: Callable[[list[Job]], dict[int, int]],
    limits: JobLimits | None,
) -> bool:
    """Whether a pending job of ``job``'s partition that could run now has a priority at least
    ``job``'s (slurmctld's ``_top_priority``: held jobs, jobs waiting on a dependency, a begin time,
    an array limit or an account limit do not count). ``priorities`` gives multifactor priorities
    (empty: the stored ones apply)."""
    basic = not priorities([job])  # stored priorities: the first rival at or above decides
    running_per_array: dict[int, int] | None = None
    rivals: list[Job] = []
    for other_id in state.sched_index.pending:  # a superset of the pending ids; order is irrelevant
        other = state.jobs.get(other_id)
        if other is None or other.priority == 0 or other.partition != job.partition:
            continue  # held jobs never outrank (checked first: queues often hold many)
        if other.state is not JobState.PENDING:
            continue
        if other.spec.begin_time or other.spec.dependency or other.array_max_running:
            if running_per_array is None:
                running_per_array = {}
                for holder in state.active_jobs():
                    if holder.array_job_id:
                        running_per_array[holder.array_job_id] = (
                            running_per_array.get(holder.array_job_id, 0) + 1
                        )
            if ineligible_reason(other, state.jobs, state.array_tasks, running_per_array, now) is not None:
                continue
        if other.reason in PARTITION_LIMITS or (limits is not None and limits.check_job(other)):
            continue
        if basic and other.priority >= job.priority:
            return True
        rivals.append(other)
    if basic or not rivals:
        return False
    prio = priorities([*rivals, job])
    mine = prio.get(job.job_id, job.priority)
    return any(prio.get(r.job_id, r.priority) >= mine for r in rivals)


@dataclass
class Taken:
    """What the granted submissions in flight hold on one node, summed."""

    cpus: int = 0
    mem_mb: int = 0
    grants: int = 0
    gpus: dict[int, int] = field(default_factory=dict)  # GPU index -> grants holding it (never 0)

    def add(self, a: NodeAllocation, sign: int) -> None:
        self.cpus += sign * a.cpus
        self.mem_mb += sign * a.mem_mb
        self.grants += sign
        gpus = self.gpus
        for g in a.gpus:
            held = gpus.get(g, 0) + sign
            if held > 0:
                gpus[g] = held
            else:
                gpus.pop(g, None)  # no longer held

    def from_view(self, v: NodeView) -> NodeView:
        """``v`` with these resources taken."""
        return NodeView(
            v.name,
            v.cpus_total,
            max(0, v.cpus_free - self.cpus),
            v.mem_total_mb,
            max(0, v.mem_free_mb - self.mem_mb),
            tuple(g for g in v.gpus_free if g not in gpus) if (gpus := self.gpus) else v.gpus_free,
            v.gpus_total,
            v.gpu_models,
            v.partitions,
            v.features,
            v.available,
            v.running_jobs + self.grants,
        )


class Flying:
    """The submissions in flight, with running sums kept as they come and go, so that a decision
    costs what its offer does and not what is in flight (a loaded leader holds up to
    ``max_submit_queue`` of them). Single-threaded: the controller's Trio thread owns it."""

    def __init__(self, entries: Iterable[InFlight] = ()) -> None:
        self._entries: dict[int, InFlight] = {}
        self._ids = count()
        self._waiting: Counter[str] = Counter()  # partition -> submissions pending ahead
        self.granted = 0  # submissions in flight with a grant
        self.taken: dict[str, Taken] = {}  # node -> what grants in flight hold there
        for entry in entries:
            self.add(entry)

    def add(self, entry: InFlight) -> int:
        """Count ``entry`` in; the key :meth:`remove` takes."""
        key = next(self._ids)
        self._entries[key] = entry
        self._account(entry, 1)
        return key

    def remove(self, key: int) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._account(entry, -1)

    def waits_in(self, partition: str) -> bool:
        """Whether a submission of ``partition`` in flight pends although it could run (it goes first)."""
        return self._waiting[partition] > 0

    def __len__(self) -> int:
        return len(self._entries)

    def _account(self, entry: InFlight, sign: int) -> None:
        if entry.waits:
            self._waiting[entry.partition] += sign
        if entry.allocation:
            self.granted += sign
        for a in entry.allocation:
            held = self.taken.setdefault(a.node, Taken())
            held.add(a, sign)
            if not held.grants:
                del self.taken[a.node]


def usable_in_order(
    nodes: Iterable[NodeView],
    taken: Mapping[str, Taken],
    partitions: Iterable[PartitionView],
    partition: str,
    layout: NodeLayout | None = None,
) -> Iterator[NodeView]:
    """Lazily, in ``nodes``' order: the nodes a job of ``partition`` could start on now, with what
    granted submissions in flight hold (``taken``, by node) taken: available members with a free CPU.
    A placement never uses any other node (every job takes a CPU on each of its nodes), so leaving them
    out of the plugin's snapshot changes no answer and keeps a decision cheap on a busy cluster.
    ``layout`` (the snapshot's, of these ``nodes`` and ``partitions``) answers membership without
    reading the partition's whole node list."""
    members: Container[str]
    if layout is not None:
        positions, index = layout.members.get(partition, frozenset()), layout.index
        members = _Members(positions, index)
    else:
        members = {n for p in partitions if p.name == partition for n in p.nodes}
    for v in nodes:
        held = taken.get(v.name) if taken else None
        if held is not None:
            if v.cpus_free <= held.cpus:
                continue  # the usual case under load: grants in flight fill the first nodes
            v = held.from_view(v)
        if (
            v.available
            and v.cpus_free > 0
            and (not partition or partition in v.partitions or v.name in members)
        ):
            yield v


class _Members:
    """Membership of a partition by node name, through a layout's positions (no set of names built)."""

    def __init__(self, positions: frozenset[int], index: Mapping[str, int]) -> None:
        self.positions, self.index = positions, index

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.index.get(name, -1) in self.positions


def usable_now(
    nodes: tuple[NodeView, ...], partitions: Iterable[PartitionView], partition: str
) -> tuple[NodeView, ...]:
    """:func:`usable_in_order`, all of them, with no grant in flight."""
    return tuple(usable_in_order(nodes, {}, partitions, partition))


# A decision offers the plugin the first usable nodes (in name order, the order placements scan them
# in) in rounds of growing size: each round's number below, or twice the nodes the job asks for if
# more. On a big cluster the grant is found among the first few, and a decision need not cost a pass
# over every node; the fewer nodes offered, the cheaper the plugin's snapshot and layout, and the more
# often the same first nodes come again (their layout is kept: ``SchedIndex.offer_layout``). Only when
# a round does not hold the grant is the next one offered, and after the last the whole list is, so
# the answer is the one the whole list gives.
OFFER_ROUNDS = (4, 64)


def decide_grant(
    state: ClusterState,
    spec: JobSpec,
    user: str,
    now: float,
    *,
    place: Placer,
    priorities: Callable[[list[Job]], dict[int, int]],
    limits: JobLimits | None,
    in_flight: Flying | Iterable[InFlight] = (),
) -> Decision:
    """The leader's decision for a submission at ``now`` (see the module docstring).

    The plugin is shown a snapshot of the nodes offered (see ``OFFER_ROUNDS``), with the running jobs
    on them: the scheduler index walks only the available nodes with a free CPU, so a decision costs
    what the offer does, not what the cluster holds."""
    job = provisional_job(state, spec, user, now)
    if job is None:
        return NO_GRANT
    flying = in_flight if isinstance(in_flight, Flying) else Flying(in_flight)
    waiting = Decision((), InFlight(job.partition, (), waits=True))
    if flying.waits_in(job.partition):
        return waiting  # an earlier submission of this partition pends: it goes first
    if limits is not None and (flying.granted or limits.check_job(job)):
        return waiting  # over a limit, or limits not yet charged for grants in flight
    if outranked(state, job, now, priorities=priorities, limits=limits):
        return waiting
    index = state.sched_index
    index.refresh(state)
    partitions = index.partition_views
    prio = priorities([job]).get(job.job_id)
    usable = usable_in_order(index.free_in_order(), flying.taken, partitions, job.partition, index.layout)
    pending = pending_view(job, prio)
    by_node = index.running_by_node_now()  # _snapshot_of copies what it shows
    nodes: tuple[NodeView, ...] = ()
    allocation = None
    # Each round's nodes are shown as the partition's only members (they all are members), so the
    # plugin's layout costs what they do, not what the partition's list does.
    own = index.partition_alone(job.partition)
    # A job naming its nodes may name any of them: it is offered every usable node at once.
    for size in () if spec.nodelist else OFFER_ROUNDS:
        want = max(size, 2 * spec.num_nodes)
        if want <= len(nodes):
            continue  # the job's own size already set this round's
        nodes += tuple(islice(usable, want - len(nodes)))
        if len(nodes) < want:
            break  # that is every usable node: the whole list decides
        first = tuple(
            v if job.partition in v.partitions else replace(v, partitions=(*v.partitions, job.partition))
            for v in nodes
        )
        allocation = place(_snapshot_of(first, own, by_node, now, index.offer_layout(first, own)), pending)
        if allocation:
            break
    if not allocation:
        nodes += tuple(usable)  # not among the rounds' nodes: the whole list decides
        if nodes:
            allocation = place(_snapshot_of(nodes, partitions, by_node, now), pending)
    if not allocation:
        return waiting
    return Decision(tuple(allocation), InFlight(job.partition, tuple(allocation), waits=False))


def _snapshot_of(
    nodes: tuple[NodeView, ...],
    partitions: tuple[PartitionView, ...],
    by_node: Mapping[str, tuple[RunningView, ...]],
    now: float,
    layout: NodeLayout | None = None,
) -> SchedSnapshot:
    """A snapshot of ``nodes`` alone: the running jobs on them (each once), grouped by node too; no
    pending jobs; ``layout`` is theirs (None: the plugin builds it)."""
    on_these = {v.name: by_node[v.name] for v in nodes if v.name in by_node}
    running = tuple({r.job_id: r for runs in on_these.values() for r in runs}.values())
    return SchedSnapshot(
        now=now,
        pending=(),
        nodes=nodes,
        running=running,
        partitions=partitions,
        node_running=on_these,
        layout=layout,
    )
