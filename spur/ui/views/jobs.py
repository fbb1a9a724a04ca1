"""Jobs: the queue and recent history, filtered and sorted, arrays folded as squeue folds them."""

from __future__ import annotations

from typing import Any

from spur.rest.offload import off_loop
from spur.rpc.proto import spur_pb2 as pb
from spur.ui.context import ViewContext
from spur.ui.queue import SORT_KEYS, STATE_CODES, QueueJob, page_of, parse_filter, select_rows
from spur.ui.reasons import explain_reason

TEMPLATE = "jobs.html"
STATE_CHOICES = ["active", "history", "all", *STATE_CODES]


def _elapsed(job: QueueJob, now: float) -> str:
    if not job.start_time:
        return ""
    end = job.end_time or now
    secs = max(0, int(end - job.start_time))
    days, rest = divmod(secs, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return (f"{days}-" if days else "") + (f"{h}:{m:02d}:{s:02d}" if h or days else f"{m}:{s:02d}")


async def load(ctx: ViewContext) -> dict[str, Any]:
    f = parse_filter(ctx.args)  # FilterError -> 400 with its message
    wanted = f.state == "active"
    req = pb.GetJobsRequest(include_finished=not wanted)
    if f.partition:
        req.partitions.append(f.partition)
    records = await ctx.queue_jobs(req)
    # Filtering, folding and sorting 10,000 records is tens of milliseconds of pure work on immutable
    # snapshots: done as the REST answers are (spur.rest.offload), so the controller's loop keeps
    # serving submissions and Raft meanwhile.
    rows = await off_loop(lambda: select_rows(records, f), len(records))
    shown, pages = page_of(rows, f.page)
    table = [
        {
            "id": r.id_text, "job_id": r.job.job_id, "name": r.job.name, "user": r.job.user,
            "account": r.job.account, "partition": r.job.partition, "state": r.job.state,
            "code": r.state_code, "time": _elapsed(r.job, ctx.now), "nodes": r.job.nodelist,
            "reason": r.job.reason if r.job.state == "PENDING" else "",
            "why": explain_reason(r.job.reason) if r.job.state == "PENDING" else "",
            "tasks": len(r.group.task_ids) if r.group is not None else 1,
        }
        for r in shown
    ]  # fmt: skip
    return {
        "filter": f, "rows": table, "total": len(rows), "pages": pages, "page": min(f.page, pages),
        "sort_keys": SORT_KEYS, "states": STATE_CHOICES,
    }  # fmt: skip
