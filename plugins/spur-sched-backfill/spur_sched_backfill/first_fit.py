"""The immediate grant's usual case, answered without building a planner.

``place_now`` asks where one new job would start now. The planner answers it by setting up a pass
(layout, candidate lists, a time profile per node looked at), which costs far more than the answer for
the job most submissions are: one node, no GPUs, no node list, not exclusive. For such a job the
planner's answer is simply the first candidate node, in name order, whose free CPUs and memory now
cover the job's needs. Why that is the same answer:

- A fresh planner holds no reservation, so a node's profile starts at its free resources now and only
  grows with each running job's release (clamped to the node's totals). When the free resources are
  within the totals, the need is met over any window exactly when it is met now: the time limit does
  not matter. A node whose free resources exceed its totals (an inconsistent view) can shrink at its
  first release; such a node is left to the planner.
- A node holding a running exclusive job counts as having nothing free (as the planner's profile has it).
- The planner's reasons a job can never run (partition down or unknown, too big for every node) never
  refuse a node that fits now: a node's totals hold at least what it has free. When no node fits, both
  answers are None.
- Candidates are the planner's: available nodes of the job's partition (listed by the partition, or
  naming it), with every feature the job asks for, not excluded; a down partition has none.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from spur.core.job import NodeAllocation
from spur.core.scheduling import PendingView, SchedSnapshot, nodes_in_layout

from spur_sched_backfill.request import Request


class Undecided(enum.Enum):
    """The first-fit answer cannot stand in for the planner's here (see :func:`first_fit_now`)."""

    PLANNER = "planner"


PLANNER = Undecided.PLANNER


def is_simple(job: PendingView) -> bool:
    """Whether ``job`` is one the first fit can place: one node, no GPUs, no node list, shared."""
    return (
        job.num_nodes <= 1
        and not job.nodelist
        and not job.exclusive
        and job.gpus_per_node <= 0
        and job.gpus_total <= 0
    )


def first_fit_now(snapshot: SchedSnapshot, job: PendingView) -> tuple[NodeAllocation, ...] | None | Undecided:
    """The planner's ``place_now`` answer for a simple job (see :func:`is_simple`), or ``PLANNER`` when
    the job is not simple or the first node that fits has more free than it has in all."""
    if not is_simple(job):
        return PLANNER
    req = Request.of(job)
    views, layout = nodes_in_layout(snapshot)
    members: frozenset[int] | None = None  # None: every node, as for a job naming no partition
    if job.partition:
        if not layout.up.get(job.partition, True):
            return None
        members = layout.members.get(job.partition, frozenset())
    wanted = frozenset(job.features)
    excluded = frozenset(job.exclude)
    whole = _held_whole(snapshot)
    need_c, need_m = req.need_c, req.need_m
    for i, v in enumerate(views):
        if v.cpus_free < need_c or v.mem_free_mb < need_m or not v.available:
            continue
        if members is not None and i not in members:
            continue
        if v.name in excluded or not wanted.issubset(v.features) or whole(v.name):
            continue
        if v.cpus_free > v.cpus_total or v.mem_free_mb > v.mem_total_mb:
            return PLANNER
        cpus, mem = req.node_share(req.tpn)
        return (NodeAllocation(node=v.name, cpus=cpus, mem_mb=mem, gpus=[], tasks=req.tpn),)
    return None


def _held_whole(snapshot: SchedSnapshot) -> Callable[[str], bool]:
    """Whether a running exclusive job holds a node (an allocation of it names the node)."""
    by_node = snapshot.node_running
    if by_node is None:
        return {a.node for run in snapshot.running if run.exclusive for a in run.allocation}.__contains__

    def holds(name: str) -> bool:
        for run in by_node.get(name, ()):
            if run.exclusive and any(a.node == name for a in run.allocation):
                return True
        return False

    return holds
