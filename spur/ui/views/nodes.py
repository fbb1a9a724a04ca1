"""Nodes: per-node CPU, memory and GPU allocation, state and reason; drain/resume for administrators."""

from __future__ import annotations

from typing import Any

from spur.rpc.proto import spur_pb2 as pb
from spur.ui.context import ViewContext

TEMPLATE = "nodes.html"


def _pct(used: float, total: float) -> int:
    return 0 if total <= 0 else min(100, round(100 * used / total))


def node_row(n: pb.NodeInfo) -> dict[str, Any]:
    gpus = len(n.gpus)
    return {
        "name": n.name, "state": n.state, "reason": n.reason, "partitions": ",".join(n.partitions),
        "cpus": n.cpus, "alloc_cpus": n.alloc_cpus, "cpu_pct": _pct(n.alloc_cpus, n.cpus),
        "mem": n.memory_mb, "alloc_mem": n.alloc_mem_mb, "mem_pct": _pct(n.alloc_mem_mb, n.memory_mb),
        "gpus": gpus, "alloc_gpus": n.alloc_gpus, "gpu_pct": _pct(n.alloc_gpus, gpus),
        "drained": n.state in ("drained", "draining", "down"),
    }  # fmt: skip


async def load(ctx: ViewContext) -> dict[str, Any]:
    resp = await ctx.call("GetNodes", pb.GetNodesRequest())
    return {"nodes": [node_row(n) for n in resp.nodes]}
