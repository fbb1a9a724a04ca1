"""Job, node and partition records of the cluster state (pure data, no I/O).

These dataclasses are what the replicated state machine stores and snapshots. Times are unix
seconds (float); a time of 0 means "not yet". Time limits are seconds with -1 meaning unlimited.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from spur.core.jobspec import JobSpec as JobSpec  # re-exported: its own module so sbatch loads only it
from spur.core.units import UNLIMITED as UNLIMITED  # re-exported: spur.core.job.UNLIMITED


class JobState(enum.StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    SUSPENDED = "SUSPENDED"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"

    @property
    def short(self) -> str:
        """Slurm's compact state code (squeue %t)."""
        return _SHORT[self]

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def holds_resources(self) -> bool:
        return self in (JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED)


_SHORT = {
    JobState.PENDING: "PD",
    JobState.RUNNING: "R",
    JobState.COMPLETING: "CG",
    JobState.COMPLETED: "CD",
    JobState.FAILED: "F",
    JobState.CANCELLED: "CA",
    JobState.TIMEOUT: "TO",
    JobState.NODE_FAIL: "NF",
    JobState.SUSPENDED: "S",
    JobState.OUT_OF_MEMORY: "OOM",
}

TERMINAL_STATES = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.OUT_OF_MEMORY,
    }
)


@dataclass(slots=True)
class NodeAllocation:
    """What a job holds on one node: CPUs, memory, GPU indices and tasks there."""

    node: str
    cpus: int
    mem_mb: int = 0
    gpus: list[int] = field(default_factory=list)
    tasks: int = 1


@dataclass
class StepSpec:
    """A job step request (srun inside an allocation); mirrors the ``StepSpec`` protobuf message."""

    argv: list[str] = field(default_factory=list)
    name: str = ""
    num_tasks: int = 0
    num_nodes: int = 0
    cpus_per_task: int = 0
    stdout_pattern: str = ""
    stderr_pattern: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    unbuffered: bool = False
    label: bool = False
    overlap: bool = False
    work_dir: str = ""
    nodelist: list[str] = field(default_factory=list)
    ntasks_per_node: int = 0  # 0: tasks spread evenly over the step's nodes
    kill_on_bad_exit: bool = False  # -K: a task that fails ends every task of the step
    mpi: str = ""  # --mpi plugin ("none", "pmi2"); "" = the cluster's MpiDefault


@dataclass(slots=True)
class Step:
    """A job step (an srun inside an allocation) and its progress."""

    step_id: int
    spec: StepSpec
    state: JobState = JobState.RUNNING
    start_time: float = 0.0
    end_time: float = 0.0
    exit_code: int = 0
    signal: int = 0
    allocation: list[NodeAllocation] = field(default_factory=list)
    exited_nodes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Job:
    """A job as the controller tracks it: the request (``spec``) and everything since submission."""

    job_id: int
    spec: JobSpec
    user: str = ""
    uid: int = 0
    gid: int = 0
    group: str = ""
    state: JobState = JobState.PENDING
    reason: str = "None"
    partition: str = ""
    time_limit_secs: int = UNLIMITED
    priority: int = 0
    submit_time: float = 0.0
    start_time: float = 0.0
    end_time: float = 0.0
    allocation: list[NodeAllocation] = field(default_factory=list)
    exit_code: int = 0
    signal: int = 0
    # Raft term of the leader that made the allocation; agents refuse launches fenced by an older term.
    alloc_term: int = 0
    # True once an agent has acknowledged the batch launch of the current allocation.
    launched: bool = False
    # Final state to enter when the agent reports the processes gone (set while COMPLETING).
    pending_final_state: JobState | None = None
    restarts: int = 0
    # Nodes whose agents reported the job's processes gone (interactive jobs finish when all have).
    exited_nodes: list[str] = field(default_factory=list)
    array_job_id: int = 0
    array_task_id: int | None = None
    array_max_running: int = 0
    array_task_count: int = 0
    array_task_min: int = 0
    array_task_max: int = 0
    eligible_time: float = 0.0
    # Held by an administrator (scontrol hold as root) rather than by the user.
    held_by_admin: bool = False
    # scontrol requeuehold on a running job: hold it once it is back in the queue.
    requeue_hold: bool = False
    steps: list[Step] = field(default_factory=list)
    next_step_id: int = 0
    suspend_time: float = 0.0
    suspended_secs: float = 0.0

    @property
    def nodes(self) -> list[str]:
        return [a.node for a in self.allocation]


@dataclass
class GpuDevice:
    """One GPU of a node, as its agent discovered it."""

    index: int
    vendor: str = ""
    model: str = ""
    pci_bus_id: str = ""


@dataclass
class Node:
    """A registered compute node. Display state (idle/mixed/allocated/...) is derived, not stored."""

    name: str
    address: str = ""
    port: int = 6818
    cpus: int = 1
    memory_mb: int = 0
    gpus: list[GpuDevice] = field(default_factory=list)
    down: bool = False
    drain: bool = False
    reason: str = ""
    reason_time: float = 0.0
    registered_time: float = 0.0
    boot_time: float = 0.0
    version: str = ""
    sockets: int = 1
    cores_per_socket: int = 1
    threads_per_core: int = 1
    arch: str = ""
    os: str = ""
    features: list[str] = field(default_factory=list)
    comment: str = ""  # from the agent: what it cannot do here (e.g. enforce memory limits)


class PartitionState(enum.StrEnum):
    UP = "UP"
    DOWN = "DOWN"
    DRAIN = "DRAIN"
    INACTIVE = "INACTIVE"


@dataclass
class Partition:
    """A partition: a named set of nodes with its limits and defaults."""

    name: str
    state: PartitionState = PartitionState.UP
    is_default: bool = False
    nodes_expr: str = "ALL"
    max_time_secs: int = UNLIMITED
    default_time_secs: int = UNLIMITED
    enforce_limits: str = "NO"  # [scheduler] enforce_part_limits: refuse jobs beyond the partition
