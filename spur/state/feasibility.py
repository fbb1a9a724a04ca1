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

from collections.abc import Container, Iterable
from dataclasses import dataclass
from typing import Any

from spur.core.job import JobSpec

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


@dataclass(frozen=True)
class PartitionSummary:
    """What a partition's registered nodes can offer one job at most: the only facts the checks need,
    so that a submission costs O(1) however many nodes there are (ClusterState caches one per partition)."""

    nodes: int = 0
    total_cpus: int = 0
    max_cpus: int = 0
    max_memory_mb: int = 0  # 0: no node reported its memory
    max_gpus: int = 0
    total_gpus: int = 0
    max_gpus_by_model: tuple[tuple[str, int], ...] = ()
    features: frozenset[str] = frozenset()

    @classmethod
    def of(cls, members: Iterable[Any]) -> PartitionSummary:
        """From nodes (``spur.core.job.Node`` or ``NodeInfo`` messages: cpus, memory_mb, gpus, features)."""
        count = total_cpus = max_cpus = max_mem = max_gpus = total_gpus = 0
        by_model: dict[str, int] = {}
        features: set[str] = set()
        for n in members:
            count += 1
            total_cpus += n.cpus
            max_cpus = max(max_cpus, n.cpus)
            max_mem = max(max_mem, n.memory_mb or 0)
            max_gpus = max(max_gpus, len(n.gpus))
            total_gpus += len(n.gpus)
            models: dict[str, int] = {}
            for g in n.gpus:
                models[g.model] = models.get(g.model, 0) + 1
            for model, k in models.items():
                by_model[model] = max(by_model.get(model, 0), k)
            features.update(n.features)
        return cls(
            count,
            total_cpus,
            max_cpus,
            max_mem,
            max_gpus,
            total_gpus,
            tuple(sorted(by_model.items())),
            frozenset(features),
        )


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


def partition_reason(spec: JobSpec, part: PartitionSummary) -> str | None:
    """``PartitionNodeLimit`` or ``PartitionConfig`` when the partition (the summary of its
    registered nodes) can never hold the job, else None."""
    if not part.nodes:
        return None
    if max(1, spec.num_nodes) > part.nodes:
        return PARTITION_NODE_LIMIT
    if spec.tasks * max(1, spec.cpus_per_task) > part.total_cpus or spec.cpus_per_task > part.max_cpus:
        return PARTITION_CONFIG
    return None


def submit_refusal(
    spec: JobSpec,
    part: PartitionSummary,
    known_nodes: Container[str],
    configured_names: Container[str] | None,
    enforce_limits: str = "NO",
) -> Refusal | None:
    """Why Slurm would refuse ``spec`` on a partition whose registered nodes ``part`` summarizes.

    ``known_nodes`` are the registered node names; ``configured_names`` the names the partition lists
    (None: ALL nodes), so that a listed node that has not registered yet is not "invalid". None when
    the job may be queued.
    """
    unknown = [
        n
        for n in spec.nodelist
        if n not in known_nodes and (configured_names is None or n not in configured_names)
    ]
    if unknown:
        return Refusal("INVALID_ARGUMENT", ("Invalid node name specified",))
    if not part.nodes:
        return None
    memory = per_node_memory_mb(spec)
    if memory and part.max_memory_mb and memory > part.max_memory_mb:
        return Refusal(
            "INVALID_ARGUMENT", ("Memory specification can not be satisfied", NODE_CONFIG_UNAVAILABLE)
        )
    unavailable = Refusal("INVALID_ARGUMENT", (NODE_CONFIG_UNAVAILABLE,))
    if spec.gres:
        from spur.core.resources import ResourceError, parse_gres

        try:
            items = parse_gres(list(spec.gres))
        except ResourceError:
            items = []
        by_model = dict(part.max_gpus_by_model)
        for item in items:
            most = by_model.get(item.type, 0) if item.type else part.max_gpus
            if item.name != "gpu" or item.count > most:
                return unavailable
    if (spec.gpus_total or spec.gpus_per_task) and not part.max_gpus:
        return unavailable
    if spec.gpus_total > part.total_gpus:
        return unavailable
    if spec.constraint and any(f not in part.features for f in spec.constraint):
        return Refusal("INVALID_ARGUMENT", ("Invalid feature specification",))
    reason = partition_reason(spec, part)
    if reason and enforce_limits.upper() in ENFORCING:
        return Refusal("INVALID_ARGUMENT", (ENFORCED_TEXT[reason],))
    return None
