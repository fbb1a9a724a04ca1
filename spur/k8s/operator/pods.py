"""A launched Spur job as Kubernetes objects, and the pods' phases as the job's outcome (pure).

Rendering (:func:`render_pods`, :func:`render_service`): one Pod per node of the allocation, pinned to
it with ``spec.nodeName``, ``restartPolicy: Never``; requests = limits = that node's share (CPUs,
memory, GPUs as the node's GPU resource, ``amd.com/gpu`` or ``nvidia.com/gpu``); the batch script as
the container's command (run by the interpreter of its ``#!`` line); Slurm's environment for that node
(:func:`spur.agent.environment.build_job_environment`) with ``SLURM_PROCID`` = the pod's rank, plus
``MASTER_ADDR``/``MASTER_PORT``/``WORLD_SIZE``/``RANK`` for rendezvous. Labels link every object to the
job (``spur.amd.com/job-id``). A multi-node job also gets a headless Service named like its pods'
subdomain so ``MASTER_ADDR`` (rank 0's pod) resolves.

A job with a time limit gets it as the pods' ``activeDeadlineSeconds``.

Outcome (:func:`job_outcome`): from every pod of a job -- any pod Failed ends the job: past its
deadline (DeadlineExceeded) -> timed out; OOMKilled -> out of memory, otherwise FAILED with the
container's exit code; a container waiting on an image pull
error (ErrImagePull, ImagePullBackOff, InvalidImageName) fails the launch with that reason; all pods
Succeeded -> COMPLETED (exit 0); anything else -> still running (None).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spur.agent.environment import build_job_environment, task_environment
from spur.k8s.operator.spurjobs import ENV_IMAGE, ENV_NAMESPACE, ENV_SPURJOB

if TYPE_CHECKING:
    from spur.rpc.proto import spur_pb2 as pb

__all__ = [
    "JOB_ID_LABEL",
    "MANAGED_BY",
    "MASTER_PORT",
    "Outcome",
    "job_outcome",
    "pod_name",
    "render_pods",
    "render_service",
    "service_name",
]

JOB_ID_LABEL = "spur.amd.com/job-id"
RANK_LABEL = "spur.amd.com/rank"
NODE_LABEL = "spur.amd.com/node"
SPURJOB_LABEL = "spur.amd.com/spurjob"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "spur-k8s-operator"
CLUSTER_ANNOTATION = "spur.amd.com/cluster-id"
MASTER_PORT = 29500
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})


def service_name(job_id: int) -> str:
    return f"spur-job-{job_id}"


def pod_name(job_id: int, rank: int) -> str:
    return f"spur-job-{job_id}-{rank}"


def job_namespace(job: pb.JobInfo, default: str) -> str:
    """Where ``job``'s pods go: its SpurJob's namespace, else ``default``."""
    return job.spec.environment.get(ENV_NAMESPACE) or default


def interpreter(script: str) -> list[str]:
    """The command that runs ``script`` given as one argument: its ``#!`` line, else ``/bin/sh -c``."""
    first = script.split("\n", 1)[0]
    if first.startswith("#!"):
        words = first[2:].split()
        if words:
            return [*words, "-c"]
    return ["/bin/sh", "-c"]


def _quantities(alloc: pb.NodeAllocation, gpu_resource: str) -> dict[str, str]:
    out = {"cpu": str(max(1, alloc.cpus))}
    if alloc.mem_mb:
        out["memory"] = f"{alloc.mem_mb}Mi"
    if alloc.gpus:
        out[gpu_resource] = str(len(alloc.gpus))
    return out


def labels_for(job: pb.JobInfo) -> dict[str, str]:
    labels = {JOB_ID_LABEL: str(job.job_id), MANAGED_BY_LABEL: MANAGED_BY}
    spurjob = job.spec.environment.get(ENV_SPURJOB)
    if spurjob and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", spurjob):
        labels[SPURJOB_LABEL] = spurjob
    return labels


def render_pods(
    job: pb.JobInfo,
    *,
    default_namespace: str,
    default_image: str,
    cluster_name: str,
    cluster_id: str,
    gpu_resources: Mapping[str, str],
) -> list[dict[str, Any]]:
    """The pods of ``job`` (a ``spur_pb2.JobInfo`` with its allocation), rank order.

    ``gpu_resources`` maps a node name to its GPU resource name (``amd.com/gpu`` when unknown)."""
    namespace = job_namespace(job, default_namespace)
    image = job.spec.environment.get(ENV_IMAGE) or default_image
    nodes = list(job.allocation)
    world = len(nodes)
    multi = world > 1
    master = f"{pod_name(job.job_id, 0)}.{service_name(job.job_id)}" if multi else "localhost"
    command = interpreter(job.spec.script)
    pods = []
    for rank, alloc in enumerate(nodes):
        env = build_job_environment(
            job, node=alloc.node, cluster_name=cluster_name, nodelist=job.nodelist or alloc.node
        )
        env = task_environment(env, procid=rank, localid=0)
        for key in (ENV_NAMESPACE, ENV_IMAGE, ENV_SPURJOB):
            env.pop(key, None)
        env.update(MASTER_ADDR=master, MASTER_PORT=str(MASTER_PORT), WORLD_SIZE=str(world), RANK=str(rank))
        labels = {**labels_for(job), RANK_LABEL: str(rank), NODE_LABEL: alloc.node}
        resources = _quantities(alloc, gpu_resources.get(alloc.node, "amd.com/gpu"))
        spec: dict[str, Any] = {
            "nodeName": alloc.node,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "job",
                    "image": image,
                    "command": command,
                    "args": [job.spec.script or "true"],
                    "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
                    "resources": {"requests": dict(resources), "limits": dict(resources)},
                }
            ],
        }
        if job.time_limit_secs > 0:
            spec["activeDeadlineSeconds"] = int(job.time_limit_secs)  # Kubernetes enforces the limit
        if multi:
            spec["hostname"] = pod_name(job.job_id, rank)
            spec["subdomain"] = service_name(job.job_id)
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name(job.job_id, rank),
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": {CLUSTER_ANNOTATION: cluster_id},
                },
                "spec": spec,
            }
        )
    return pods


def render_service(job: pb.JobInfo, *, default_namespace: str) -> dict[str, Any]:
    """The headless Service of a multi-node job (rank 0 is ``MASTER_ADDR`` through it)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service_name(job.job_id),
            "namespace": job_namespace(job, default_namespace),
            "labels": labels_for(job),
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {JOB_ID_LABEL: str(job.job_id)},
            "ports": [{"name": "rendezvous", "port": MASTER_PORT, "targetPort": MASTER_PORT}],
        },
    }


@dataclass(frozen=True)
class Outcome:
    """How a job ended, as the virtual agent reports it (``spur_pb2.JobStatusReport`` fields)."""

    exit_code: int = 0
    out_of_memory: bool = False
    timed_out: bool = False
    launch_failed: bool = False
    message: str = ""


def _terminated(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated")
        if term:
            return term
    return None


def _pull_error(pod: Mapping[str, Any]) -> str | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_PULL_REASONS:
            detail = waiting.get("message") or cs.get("image") or ""
            return f"{waiting['reason']}: {detail}".rstrip(": ")
    return None


def job_outcome(pods: Iterable[Mapping[str, Any]], expected: int) -> Outcome | None:
    """The job's end from its pods (module docstring); None while it is still running. ``expected``
    is the number of pods the job has (a pod not seen yet counts as running)."""
    pods = list(pods)
    for pod in pods:
        if (pod.get("status") or {}).get("phase") == "Failed":
            if (pod.get("status") or {}).get("reason") == "DeadlineExceeded":
                name = (pod.get("metadata") or {}).get("name", "")
                return Outcome(timed_out=True, message=f"pod {name} reached the job's time limit")
            term = _terminated(pod) or {}
            reason = term.get("reason") or (pod.get("status") or {}).get("reason") or "Error"
            code = int(term.get("exitCode", 1) or 0) or 1
            name = (pod.get("metadata") or {}).get("name", "")
            if reason == "OOMKilled":
                return Outcome(exit_code=code, out_of_memory=True, message=f"pod {name} OOMKilled")
            return Outcome(exit_code=code, message=f"pod {name} failed: {reason}")
    for pod in pods:
        pull = _pull_error(pod)
        if pull is not None:
            name = (pod.get("metadata") or {}).get("name", "")
            return Outcome(exit_code=1, launch_failed=True, message=f"pod {name}: {pull}")
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    if len(pods) >= expected and phases and all(ph == "Succeeded" for ph in phases):
        return Outcome()
    return None
