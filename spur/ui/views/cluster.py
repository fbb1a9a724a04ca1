"""Cluster: the Raft members as each reports itself (role, term, commit and applied indexes)."""

from __future__ import annotations

from typing import Any

from spur.rpc.proto import spur_pb2 as pb
from spur.ui.context import ViewContext

TEMPLATE = "cluster.html"


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
    return {"members": members, "leader": leader}
