"""Which pod /24s the WireGuard mesh should carry for the managed k0s cluster. Pure: no I/O.

With ``[network] wg_enabled``, each cluster node's pod /24 (carved from ``[cluster] pod_cidr`` and
kept in the ``k8s_cluster`` record) is attached to that node's mesh entry
(:class:`spur.state.mesh.SetMeshPodCidr`), so every peer lists it in the node's AllowedIPs and
routes it over the mesh interface. A node that leaves the cluster (``remove-nodes``) or a cluster
that goes ``down`` has its /24 cleared again.

Only pod CIDRs inside ``[cluster] pod_cidr`` belong to the cluster: a pod CIDR an administrator set
on a node by hand (``Mesh/SetPodCidr``) outside that range is left alone.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

__all__ = ["wanted_pod_cidrs", "pod_cidr_changes"]


def wanted_pod_cidrs(phase: str, nodes: Mapping[str, str]) -> dict[str, str]:
    """node -> pod /24 the mesh should carry: every cluster node that has one, none when ``down``.

    ``nodes`` maps each node of the cluster record to its recorded pod CIDR (``""``: none yet).
    """
    if phase == "down":
        return {}
    return {name: cidr for name, cidr in nodes.items() if cidr}


def _inside(cidr: str, pool: str) -> bool:
    try:
        net, whole = ipaddress.ip_network(cidr, strict=False), ipaddress.ip_network(pool, strict=False)
    except ValueError:
        return False
    return net.version == whole.version and net.subnet_of(whole)  # type: ignore[arg-type]


def pod_cidr_changes(wanted: Mapping[str, str], meshed: Mapping[str, str], pool: str) -> list[tuple[str, str]]:
    """The ``(node, pod_cidr)`` updates (``""`` = clear) that bring the mesh in line, in node order.

    ``meshed`` maps each node holding a mesh entry to the pod CIDR it carries now. A wanted node
    without a mesh entry is skipped (it gets its /24 once it joins the mesh). A carried CIDR that is
    not wanted is cleared only when it lies inside ``pool`` (``[cluster] pod_cidr``).
    """
    out: list[tuple[str, str]] = []
    for node in sorted(meshed):
        have, want = meshed[node], wanted.get(node, "")
        if have == want:
            continue
        if want:
            out.append((node, want))
        elif _inside(have, pool):
            out.append((node, ""))
    return out
