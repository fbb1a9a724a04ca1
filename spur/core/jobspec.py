"""The job request record, :class:`JobSpec` (pure data, no I/O).

In a module of its own (re-exported by :mod:`spur.core.job`) so that ``sbatch``, which builds one,
does not create the state's other record classes at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class JobSpec:
    """What the user asked for; mirrors the ``JobSpec`` protobuf message field for field."""

    name: str = ""
    script: str = ""
    argv: list[str] = field(default_factory=list)
    work_dir: str = ""
    stdout_pattern: str = ""
    stderr_pattern: str = ""
    stdin_path: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    partition: str = ""
    num_nodes: int = 1
    num_tasks: int = 0
    cpus_per_task: int = 1
    mem_per_node_mb: int = 0
    gres: list[str] = field(default_factory=list)
    time_limit_secs: int = 0
    interactive: bool = False
    account: str = ""
    gpus_total: int = 0
    nice: int = 0
    nodelist: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    exclusive: bool = False
    mem_per_cpu_mb: int = 0
    ntasks_per_node: int = 0
    hold: bool = False
    comment: str = ""
    constraint: list[str] = field(default_factory=list)
    command: str = ""
    array: str = ""
    dependency: str = ""
    begin_time: float = 0.0
    no_requeue: bool = False
    signal: str = ""
    open_mode: str = ""
    qos: str = ""
    wckey: str = ""
    gpus_per_task: int = 0
    kill_on_invalid_dep: bool = False
    ntasks_per_gpu: int = 0
    allocation_only: bool = False
    alloc_sid: int = 0
    submit_line: str = ""

    @property
    def tasks(self) -> int:
        """Number of tasks: explicit -n, else ntasks-per-node x nodes, else one per node."""
        if self.num_tasks:
            return self.num_tasks
        if self.ntasks_per_node:
            return self.ntasks_per_node * max(1, self.num_nodes)
        return max(1, self.num_nodes)
