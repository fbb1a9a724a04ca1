"""The scheduler's views of the cluster, maintained incrementally between passes (pure, no I/O).

``ClusterState`` owns one ``SchedIndex`` and tells it what each applied command touched:

- ``held``/``released`` from its resource bookkeeping (``_hold``/``_release``): the job's nodes and
  its running view change, and the index of jobs holding resources follows;
- ``maybe_pending`` whenever a job becomes PENDING (submit, requeue, failed launch): the pending index
  is a superset of the pending jobs, pruned lazily by ``pending_ids``;
- ``after_command`` for everything else: named nodes, the partition layout, updated jobs. A command
  type it does not know marks every view stale (correct, merely slower), so a new command can never
  leave a stale view behind.

``SchedIndex.views`` then refreshes only what is stale and returns the node, running and partition
views ``build_snapshot`` would build from scratch (tests/test_sched_index.py checks that they are
equal after random command sequences). Views are immutable and shared between passes.

It also keeps what a pass would otherwise rebuild over every node (``layout`` and
``running_by_node``):

- ``layout``: the ``NodeLayout`` of the node views (natural name order, positions, partition
  membership and state), with ``layout_version``. The version changes exactly when a refreshed node
  view differs from the one it replaces in its ``layout_fields`` (a node registered, removed, its
  CPUs/memory/GPUs/features/partitions changed, or it became available or unavailable: down, drained,
  resumed), or the partition views change (``ConfigurePartitions`` with a different result). A
  command that changes none of that (submits, starts, exits, heartbeats, pending reasons, a
  partition configuration that comes out the same) leaves the version and the layout object as
  they were, so what planners keep in ``NodeLayout.cache`` stays valid;
- ``running_by_node``: the running views grouped by the nodes they hold, refreshed only for the
  nodes of running views that changed.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from spur.core.job import Job, JobState, PartitionState
from spur.core.resources import gpus_per_node
from spur.core.scheduling import (
    NodeLayout,
    NodeView,
    PartitionView,
    PendingView,
    RunningView,
    end_time_of,
    layout_fields,
    natural_key,
)

if TYPE_CHECKING:
    from spur.core.job import Node, Partition
    from spur.state.domain import StateDomain


# Layouts of offered node sets kept by ``SchedIndex.offer_layout`` (each a few KiB).
MAX_OFFER_LAYOUTS = 64


class NodeUsage(Protocol):
    """What a node's views need of its usage (``spur.state.machine.Usage``)."""

    @property
    def cpus(self) -> int: ...

    @property
    def mem_mb(self) -> int: ...

    @property
    def gpus(self) -> set[int]: ...

    @property
    def jobs(self) -> set[int]: ...

    @property
    def exclusive(self) -> bool: ...


class IndexedState(Protocol):
    """What the index reads of the cluster state (``spur.state.machine.ClusterState``, which owns it)."""

    @property
    def jobs(self) -> dict[int, Job]: ...

    @property
    def nodes(self) -> dict[str, Node]: ...

    @property
    def partitions(self) -> dict[str, Partition]: ...

    @property
    def domains(self) -> Mapping[str, StateDomain]: ...

    def partition_nodes(self, partition: Partition) -> list[str]: ...

    def usage(self, node_name: str) -> NodeUsage: ...

    def node_available(self, name: str) -> bool: ...

    def resolve_targets(self, job_id: int, array_task_id: int | None = None) -> list[Job]: ...

# Commands that change nothing a scheduler view shows beyond what held/released/maybe_pending report.
_JOB_ONLY = frozenset(
    {
        "SubmitJob",
        "StartJob",
        "JobLaunched",
        "LaunchFailed",
        "CancelJob",
        "CreateStep",
        "StepExited",
        "JobExited",
        "SetPendingReasons",
        "AnnounceController",
        "InitClusterId",
    }
)
# Commands naming the nodes they change, and whether they may change the node set or layout.
_NODE_COMMANDS = {"UpdateNode": False, "NodeLost": False, "NodeReturned": False, "RemoveNode": True}


class SchedIndex:
    """Indices and cached views for the scheduler; see the module docstring.

    Contract: every change to a job's resources goes through ``held``/``released``, every job that
    becomes PENDING is passed to ``maybe_pending``, every job that ends to ``finished``, and every
    applied command to ``after_command``. Every mark is bounded, so a follower that never plans
    does not accumulate them.
    """

    # Stale running-view marks kept before giving up on precision (a follower never consumes them).
    MAX_MARKS = 100_000

    def __init__(self) -> None:
        self.pending: set[int] = set()  # a superset of the PENDING job ids
        # ids of jobs holding resources, in start order -> their array job id (0: not an array task)
        self.holding: dict[int, int] = {}
        self.array_running: dict[int, int] = {}  # array job id -> its tasks in ``holding``
        self._all_stale = True
        self._layout_stale = True
        self._stale_nodes: set[str] = set()
        self._stale_running: set[int] = set()
        self._stale_pending: set[int] = set()
        self._nodes: dict[str, NodeView] = {}
        self._node_tuple: tuple[NodeView, ...] | None = None
        self._order: list[str] = []
        self._node_list: list[NodeView] = []  # the node views in ``_order``, replaced in place
        self._pos: dict[str, int] = {}  # node name -> its position in ``_order``
        self._free: list[int] = []  # sorted positions of the available nodes with a free CPU
        self._node_parts: dict[str, tuple[str, ...]] = {}
        self._partitions: tuple[PartitionView, ...] = ()
        self._running: dict[int, RunningView] = {}
        self._running_tuple: tuple[RunningView, ...] | None = None
        self._pending_views: dict[int, tuple[Job, str, int, PendingView]] = {}
        self.layout_version = 0  # see the module docstring; 0: no layout built yet
        self._layout: NodeLayout | None = None
        self._by_node: dict[str, dict[int, RunningView]] = {}  # node -> its running views by job id
        self._by_node_tuples: dict[str, tuple[RunningView, ...]] = {}
        self._by_node_map: Mapping[str, tuple[RunningView, ...]] | None = None
        self._offer_layouts: dict[object, NodeLayout] = {}  # see offer_layout
        self._offer_version = 0
        self._alone: dict[str, tuple[PartitionView, ...]] = {}  # see partition_alone
        self._alone_of: tuple[PartitionView, ...] | None = None  # the partition views _alone is of

    # ------------------------------------------------------------------ notifications

    def reset(self, state: IndexedState) -> None:
        """After a restore: rebuild the indices, every view stale (the layout version goes on from
        where it was, so a version never names two layouts)."""
        version = self.layout_version
        self.__init__()  # type: ignore[misc]
        self.layout_version = version
        for job in state.jobs.values():
            if job.state is JobState.PENDING:
                self.pending.add(job.job_id)

    def held(self, job: Job) -> None:
        if job.job_id not in self.holding and job.array_job_id:
            self.array_running[job.array_job_id] = self.array_running.get(job.array_job_id, 0) + 1
        self.holding[job.job_id] = job.array_job_id
        self.pending.discard(job.job_id)
        self._mark_job(job)

    def released(self, job: Job) -> None:
        array = self.holding.pop(job.job_id, 0)
        if array:
            left = self.array_running[array] - 1
            if left:
                self.array_running[array] = left
            else:
                del self.array_running[array]
        self._mark_job(job)

    def maybe_pending(self, job: Job) -> None:
        self.pending.add(job.job_id)

    def finished(self, job: Job) -> None:
        """``job`` reached its final state (or, requeued by a node failure, PENDING again)."""
        if job.state is JobState.PENDING:
            self.pending.add(job.job_id)
        else:
            self.pending.discard(job.job_id)

    def _mark_job(self, job: Job) -> None:
        for a in job.allocation:
            self._stale_nodes.add(a.node)
        self._stale_running.add(job.job_id)
        if len(self._stale_running) > self.MAX_MARKS:
            self._all_stale = True
            self._stale_running.clear()
            self._stale_nodes.clear()

    def after_command(self, state: IndexedState, cmd: Any) -> None:
        """Mark what an applied command changed beyond resource holds (see the module docstring)."""
        kind = type(cmd).__name__
        if kind in _JOB_ONLY:
            return
        if kind == "UpdateJob":
            for job in state.resolve_targets(cmd.job_id, cmd.array_task_id):
                self._stale_running.add(job.job_id)
                self._stale_pending.add(job.job_id)
            if len(self._stale_pending) > self.MAX_MARKS:  # never consumed on a follower
                self._stale_pending.clear()
                self._pending_views = {}
            return
        if kind == "RegisterNode":
            self._stale_nodes.add(cmd.node.name)
            if len(self._nodes) != len(state.nodes) or cmd.node.name not in self._nodes:
                self._layout_stale = True
            return
        if kind == "ForgetNode":
            self._stale_nodes.add(cmd.name)
            self._layout_stale = True
            return
        if kind in _NODE_COMMANDS:
            names = [cmd.name] if kind == "NodeReturned" else list(cmd.names)
            self._stale_nodes.update(names)
            self._layout_stale = self._layout_stale or _NODE_COMMANDS[kind]
            return
        if kind == "ConfigurePartitions":
            self._layout_stale = True
            return
        if any(cls.__name__ == kind for d in state.domains.values() for cls in d.commands):
            return  # domain commands read the inventory, never change it
        self._all_stale = True

    # ------------------------------------------------------------------ views

    def views(
        self, state: IndexedState
    ) -> tuple[tuple[NodeView, ...], tuple[RunningView, ...], tuple[PartitionView, ...]]:
        """Node views (in natural name order), running views and partition views, refreshed where
        stale; ``layout`` and ``running_by_node`` then describe the same views."""
        self.refresh(state)
        if self._node_tuple is None:
            self._node_tuple = tuple(self._node_list)
        if self._running_tuple is None:
            running = self._running
            self._running_tuple = tuple(running[i] for i in self.holding if i in running)
        return self._node_tuple, self._running_tuple, self._partitions

    def refresh(self, state: IndexedState) -> None:
        """Bring the views up to date with ``state`` without building the tuples ``views`` returns:
        afterwards ``layout``, ``partition_views``, ``running_by_node`` and ``free_in_order`` describe
        the state. Costs what changed since the last refresh (a node view replaced in place), not
        what the cluster holds, unless the layout changed."""
        layout_changed = self._layout is None
        if self._all_stale:
            # Everything is rebuilt from the state; the old node views stay only to tell whether the
            # layout really changed.
            self._all_stale = False
            self._layout_stale = True
            self._running = {}
            self._by_node = {}
            self._by_node_tuples = {}
            self._by_node_map = None
            self._pending_views = {}
            self._stale_running = set(self.holding)
            self._running_tuple = None
        rebuild_list = False
        if self._layout_stale:
            self._layout_stale = False
            old_order, old_partitions = self._order, self._partitions
            self._refresh_layout(state)
            if self._order != old_order or self._partitions != old_partitions:
                layout_changed = True
            self._stale_nodes = set(state.nodes) | set(self._nodes)
            rebuild_list = True
        if self._stale_nodes:
            pos, node_list = self._pos, self._node_list
            for name in self._stale_nodes:
                old = self._nodes.get(name)
                if name in state.nodes:
                    new = node_view(state, name, self._node_parts.get(name, ()))
                    self._nodes[name] = new
                    if old is None or layout_fields(old) != layout_fields(new):
                        layout_changed = True
                    i = pos.get(name)
                    if i is None:
                        rebuild_list = True
                    elif not rebuild_list:
                        usable = _usable(new)
                        if usable != _usable(node_list[i]):  # usually it stays as it was
                            self._mark_free(i, usable)
                        node_list[i] = new
                elif old is not None:
                    del self._nodes[name]
                    layout_changed = rebuild_list = True
            self._stale_nodes = set()
            self._node_tuple = None
        if rebuild_list:
            self._node_list = [self._nodes[n] for n in self._order]
            self._pos = {n: i for i, n in enumerate(self._order)}
            self._free = [i for i, v in enumerate(self._node_list) if _usable(v)]
            self._node_tuple = None
        if layout_changed:
            self.layout_version += 1
            self._node_tuple = tuple(self._node_list)
            self._layout = NodeLayout.build(self._node_tuple, self._partitions, self.layout_version)
        if self._stale_running:
            touched: set[str] = set()
            for job_id in self._stale_running:
                old_run = self._running.pop(job_id, None)
                if old_run is not None:
                    for a in old_run.allocation:
                        touched.add(a.node)
                        self._by_node.get(a.node, {}).pop(job_id, None)
                job = state.jobs.get(job_id)
                if job is not None and job.state.holds_resources and job_id in self.holding:
                    run = self._running[job_id] = running_view(job)
                    for a in run.allocation:
                        touched.add(a.node)
                        self._by_node.setdefault(a.node, {})[job_id] = run
            for name in touched:
                on_node = self._by_node.get(name)
                if on_node:
                    self._by_node_tuples[name] = tuple(on_node.values())
                else:
                    self._by_node.pop(name, None)
                    self._by_node_tuples.pop(name, None)
            self._stale_running = set()
            self._running_tuple = None
            if touched:
                self._by_node_map = None

    def _mark_free(self, i: int, usable: bool) -> None:
        free = self._free
        at = bisect_left(free, i)
        present = at < len(free) and free[at] == i
        if usable and not present:
            free.insert(at, i)
        elif present and not usable:
            del free[at]

    def free_in_order(self) -> Iterator[NodeView]:
        """After ``refresh``: the views of the available nodes with a free CPU, in natural name order
        (a lazy walk, valid until the state changes). Every placement takes a CPU on each of its
        nodes, so these are the only nodes a job could start on now."""
        node_list = self._node_list
        return (node_list[i] for i in self._free)

    @property
    def partition_views(self) -> tuple[PartitionView, ...]:
        """The partition views ``views`` returns (call ``refresh`` or ``views`` first)."""
        return self._partitions

    def node_count(self) -> int:
        """Registered nodes the views describe (after ``refresh``)."""
        return len(self._node_list)

    @property
    def layout(self) -> NodeLayout:
        """The layout of the node views ``views`` returned last (call ``views`` first)."""
        assert self._layout is not None, "views() builds the layout"
        return self._layout

    def offer_layout(self, nodes: tuple[NodeView, ...], partitions: tuple[PartitionView, ...]) -> NodeLayout:
        """The layout of a few node views offered to a placement with ``partitions``, the same object
        each time the same nodes are offered under the same layout version: what a planner derives
        from a layout alone (``NodeLayout.cache``) is then derived once for nodes offered again and
        again, as the first free nodes are under a steady load.

        ``nodes`` must be this index's current views (refreshed), in their order, with at most their
        free resources changed or partitions named in ``partitions`` added: their shapes are then a
        function of their names and the layout version, so the names are the key, and every kept
        layout goes when the version changes. Keeps at most ``MAX_OFFER_LAYOUTS``."""
        if self._offer_version != self.layout_version:
            self._offer_version = self.layout_version
            self._offer_layouts = {}
        key = (tuple(v.name for v in nodes), partitions)
        layout = self._offer_layouts.get(key)
        if layout is None:
            if len(self._offer_layouts) >= MAX_OFFER_LAYOUTS:
                del self._offer_layouts[next(iter(self._offer_layouts))]  # the oldest
            layout = self._offer_layouts[key] = NodeLayout.build(nodes, partitions)
        return layout

    def partition_alone(self, name: str) -> tuple[PartitionView, ...]:
        """The views of partition ``name`` (after ``refresh``), each without its node list: what an
        offer of a few of its nodes shows as their only partition (``offer_layout``). The same tuple
        each time while the partition views stay the same."""
        if self._alone_of is not self._partitions:
            self._alone_of, self._alone = self._partitions, {}
        found = self._alone.get(name)
        if found is None:
            found = self._alone[name] = tuple(
                PartitionView(p.name, (), p.up) for p in self._partitions if p.name == name
            )
        return found

    def running_by_node(self) -> Mapping[str, tuple[RunningView, ...]]:
        """Node name -> the running views ``views`` returned last that hold something there (an
        immutable copy, made again only after running views changed)."""
        if self._by_node_map is None:
            self._by_node_map = MappingProxyType(dict(self._by_node_tuples))
        return self._by_node_map

    def running_by_node_now(self) -> Mapping[str, tuple[RunningView, ...]]:
        """What ``running_by_node`` returns, without its copy: a read-only view of the index's own
        mapping, which the next ``refresh`` changes. For a reader that takes what it needs at once (an
        immediate grant's offer of a few nodes) and keeps nothing; under load the running views change
        between most decisions, and copying the mapping over every busy node each time cost more
        than the rest of the offer."""
        return MappingProxyType(self._by_node_tuples)

    def _refresh_layout(self, state: IndexedState) -> None:
        part_nodes = {p.name: state.partition_nodes(p) for p in state.partitions.values()}
        node_parts: dict[str, list[str]] = {}
        for pname, names in part_nodes.items():
            for n in names:
                node_parts.setdefault(n, []).append(pname)
        self._node_parts = {n: tuple(p) for n, p in node_parts.items()}
        self._order = sorted(state.nodes, key=natural_key)
        self._partitions = tuple(
            PartitionView(name=p.name, nodes=tuple(part_nodes[p.name]), up=p.state is PartitionState.UP)
            for p in state.partitions.values()
        )

    def pending_view(self, job: Job, priority: int | None = None) -> PendingView:
        """``sched_view.pending_view`` of ``job``, reused while the job is unchanged."""
        if self._stale_pending:
            for job_id in self._stale_pending:
                self._pending_views.pop(job_id, None)
            self._stale_pending = set()
        cached = self._pending_views.get(job.job_id)
        if (
            cached is not None
            and cached[0] is job
            and cached[1] == job.partition
            and cached[2] == job.time_limit_secs
        ):
            view = cached[3]
        else:
            view = pending_view(job)
            if len(self._pending_views) > 2 * len(self.pending) + 1024:
                self._pending_views = {}
            self._pending_views[job.job_id] = (job, job.partition, job.time_limit_secs, view)
        want = job.priority if priority is None else priority
        if view.priority != want:
            from dataclasses import replace

            view = replace(view, priority=want)
        return view

    def pending_ids(self, state: IndexedState) -> list[int]:
        """Ids of the PENDING jobs in id order (drops ids that left PENDING from the index)."""
        jobs = state.jobs
        gone = [i for i in self.pending if (j := jobs.get(i)) is None or j.state is not JobState.PENDING]
        self.pending.difference_update(gone)
        return sorted(self.pending)


def _usable(view: NodeView) -> bool:
    return view.available and view.cpus_free > 0


def node_view(state: IndexedState, name: str, partitions: tuple[str, ...]) -> NodeView:
    """The scheduler's view of registered node ``name`` (which belongs to ``partitions``)."""
    node = state.nodes[name]
    used = state.usage(name)
    cpus, mem = node.cpus, node.memory_mb
    if used.exclusive:
        cpus_free = mem_free = 0
    else:
        cpus_free = cpus - used.cpus if used.cpus < cpus else 0
        mem_free = mem - used.mem_mb if used.mem_mb < mem else 0
    if node.gpus:
        all_gpus = sorted(g.index for g in node.gpus)
        models = {g.index: g.model for g in node.gpus}
        gpus_free = () if used.exclusive else tuple(i for i in all_gpus if i not in used.gpus)
        gpus_total = len(all_gpus)
        gpu_models = tuple(models.get(i, "") for i in range(all_gpus[-1] + 1))
    else:  # most nodes: no GPU lists to build
        gpus_free, gpus_total, gpu_models = (), 0, ()
    # Positional, in NodeView's field order: this runs for every node each applied command touches.
    return NodeView(
        name, cpus, cpus_free, mem, mem_free, gpus_free, gpus_total, gpu_models, partitions,
        tuple(node.features), state.node_available(name), len(used.jobs),
    )  # fmt: skip


def running_view(job: Job) -> RunningView:
    """The scheduler's view of a job holding resources."""
    return RunningView(
        job_id=job.job_id,
        end_time=end_time_of(job.start_time, job.time_limit_secs),
        allocation=tuple(job.allocation),
        exclusive=job.spec.exclusive,
    )


def pending_view(job: Job, priority: int | None = None) -> PendingView:
    """The plugin's view of a pending job; ``priority`` overrides the stored one (multifactor)."""
    spec = job.spec
    gpn, gtype = gpus_per_node(list(spec.gres)) if spec.gres else (0, "")
    return PendingView(
        job_id=job.job_id,
        priority=job.priority if priority is None else priority,
        submit_time=job.submit_time,
        partition=job.partition,
        num_nodes=spec.num_nodes,
        num_tasks=spec.tasks,
        cpus_per_task=spec.cpus_per_task,
        ntasks_per_node=spec.ntasks_per_node,
        mem_per_node_mb=spec.mem_per_node_mb,
        mem_per_cpu_mb=spec.mem_per_cpu_mb,
        gpus_per_node=gpn,
        gpus_total=spec.gpus_total,
        gpu_type=gtype,
        time_limit_secs=job.time_limit_secs,
        nodelist=tuple(spec.nodelist),
        exclude=tuple(spec.exclude),
        exclusive=spec.exclusive,
        features=tuple(spec.constraint),
    )
