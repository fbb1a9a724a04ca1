"""The environment a job's processes run with (pure: no I/O).

``build_job_environment`` computes the job-level variables for one node of an allocation (with the
``SLURM_ARRAY_*`` variables of an array task); ``build_step_environment`` those of one node of a job
step (srun inside an allocation: the job's variables, with the node list, task counts, global task ids
(``SLURM_GTIDS``) and node index of the step, plus ``SLURM_STEP_*``); ``task_environment`` adds the per-task ones
(``SLURM_PROCID``/``SLURM_LOCALID``). The submitter's
environment (``JobSpec.environment``) is the base; Slurm's variables are laid over it, and every
``SLURM_*`` variable gets a ``SPUR_*`` twin with the same value (``SLURMD_NODENAME`` -> ``SPUR_NODENAME``).

GPU variables: ``NodeAllocation.gpus`` are node-wide GPU indices; the vendor runtimes count their own
devices, so ``CUDA_VISIBLE_DEVICES`` lists the NVIDIA vendor ordinals of the allocated GPUs and
``ROCR_VISIBLE_DEVICES`` the AMD ones (see :mod:`spur.agent.discovery`). Values for these that came from
the submit host describe that host's GPUs, not this node's, so they are always dropped from the base.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spur.rpc.proto import spur_pb2


__all__ = [
    "GpuOrdinal",
    "array_environment",
    "array_task_step",
    "build_job_environment",
    "build_step_environment",
    "compress_counts",
    "task_environment",
    "task_gpu_bindings",
    "twin_name",
]

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

# Submit-host values that must never leak into a job on another node.
_HOST_SPECIFIC = (
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "CUDA_DEVICE_ORDER",
)


@dataclass(frozen=True)
class GpuOrdinal:
    """How the vendor runtime numbers one node GPU."""

    vendor: str  # "nvidia" | "amd"
    vendor_index: int


def twin_name(name: str) -> str:
    """The ``SPUR_*`` twin of a ``SLURM_*``/``SLURMD_*`` variable name."""
    if name.startswith("SLURMD_"):
        return "SPUR_" + name[len("SLURMD_") :]
    if name.startswith("SLURM_"):
        return "SPUR_" + name[len("SLURM_") :]
    raise ValueError(f"not a Slurm variable name: {name!r}")


def compress_counts(values: Iterable[int]) -> str:
    """Slurm's run-length form of per-node counts: ``[2, 2, 2, 1]`` -> ``"2(x3),1"``."""
    runs: list[list[int]] = []
    for v in values:
        if runs and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    return ",".join(f"{v}(x{n})" if n > 1 else str(v) for v, n in runs)


def _join(values: Iterable[int]) -> str:
    return ",".join(str(v) for v in values)


def build_job_environment(
    job: spur_pb2.JobInfo,
    *,
    node: str,
    cluster_name: str,
    nodelist: str,
    gpu_ordinals: Mapping[int, GpuOrdinal] | None = None,
    home: str = "",
    shell: str = "",
) -> dict[str, str]:
    """Job-level environment for ``node`` of ``job``'s allocation.

    ``nodelist`` is the compressed hostlist of the allocation (``job.nodelist`` when the controller
    set it). ``gpu_ordinals`` maps this node's GPU indices to vendor ordinals; an allocated index
    missing from it is exported under its own number. Raises ``ValueError`` when ``node`` is not part
    of the allocation.
    """
    alloc = list(job.allocation)
    node_index = next((i for i, a in enumerate(alloc) if a.node == node), None)
    if node_index is None:
        raise ValueError(f"node {node!r} is not in the allocation of job {job.job_id}")
    mine = alloc[node_index]
    spec = job.spec

    env = {k: v for k, v in spec.environment.items() if k not in _HOST_SPECIFIC}
    env.setdefault("PATH", DEFAULT_PATH)
    if job.user:
        env.setdefault("USER", job.user)
        env.setdefault("LOGNAME", job.user)
    if home:
        env.setdefault("HOME", home)
    if shell:
        env.setdefault("SHELL", shell)

    ntasks = sum(a.tasks for a in alloc) or max(1, spec.num_tasks)
    slurm: dict[str, str] = {
        "SLURM_JOB_ID": str(job.job_id),
        "SLURM_JOBID": str(job.job_id),
        "SLURM_JOB_NAME": spec.name,
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": str(len(alloc)),
        "SLURM_NNODES": str(len(alloc)),
        "SLURM_TASKS_PER_NODE": compress_counts(a.tasks for a in alloc),
        "SLURM_JOB_CPUS_PER_NODE": compress_counts(a.cpus for a in alloc),
        "SLURM_CPUS_ON_NODE": str(mine.cpus),
        "SLURM_NODEID": str(node_index),
        "SLURM_SUBMIT_DIR": spec.work_dir,
        "SLURM_JOB_PARTITION": job.partition or spec.partition,
        "SLURM_JOB_USER": job.user,
        "SLURM_JOB_UID": str(job.uid),
        "SLURM_JOB_GID": str(job.gid),
        "SLURM_CLUSTER_NAME": cluster_name,
        "SLURMD_NODENAME": node,
        "SLURM_GTIDS": "0",
        "SLURM_NODE_ALIASES": "(null)",
        "SLURM_TOPOLOGY_ADDR": node,
        "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
    }
    # As slurmd: the task count only when one was asked for (-n, --ntasks-per-node; srun always has one).
    if spec.num_tasks or spec.ntasks_per_node or spec.interactive:
        slurm["SLURM_NTASKS"] = slurm["SLURM_NPROCS"] = str(ntasks)
    if spec.ntasks_per_node:
        slurm["SLURM_NTASKS_PER_NODE"] = str(spec.ntasks_per_node)
    if spec.mem_per_cpu_mb:
        slurm["SLURM_MEM_PER_CPU"] = str(spec.mem_per_cpu_mb)
    if spec.dependency:
        slurm["SLURM_JOB_DEPENDENCY"] = spec.dependency
    submit_host = spec.environment.get("SLURM_SUBMIT_HOST") or spec.environment.get("HOSTNAME", "")
    if submit_host:
        slurm["SLURM_SUBMIT_HOST"] = submit_host
    # An explicit ``-c 1`` reaches the job as SLURM_CPUS_PER_TASK in the submitted environment
    # (spur.core.job_options.build_job_spec), as the request cannot be told from the default here.
    if spec.cpus_per_task > 1:
        slurm["SLURM_CPUS_PER_TASK"] = str(spec.cpus_per_task)
    if spec.mem_per_node_mb:
        slurm["SLURM_MEM_PER_NODE"] = str(spec.mem_per_node_mb)
    if spec.account:
        slurm["SLURM_JOB_ACCOUNT"] = spec.account
    slurm["SLURM_JOB_QOS"] = spec.qos or "normal"  # a job asking none runs in the default QOS
    if job.time_limit_secs > 0:
        slurm["SLURM_JOB_TIME_LIMIT"] = str(job.time_limit_secs)
    slurm.update(array_environment(job))
    if mine.gpus:
        slurm["SLURM_JOB_GPUS"] = _join(mine.gpus)
        slurm["SLURM_GPUS_ON_NODE"] = str(len(mine.gpus))
        env.update(_gpu_visibility(mine.gpus, gpu_ordinals or {}))

    env.update(slurm)
    env.update({twin_name(k): v for k, v in slurm.items()})
    return env


def array_task_step(spec: str) -> int:
    """Slurm 22.05's ``SLURM_ARRAY_TASK_STEP`` for an ``--array`` spec: the ``:STEP`` of a spec that is
    one stepped range (``0-15:4%2`` -> 4), else 1, even for an evenly spaced list (``1,5,9`` -> 1) or
    an unparsable spec."""
    import re

    m = re.fullmatch(r"\s*\d+-\d+:(\d+)\s*(?:%\d+)?", spec)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else 1


def array_environment(job: spur_pb2.JobInfo) -> dict[str, str]:
    """The ``SLURM_ARRAY_*`` variables of an array task (empty for a job that is not one)."""
    if not job.HasField("array_task_id"):
        return {}
    count = job.array_task_count or 1
    return {
        "SLURM_ARRAY_JOB_ID": str(job.array_job_id or job.job_id),
        "SLURM_ARRAY_TASK_ID": str(job.array_task_id),
        "SLURM_ARRAY_TASK_COUNT": str(count),
        "SLURM_ARRAY_TASK_MIN": str(job.array_task_min if count > 1 else job.array_task_id),
        "SLURM_ARRAY_TASK_MAX": str(job.array_task_max if count > 1 else job.array_task_id),
        "SLURM_ARRAY_TASK_STEP": str(array_task_step(job.spec.array) if job.spec.array else 1),
    }


def build_step_environment(
    job: spur_pb2.JobInfo,
    step: spur_pb2.StepInfo,
    *,
    node: str,
    cluster_name: str,
    nodelist: str,
    step_nodelist: str,
    gpu_ordinals: Mapping[int, GpuOrdinal] | None = None,
    home: str = "",
    shell: str = "",
) -> dict[str, str]:
    """Node-level environment of ``step`` on ``node``.

    The base is the environment srun sent with the step (``StepSpec.environment``; the job's when that
    is empty); the job's Slurm variables are laid over it, then the step's: ``SLURM_NODELIST``,
    ``SLURM_NNODES``, ``SLURM_NTASKS``, ``SLURM_TASKS_PER_NODE`` and ``SLURM_NODEID`` describe the
    step (``SLURM_JOB_*`` keep describing the job), plus ``SLURM_STEP_ID``/``SLURM_STEPID``,
    ``SLURM_STEP_NODELIST``, ``SLURM_STEP_NUM_NODES``, ``SLURM_STEP_NUM_TASKS`` and
    ``SLURM_STEP_TASKS_PER_NODE``. GPUs: the step's GPUs on this node when the step names any, else
    the job's. Raises ``ValueError`` when ``node`` is in neither the job's nor the step's allocation.
    """
    from spur.rpc.proto import spur_pb2 as pb

    salloc = list(step.allocation)
    index = next((i for i, a in enumerate(salloc) if a.node == node), None)
    if index is None:
        raise ValueError(f"node {node!r} is not in the allocation of step {job.job_id}.{step.step_id}")
    view = pb.JobInfo()
    view.CopyFrom(job)
    if step.spec.environment:
        view.spec.environment.clear()
        view.spec.environment.update(step.spec.environment)
    if salloc[index].gpus:
        for a in view.allocation:
            if a.node == node:
                del a.gpus[:]
                a.gpus.extend(salloc[index].gpus)
    env = build_job_environment(
        view,
        node=node,
        cluster_name=cluster_name,
        nodelist=nodelist,
        gpu_ordinals=gpu_ordinals,
        home=home,
        shell=shell,
    )
    ntasks = sum(a.tasks for a in salloc)
    per_node = compress_counts(a.tasks for a in salloc)
    first = sum(a.tasks for a in salloc[:index])
    slurm = {
        "SLURM_GTIDS": _join(range(first, first + salloc[index].tasks)),
        "SLURM_STEP_ID": str(step.step_id),
        "SLURM_STEPID": str(step.step_id),
        "SLURM_STEP_NODELIST": step_nodelist,
        "SLURM_STEP_NUM_NODES": str(len(salloc)),
        "SLURM_STEP_NUM_TASKS": str(ntasks),
        "SLURM_STEP_TASKS_PER_NODE": per_node,
        "SLURM_NODELIST": step_nodelist,
        "SLURM_NNODES": str(len(salloc)),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_NPROCS": str(ntasks),
        "SLURM_TASKS_PER_NODE": per_node,
        "SLURM_NODEID": str(index),
    }
    slurm["SLURM_MPI_TYPE"] = step.spec.mpi or "none"
    if step.spec.cpus_per_task > 0:
        slurm["SLURM_CPUS_PER_TASK"] = str(step.spec.cpus_per_task)
    if step.spec.unbuffered:
        slurm["SLURM_UNBUFFEREDIO"] = "1"
    if step.spec.label:
        slurm["SLURM_LABELIO"] = "1"
    env.update(slurm)
    env.update({twin_name(k): v for k, v in slurm.items()})
    return env


def _gpu_visibility(indices: Sequence[int], ordinals: Mapping[int, GpuOrdinal]) -> dict[str, str]:
    nvidia: list[int] = []
    amd: list[int] = []
    every: list[int] = []
    for index in indices:
        ordinal = ordinals.get(index, GpuOrdinal("nvidia", index))
        every.append(ordinal.vendor_index)
        (amd if ordinal.vendor == "amd" else nvidia).append(ordinal.vendor_index)
    out = {"GPU_DEVICE_ORDINAL": _join(every)}
    if nvidia:
        out["CUDA_VISIBLE_DEVICES"] = _join(nvidia)
        # Vendor ordinals are PCI order (discovery); CUDA must count the same way.
        out["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    if amd:
        out["ROCR_VISIBLE_DEVICES"] = _join(amd)
    return out


# The variables that say which GPUs a process may use (replaced as a whole for a bound task).
GPU_VISIBILITY = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "CUDA_DEVICE_ORDER")


def task_gpu_bindings(
    indices: Sequence[int], ordinals: Mapping[int, GpuOrdinal], *, ntasks: int, gpus_per_task: int
) -> list[dict[str, str]]:
    """Each local task's GPU variables under ``--gpus-per-task=N``, which binds every task to its own N
    GPUs as Slurm does (``--gpu-bind=per_task:N``): task i gets the node's allocated GPUs i*N to
    i*N+N-1, in allocation order. Empty (every task sees every GPU of the node, as with
    ``--gres=gpu:N``) without ``--gpus-per-task`` or when the node holds fewer than ntasks*N GPUs."""
    if gpus_per_task <= 0 or ntasks <= 0 or len(indices) < ntasks * gpus_per_task:
        return []
    return [
        _gpu_visibility(indices[i * gpus_per_task : (i + 1) * gpus_per_task], ordinals) for i in range(ntasks)
    ]


def task_environment(
    base: Mapping[str, str], *, procid: int, localid: int, gpus: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``base`` plus the variables of one task (global rank ``procid``, node-local rank ``localid``);
    ``gpus``: the task's own GPU variables (:func:`task_gpu_bindings`), which replace the node's."""
    env = dict(base)
    if gpus is not None:
        for key in GPU_VISIBILITY:
            env.pop(key, None)
        env.update(gpus)
    for prefix in ("SLURM_", "SPUR_"):
        env[prefix + "PROCID"] = str(procid)
        env[prefix + "LOCALID"] = str(localid)
    return env
