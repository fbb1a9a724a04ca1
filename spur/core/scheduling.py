"""The immutable picture a scheduler plugin plans from, and the plan it returns.

The controller builds a ``SchedSnapshot`` from the state machine on every scheduler tick and hands
it to the configured plugin (``spur_schedule`` hook). The plugin returns a ``Plan``; it never mutates
anything. The controller then proposes one ``StartJob`` command per assignment; the state machine
re-checks each against current free resources, so a stale plan can never over-allocate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from spur.core.frozen_init import quick_init
from spur.core.job import NodeAllocation


@quick_init
@dataclass(frozen=True)
class NodeView:
    name: str
    cpus_total: int
    cpus_free: int
    mem_total_mb: int
    mem_free_mb: int
    gpus_free: tuple[int, ...] = ()  # free GPU indices
    gpus_total: int = 0
    gpu_models: tuple[str, ...] = ()  # model of GPU i at position i (lower case; "" unknown)
    partitions: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    available: bool = True  # False when down or drained: never plan onto it
    running_jobs: int = 0  # jobs holding resources here (exclusive jobs need 0)


@quick_init
@dataclass(frozen=True)
class RunningView:
    job_id: int
    end_time: float  # start + time limit; math.inf when unlimited
    allocation: tuple[NodeAllocation, ...]
    exclusive: bool = False


@quick_init
@dataclass(frozen=True)
class PendingView:
    """A job eligible to start now (held/dependency-blocked jobs are filtered by the controller)."""

    job_id: int
    priority: int
    submit_time: float
    partition: str
    num_nodes: int = 1
    num_tasks: int = 1
    cpus_per_task: int = 1
    ntasks_per_node: int = 0  # 0: spread tasks as they fit
    mem_per_node_mb: int = 0
    mem_per_cpu_mb: int = 0
    gpus_per_node: int = 0
    gpus_total: int = 0  # --gpus N over the whole allocation
    gpu_type: str = ""  # "" any model
    time_limit_secs: int = -1  # -1 unlimited
    nodelist: tuple[str, ...] = ()  # all of these nodes are required
    exclude: tuple[str, ...] = ()
    exclusive: bool = False
    features: tuple[str, ...] = ()  # required node features (all of them)


@quick_init
@dataclass(frozen=True)
class PartitionView:
    name: str
    nodes: tuple[str, ...]
    up: bool = True


class LimitGate(Protocol):
    """Account/QOS limits for one scheduling pass (the only stateful part of a snapshot).

    Ask ``check`` before starting a pending job (Slurm's pending reason, or "" when no limit is in
    the way) and call ``charge`` for each job the plan starts, so later jobs of the same pass count it.
    """

    def check(self, job_id: int) -> str: ...

    def charge(self, job_id: int) -> None: ...


@quick_init
@dataclass(frozen=True)
class SchedSnapshot:
    """One pass's picture. ``layout`` and ``node_running`` are optional shortcuts a plugin may use
    instead of deriving the same from ``nodes``/``partitions``/``running`` (the controller keeps them
    between passes); whoever replaces ``nodes`` must replace ``layout`` too (None: none given)."""

    now: float
    pending: tuple[PendingView, ...]
    nodes: tuple[NodeView, ...]
    running: tuple[RunningView, ...] = ()
    partitions: tuple[PartitionView, ...] = ()
    reservations: tuple[object, ...] = ()
    max_job_test: int = 0  # plugin may stop after this many pending jobs; 0 = no cap
    limits: LimitGate | None = None  # account/QOS limits of this pass; None = none enforced
    # When given: ``nodes`` are in ``layout.names`` order and the layout was built from them.
    layout: NodeLayout | None = None
    # When given: node name -> the views of ``running`` with an allocation on that node (each view
    # under every node it holds; nodes without one may be missing).
    node_running: Mapping[str, tuple[RunningView, ...]] | None = None


_DIGITS = re.compile(r"(\d+)")


@lru_cache(maxsize=1 << 17)
def natural_key(name: str) -> tuple[tuple[int | str, ...], str]:
    """Sort key ordering ``node2`` before ``node10`` (ties such as ``n01``/``n1`` by plain order)."""
    return tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(name)), name


def layout_fields(view: NodeView) -> tuple[object, ...]:
    """What of a node view the layout depends on (everything but free resources and job counts)."""
    return (
        view.name,
        view.cpus_total,
        view.mem_total_mb,
        view.gpus_total,
        view.gpu_models,
        view.partitions,
        view.features,
        view.available,
    )


@quick_init
@dataclass(frozen=True, eq=False)
class NodeLayout:
    """The cluster's shape as a pass sees it: what stays the same while only allocations change.

    Built by ``build`` from node views in natural name order and the partition views; it depends on
    nothing but the nodes' ``layout_fields`` and the partition views, so it stays valid while only
    free resources and running jobs change. ``version`` names the shape: the controller's scheduler
    index gives a new layout a new version and keeps the same object (same version) while the shape
    holds, so anything derived from it can be kept with it:

    ``cache`` holds what planners derive from the layout alone (candidate node lists per job class,
    GPU model masks, reasons a job can never run), under keys of their own; it goes away with the
    layout. A plugin may rely on it only for values that are functions of the layout, and of node
    views whose free GPUs are among their GPUs (``gpus_free`` within ``gpus_total``/``gpu_models``).
    """

    version: int
    names: tuple[str, ...]  # node names in natural order; SchedSnapshot.nodes[i].name == names[i]
    index: Mapping[str, int]  # name -> position in ``names``
    members: Mapping[str, frozenset[int]]  # partition -> positions of its nodes
    up: Mapping[str, bool]  # partition -> up (a name listed twice is up only if every listing is)
    configured: Mapping[str, frozenset[str]]  # partition -> node names listed for it, registered or not
    cache: dict[object, object] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls, nodes: Sequence[NodeView], partitions: Sequence[PartitionView], version: int = 0
    ) -> NodeLayout:
        """The layout of ``nodes`` (already in natural name order) and ``partitions``; a node belongs
        to a partition that lists it and to every partition its view names."""
        names = tuple(v.name for v in nodes)
        index = {name: i for i, name in enumerate(names)}
        members: dict[str, set[int]] = {}
        up: dict[str, bool] = {}
        configured: dict[str, set[str]] = {}
        for part in partitions:
            up[part.name] = part.up and up.get(part.name, True)
            members.setdefault(part.name, set()).update(index[n] for n in part.nodes if n in index)
            configured.setdefault(part.name, set()).update(part.nodes)
        for i, v in enumerate(nodes):
            for pname in v.partitions:
                members.setdefault(pname, set()).add(i)
                configured.setdefault(pname, set()).add(v.name)
        return cls(
            version=version,
            names=names,
            index=index,
            members={k: frozenset(v) for k, v in members.items()},
            up=up,
            configured={k: frozenset(v) for k, v in configured.items()},
        )


def nodes_in_layout(snapshot: SchedSnapshot) -> tuple[tuple[NodeView, ...], NodeLayout]:
    """``snapshot``'s nodes in natural name order, and their layout: the snapshot's own when it carries
    one of as many nodes (its nodes are then in that order), else one built from them here."""
    layout, views = snapshot.layout, snapshot.nodes
    if layout is None or len(layout.names) != len(views):
        views = tuple(sorted(views, key=lambda v: natural_key(v.name)))
        layout = NodeLayout.build(views, snapshot.partitions)
    return views, layout


@dataclass(frozen=True)
class Assignment:
    job_id: int
    allocation: tuple[NodeAllocation, ...]


@dataclass
class Plan:
    assignments: list[Assignment] = field(default_factory=list)
    # Why each pending job that was not started waits: Slurm reasons "Resources", "Priority",
    # "PartitionNodeLimit", "ReqNodeNotAvail", "BadConstraints", ...
    reasons: dict[int, str] = field(default_factory=dict)
    jobs_tested: int = 0


def end_time_of(start_time: float, time_limit_secs: int) -> float:
    return math.inf if time_limit_secs < 0 else start_time + time_limit_secs
