"""The immutable picture a scheduler plugin plans from, and the plan it returns.

The controller builds a ``SchedSnapshot`` from the state machine on every scheduler tick and hands
it to the configured plugin (``spur_schedule`` hook). The plugin returns a ``Plan``; it never mutates
anything. The controller then proposes one ``StartJob`` command per assignment; the state machine
re-checks each against current free resources, so a stale plan can never over-allocate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from spur.core.job import NodeAllocation


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


@dataclass(frozen=True)
class RunningView:
    job_id: int
    end_time: float  # start + time limit; math.inf when unlimited
    allocation: tuple[NodeAllocation, ...]
    exclusive: bool = False


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


@dataclass(frozen=True)
class SchedSnapshot:
    now: float
    pending: tuple[PendingView, ...]
    nodes: tuple[NodeView, ...]
    running: tuple[RunningView, ...] = ()
    partitions: tuple[PartitionView, ...] = ()
    reservations: tuple[object, ...] = ()
    max_job_test: int = 0  # plugin may stop after this many pending jobs; 0 = no cap
    limits: LimitGate | None = None  # account/QOS limits of this pass; None = none enforced


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
