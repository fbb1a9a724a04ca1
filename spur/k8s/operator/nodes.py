"""Kubernetes nodes as Spur nodes (pure).

:func:`registration` turns a Node object into the ``RegisterNodeRequest`` the node watcher sends:
CPUs and memory from ``status.allocatable`` (whole CPUs, MiB), GPUs from ``amd.com/gpu`` or
``nvidia.com/gpu`` (one ``GpuDevice`` per unit, indices 0..n-1), and the operator's own address and
port as the node's agent address (the virtual agent serves every node). :func:`desired_state` says
what Spur should make of the node: ``up`` when Ready and schedulable, ``down`` when NotReady (or
without a Ready condition), ``drain`` when cordoned. :func:`selected` applies the ``--node-selector``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from spur.rpc.proto import spur_pb2 as pb

__all__ = [
    "DOWN_REASON",
    "DRAIN_REASON",
    "GPU_RESOURCES",
    "desired_state",
    "gpu_resource",
    "parse_cpu",
    "parse_memory_mb",
    "registration",
    "selected",
]

GPU_RESOURCES = (("amd.com/gpu", "amd"), ("nvidia.com/gpu", "nvidia"))
DOWN_REASON = "kubernetes node NotReady"
DRAIN_REASON = "kubernetes node cordoned"

_SUFFIX = {
    "": 1,
    "k": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "P": 1000**5,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "m": 0.001,
}


def _quantity(value: str) -> float:
    match = re.fullmatch(r"\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*", str(value))
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def parse_cpu(value: str) -> int:
    """Whole CPUs in a CPU quantity (``"64"``, ``"63500m"`` -> 63)."""
    return int(math.floor(_quantity(value) + 1e-9))


def parse_memory_mb(value: str) -> int:
    """MiB in a memory quantity (``"512Gi"`` -> 524288)."""
    return int(_quantity(value) // (1024 * 1024))


def gpu_resource(node: Mapping[str, Any]) -> tuple[str, str, int]:
    """(resource name, vendor, count) of the node's GPUs; ``("amd.com/gpu", "amd", 0)`` without."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    for resource, vendor in GPU_RESOURCES:
        if resource in allocatable:
            return resource, vendor, int(_quantity(allocatable[resource]))
    return "amd.com/gpu", "amd", 0


def registration(node: Mapping[str, Any], *, address: str, port: int, version: str) -> pb.RegisterNodeRequest:
    """The registration of a Kubernetes node (module docstring). Raises ValueError for a node whose
    allocatable resources cannot be read."""
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or {}
    info = status.get("nodeInfo") or {}
    cpus = parse_cpu(allocatable.get("cpu", "0"))
    memory = parse_memory_mb(allocatable.get("memory", "0"))
    _resource, vendor, count = gpu_resource(node)
    labels = meta.get("labels") or {}
    features = sorted({"k8s", *(v for k, v in labels.items() if k == "node.kubernetes.io/instance-type")})
    return pb.RegisterNodeRequest(
        name=meta.get("name", ""),
        address=address,
        port=port,
        cpus=max(cpus, 1),
        memory_mb=memory,
        gpus=[pb.GpuDevice(index=i, vendor=vendor) for i in range(count)],
        version=version,
        sockets=1,
        cores_per_socket=max(cpus, 1),
        threads_per_core=1,
        arch=info.get("architecture", ""),
        os=info.get("operatingSystem", ""),
        features=features,
    )


def desired_state(node: Mapping[str, Any]) -> str:
    """``up``, ``down`` or ``drain`` (module docstring)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    if not ready:
        return "down"
    if (node.get("spec") or {}).get("unschedulable"):
        return "drain"
    return "up"


def selected(node: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    """Whether the node's labels carry every ``key=value`` of ``selector`` (empty: every node)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def parse_selector(text: str) -> dict[str, str]:
    """``key=value,key2=value2`` -> dict; raises ValueError naming a bad item."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"node selector item {item!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


def state_actions(desired: str, spur_state: str, spur_reason: str) -> list[tuple[str, str]]:
    """The ``UpdateNode`` actions (state, reason) that bring a Spur node to ``desired``.

    ``spur_state`` is Spur's long state (idle, mixed, allocated, down, drained, draining). Only
    states the watcher set itself (reasons :data:`DOWN_REASON`, :data:`DRAIN_REASON`) are undone, so
    an administrator's own DOWN or DRAIN stays."""
    ours = spur_reason in (DOWN_REASON, DRAIN_REASON)
    down = spur_state == "down"
    drained = spur_state in ("drained", "draining")
    if desired == "down":
        return [] if down else [("DOWN", DOWN_REASON)]
    if desired == "drain":
        if down and ours:
            return [("RESUME", ""), ("DRAIN", DRAIN_REASON)]
        return [] if (drained or down) else [("DRAIN", DRAIN_REASON)]
    if (down or drained) and ours:
        return [("RESUME", "")]
    return []
