"""Overview: nodes by state, partitions, running/pending counts and the usage charts."""

from __future__ import annotations

from collections import Counter
from typing import Any

from spur.rpc.proto import spur_pb2 as pb
from spur.ui.charts import Series, line_chart
from spur.ui.context import ViewContext
from spur.ui.samples import Sample

TEMPLATE = "overview.html"
RANGES = {"hour": 3600, "day": 86400, "week": 7 * 86400}


def charts(samples: list[Sample], start: float, end: float) -> list[str]:
    """The Overview's SVG charts over ``samples`` (oldest first; the last one is "now")."""

    def series(name: str, attr: str, css: str, scale: float = 1.0) -> Series:
        return Series(name, tuple((s.minute, getattr(s, attr) / scale) for s in samples), css)

    return [
        line_chart("CPUs", [series("allocated", "cpus_alloc", "s1"), series("total", "cpus_total", "s2")],
                   start=start, end=end),
        line_chart("GPUs", [series("allocated", "gpus_alloc", "s1"), series("total", "gpus_total", "s2")],
                   start=start, end=end),
        line_chart("Memory (GB)", [series("allocated", "mem_alloc_mb", "s1", 1024.0),
                                   series("total", "mem_total_mb", "s2", 1024.0)], start=start, end=end),
        line_chart("Queue", [series("pending", "pending", "s3"), series("running", "running", "s1")],
                   start=start, end=end),
        line_chart("Jobs per minute", [series("started", "started", "s1"), series("finished", "finished", "s4")],
                   start=start, end=end),
    ]  # fmt: skip


async def load(ctx: ViewContext) -> dict[str, Any]:
    span_name = ctx.args.get("range", "hour")
    span = RANGES.get(span_name, 3600)
    nodes = (await ctx.call("GetNodes", pb.GetNodesRequest())).nodes
    parts = (await ctx.call("GetPartitions", pb.GetPartitionsRequest())).partitions
    by_partition = await ctx.job_counts(pb.GetJobsRequest())
    by_state = Counter(n.state for n in nodes)
    job_states: Counter[str] = Counter()
    for (_, state), n in by_partition.items():
        job_states[state] += n
    node_state = {n.name: n.state for n in nodes}
    partitions = [
        {
            "name": p.name, "state": p.state, "default": p.is_default, "nodes": len(p.nodes),
            "idle": sum(1 for n in p.nodes if node_state.get(n) == "idle"),
            "pending": by_partition[(p.name, "PENDING")],
            "running": by_partition[(p.name, "RUNNING")],
        }
        for p in parts
    ]  # fmt: skip
    end = ctx.now
    current = await ctx.current_sample()
    samples = [*ctx.ring.since(end - span), current]
    return {
        "node_states": sorted(by_state.items()),
        "node_count": len(nodes),
        "partitions": partitions,
        "running": job_states.get("RUNNING", 0),
        "pending": job_states.get("PENDING", 0),
        "charts": charts(samples, end - span, end),
        "range": span_name if span_name in RANGES else "hour",
        "ranges": list(RANGES),
        "sample_count": len(samples),
        "now": current,
    }
