"""Cluster: the Raft members as each reports itself (role, term, commit and applied indexes), and,
when enabled, the managed k0s cluster (``spur k8s status``) and the WireGuard mesh (``spur net mesh``)."""

from __future__ import annotations

from typing import Any

from spur.rest.errors import RestError
from spur.rpc.proto import k8s_pb2 as kpb
from spur.rpc.proto import mesh_pb2
from spur.rpc.proto import spur_pb2 as pb
from spur.ui.context import ViewContext

TEMPLATE = "cluster.html"


def k8s_view(status: kpb.K8sClusterStatus) -> dict[str, Any]:
    """What the page shows of the k0s cluster's status (pure)."""
    nodes = [
        {
            "name": n.name, "role": n.role, "state": n.component_state or "unknown",
            "enabled": n.enabled, "mesh_ip": n.mesh_ip, "pod_cidr": n.pod_cidr,
            "problem": n.drift or n.start_failure or n.reason,
        }
        for n in status.nodes
    ]  # fmt: skip
    return {"phase": status.phase, "control_planes": list(status.control_planes), "nodes": nodes}


def mesh_view(members: mesh_pb2.MemberSet) -> dict[str, Any]:
    """What the page shows of the mesh membership (pure): each member's mesh address, endpoint,
    routed pod CIDR and the start of its public key (keys are public; the start tells them apart)."""
    rows = [
        {"node": m.node, "address": m.address, "endpoint": m.endpoint, "pod_cidr": m.pod_cidr, "key": m.public_key[:8]}
        for m in sorted(members.members, key=lambda m: m.node)
    ]
    return {"cidr": members.cidr, "port": members.listen_port, "members": rows}


async def load(ctx: ViewContext) -> dict[str, Any]:
    resp = await ctx.call("GetControllers", pb.Empty())
    members = [
        {
            "node_id": c.node_id, "address": c.address, "role": c.role, "term": c.term,
            "commit": c.commit_index, "applied": c.applied_index, "healthy": c.healthy,
            "lag": max(0, c.commit_index - c.applied_index),
        }
        for c in resp.controllers
    ]  # fmt: skip
    leader = next((m for m in members if m["role"].lower() == "leader"), None)
    k8s: dict[str, Any] | None = None
    k8s_note = ""
    try:
        k8s = k8s_view(await ctx.service_call("k8s", "Status", kpb.K8sStatusRequest()))
    except RestError as exc:  # off ([cluster] enabled = false), not served here, or not allowed
        k8s_note = exc.description or exc.error
    mesh: dict[str, Any] | None = None
    mesh_note = ""
    try:
        mesh = mesh_view(await ctx.service_call("mesh", "Members", mesh_pb2.MembersRequest()))
    except RestError as exc:
        mesh_note = exc.description or exc.error
    return {
        "members": members, "leader": leader,
        "k8s": k8s, "k8s_note": k8s_note, "mesh": mesh, "mesh_note": mesh_note,
    }  # fmt: skip
