"""Job: its spec, state timeline, nodes, live output and (owner or admin) actions."""

from __future__ import annotations

import time
from typing import Any

from google.protobuf.json_format import MessageToDict

from spur.rest.errors import ESLURM_INVALID_JOB_ID, RestError
from spur.rpc.proto import spur_pb2 as pb
from spur.ui.context import ViewContext
from spur.ui.queue import QueueJob, Row
from spur.ui.reasons import explain_reason

TEMPLATE = "job.html"
ACTIONS = ("cancel", "hold", "release", "requeue")


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else ""


def timeline(job: pb.JobInfo) -> list[dict[str, str]]:
    """Submitted, eligible, started, ended (those that happened), with the reason where it says why."""
    steps = [("Submitted", job.submit_time, "")]
    if job.eligible_time:
        steps.append(("Eligible", job.eligible_time, ""))
    if job.start_time:
        steps.append(("Started", job.start_time, f"on {job.nodelist}" if job.nodelist else ""))
    if job.end_time:
        detail = f"{job.state}, exit code {job.exit_code}" + (f", signal {job.signal}" if job.signal else "")
        steps.append(("Ended", job.end_time, detail))
    out = [{"what": what, "when": _when(ts), "detail": detail} for what, ts, detail in steps if ts]
    if job.state == "PENDING":
        out.append({"what": "Waiting", "when": "", "detail": explain_reason(job.reason) or job.reason})
    return out


def spec_fields(job: pb.JobInfo) -> list[tuple[str, str]]:
    """The job's spec as (field, value) pairs, set fields only, the script and environment left out."""
    data = MessageToDict(job.spec, preserving_proto_field_name=True)
    data.pop("script", None)
    data.pop("environment", None)
    return [(k, ", ".join(map(str, v)) if isinstance(v, list) else str(v)) for k, v in sorted(data.items())]


async def load(ctx: ViewContext, job_id: int) -> dict[str, Any]:
    resp = await ctx.call("GetJobs", pb.GetJobsRequest(job_ids=[job_id], include_finished=True))
    jobs = sorted(resp.jobs, key=lambda j: j.job_id)
    if not jobs:
        raise RestError(404, ESLURM_INVALID_JOB_ID, f"Unable to find JobId={job_id}", "ui_job")
    job = next((j for j in jobs if j.job_id == job_id), jobs[0])
    tasks = [{"id": Row(QueueJob.from_info(j), None).id_text, "job_id": j.job_id, "state": j.state} for j in jobs] if len(jobs) > 1 else []
    s = ctx.session
    return {
        "job": job, "title": Row(QueueJob.from_info(job), None).id_text, "timeline": timeline(job), "spec": spec_fields(job),
        "tasks": tasks, "allocation": [{"node": a.node, "cpus": a.cpus, "mem": a.mem_mb, "gpus": len(a.gpus)} for a in job.allocation],
        "can_act": s.admin or s.uid == job.uid, "actions": ACTIONS,
        "can_watch": (s.admin or s.uid == job.uid) and len(jobs) == 1,
    }  # fmt: skip
