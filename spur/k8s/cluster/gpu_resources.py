"""GPU workers advertise their GPUs to Kubernetes as extended resources. Pure: no I/O.

A node that runs workloads (role ``single`` or ``worker``) whose spurd discovered GPUs gets
``amd.com/gpu`` and/or ``nvidia.com/gpu`` in its Node's ``status.capacity`` (and ``allocatable``),
the count being the GPUs of that vendor spurd registered. Kubernetes documents this as the way to
advertise node-level extended resources: a PATCH of ``/api/v1/nodes/<name>/status``. containerd then
injects the devices from the CDI spec spurd wrote (:func:`spur.agent.k0s.cdi_specs`). The leader's
reconcile task (:mod:`spur.k8s.cluster.task`) sends the patch once a node is ``active`` and again
whenever the count it advertised differs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["RESOURCE_OF_VENDOR", "extended_resources", "status_patch", "to_advertise"]

RESOURCE_OF_VENDOR = {"amd": "amd.com/gpu", "nvidia": "nvidia.com/gpu"}
WORKLOAD_ROLES = ("single", "worker")


def extended_resources(vendors: Iterable[str]) -> dict[str, str]:
    """Resource name -> count (a Kubernetes quantity string) from the vendors of a node's GPUs;
    vendors other than AMD and NVIDIA are not advertised."""
    counts: dict[str, int] = {}
    for vendor in vendors:
        name = RESOURCE_OF_VENDOR.get(vendor.lower())
        if name:
            counts[name] = counts.get(name, 0) + 1
    return {name: str(n) for name, n in sorted(counts.items())}


def status_patch(resources: Mapping[str, str]) -> dict[str, Any]:
    """The merge patch (``application/merge-patch+json``) of a Node's status carrying ``resources``."""
    return {"status": {"capacity": dict(resources), "allocatable": dict(resources)}}


def to_advertise(
    phase: str,
    nodes: Mapping[str, tuple[str, str]],
    gpu_vendors: Mapping[str, Iterable[str]],
    advertised: Mapping[str, Mapping[str, str]],
) -> dict[str, dict[str, str]]:
    """node -> resources still to advertise.

    ``nodes`` maps each cluster node to ``(role, component_state)``; ``gpu_vendors`` the vendors of
    each registered node's GPUs; ``advertised`` what this leader already patched. Only ``active``
    nodes that run workloads, have GPUs and were not yet patched with the same counts; none when
    the cluster is ``down``.
    """
    if phase == "down":
        return {}
    out: dict[str, dict[str, str]] = {}
    for node, (role, state) in sorted(nodes.items()):
        if role not in WORKLOAD_ROLES or state != "active":
            continue
        resources = extended_resources(gpu_vendors.get(node, ()))
        if resources and dict(advertised.get(node, {})) != resources:
            out[node] = resources
    return out
