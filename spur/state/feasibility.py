"""Can a job ever run on its partition as configured? Slurm 22.05's answers at submission (pure).

Two kinds of impossible request, as ``slurmctld`` tells them apart
(``shared/reference/impossible-requests-22.05.txt``):

* refused at submission, whatever the configuration: memory per node beyond every node of the
  partition (``Memory specification can not be satisfied`` then ``Requested node configuration is
  not available``), a node name no node has (``Invalid node name specified``), generic resources
  (GPUs) or features no node of the partition offers (``Requested node configuration is not
  available`` / ``Invalid feature specification``);
* beyond the partition's size: more nodes than it has (pending reason ``PartitionNodeLimit``), more
  CPUs than it has in all or in its largest node (``PartitionConfig``). Such a job pends, or is
  refused (``Node count specification invalid`` / ``More processors requested than permitted``)
  when ``[scheduler] enforce_part_limits`` is ALL, ANY or YES.

Checks that depend on node sizes are made only when the partition has registered nodes: agents
register themselves, and a cluster that is starting must not refuse everything.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from spur.core.job import JobSpec, Node

PARTITION_CONFIG = "PartitionConfig"
PARTITION_NODE_LIMIT = "PartitionNodeLimit"
NODE_CONFIG_UNAVAILABLE = "Requested node configuration is not available"
ENFORCING = frozenset({"ALL", "ANY", "YES"})
# Refusal texts of the partition-limit reasons when EnforcePartLimits is set (Slurm's error strings).
ENFORCED_TEXT = {
    PARTITION_NODE_LIMIT: "Node count specification invalid",
    PARTITION_CONFIG: "More processors requested than permitted",
}


@dataclass(frozen=True)
class Refusal:
    """A submission Slurm refuses. ``lines`` are its error lines, the last being the reason the
    submission failed (``sbatch: error: Batch job submission failed: <last>``)."""

    code: str  # gRPC status name
    lines: tuple[str, ...]

    @property
    def message(self) -> str:
        return "\n".join(self.lines)


def _per_node_cpus(spec: JobSpec) -> int:
    nodes = max(1, spec.num_nodes)
    tasks_per_node = spec.ntasks_per_node or -(-spec.tasks // nodes)
    return max(1, tasks_per_node) * max(1, spec.cpus_per_task)


def per_node_memory_mb(spec: JobSpec) -> int:
    """Memory one node must offer the job (``--mem``, or ``--mem-per-cpu`` x its CPUs there)."""
    if spec.mem_per_node_mb:
        return spec.mem_per_node_mb
    if spec.mem_per_cpu_mb:
        return spec.mem_per_cpu_mb * max(spec.cpus_per_task, _per_node_cpus(spec) if spec.num_tasks else 1)
    return 0


def partition_reason(spec: JobSpec, members: Sequence[Node]) -> str | None:
    """``PartitionNodeLimit`` or ``PartitionConfig`` when the partition (its registered ``members``)
    can never hold the job, else None."""
    if not members:
        return None
    if max(1, spec.num_nodes) > len(members):
        return PARTITION_NODE_LIMIT
    total_cpus = sum(n.cpus for n in members)
    largest = max(n.cpus for n in members)
    if spec.tasks * max(1, spec.cpus_per_task) > total_cpus or spec.cpus_per_task > largest:
        return PARTITION_CONFIG
    return None


def submit_refusal(
    spec: JobSpec,
    members: Sequence[Node],
    all_nodes: Mapping[str, Node],
    configured_names: Collection[str] | None,
    enforce_limits: str = "NO",
) -> Refusal | None:
    """Why Slurm would refuse ``spec`` on a partition whose registered nodes are ``members``.

    ``configured_names`` are the node names the partition lists (None: ALL nodes), so that a listed
    node that has not registered yet is not "invalid". None when the job may be queued.
    """
    wanted = list(spec.nodelist)
    unknown = [
        n for n in wanted if n not in all_nodes and (configured_names is None or n not in configured_names)
    ]
    if unknown:
        return Refusal("INVALID_ARGUMENT", ("Invalid node name specified",))
    if not members:
        return None
    memory = per_node_memory_mb(spec)
    sized = [n.memory_mb for n in members if n.memory_mb]
    if memory and sized and memory > max(sized):
        return Refusal(
            "INVALID_ARGUMENT", ("Memory specification can not be satisfied", NODE_CONFIG_UNAVAILABLE)
        )
    if spec.gres or spec.gpus_total or spec.gpus_per_task:
        from spur.core.resources import ResourceError, parse_gres

        try:
            items = parse_gres(list(spec.gres))
        except ResourceError:
            items = []
        most = max(len(n.gpus) for n in members)
        for item in items:
            if item.name != "gpu":
                return Refusal("INVALID_ARGUMENT", (NODE_CONFIG_UNAVAILABLE,))
            models = [sum(1 for g in n.gpus if not item.type or g.model == item.type) for n in members]
            if item.count > max(models):
                return Refusal("INVALID_ARGUMENT", (NODE_CONFIG_UNAVAILABLE,))
        if (spec.gpus_total or spec.gpus_per_task) and most == 0:
            return Refusal("INVALID_ARGUMENT", (NODE_CONFIG_UNAVAILABLE,))
        if spec.gpus_total > sum(len(n.gpus) for n in members):
            return Refusal("INVALID_ARGUMENT", (NODE_CONFIG_UNAVAILABLE,))
    if spec.constraint:
        offered = {f for n in members for f in n.features}
        if any(f not in offered for f in spec.constraint):
            return Refusal("INVALID_ARGUMENT", ("Invalid feature specification",))
    reason = partition_reason(spec, members)
    if reason and enforce_limits.upper() in ENFORCING:
        return Refusal("INVALID_ARGUMENT", (ENFORCED_TEXT[reason],))
    return None
