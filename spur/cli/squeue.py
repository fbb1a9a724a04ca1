"""``squeue`` / ``spur queue``: list jobs in Slurm's layouts."""

from __future__ import annotations

import os
import sys
import time

from spur.cli.client import CliError, with_controller
from spur.cli.formats import parse_format, render, render_header
from spur.cli.jobfields import SQUEUE_DEFAULT_FORMAT, SQUEUE_HEADERS, squeue_value
from spur.cli.slurmargs import SlurmArgParser, split_list

LONG_FORMAT = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
STATE_ORDER = {"COMPLETING": 0, "RUNNING": 1, "PENDING": 2}


def build_parser() -> SlurmArgParser:
    p = SlurmArgParser("squeue")
    p.add_argument("-h", "--noheader", action="store_true")
    p.add_argument("-o", "--format")
    p.add_argument("-j", "--jobs", action="append")
    p.add_argument("-u", "--user", action="append")
    p.add_argument("-t", "--states", action="append")
    p.add_argument("-p", "--partition", action="append")
    p.add_argument("--me", action="store_true")
    p.add_argument("-l", "--long", action="store_true")
    p.add_argument("-a", "--all", action="store_true")
    p.add_argument("-i", "--iterate", type=int)
    return p


def job_sort_key(job) -> tuple:
    """Slurm's default order: completing, running, pending; pending by priority; then job id."""
    return (STATE_ORDER.get(job.state, 3), -job.priority if job.state == "PENDING" else 0, job.job_id)


def format_jobs(jobs, fmt: str, *, header: bool, now: float) -> str:
    parts = parse_format(fmt)
    lines = [render_header(parts, SQUEUE_HEADERS)] if header else []
    for job in sorted(jobs, key=job_sort_key):
        lines.append(render(parts, lambda letter, j=job: squeue_value(j, letter, now)))
    return "".join(line + "\n" for line in lines)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from spur.rpc.proto import spur_pb2 as pb

    try:
        job_ids = [int(x) for x in split_list(args.jobs)]
    except ValueError:
        print(f"squeue: error: Invalid job id: {','.join(args.jobs)}", file=sys.stderr)
        return 1
    users = split_list(args.user)
    if args.me:
        from spur.auth.identity import current_identity

        users.append(current_identity().user)
    states = split_list(args.states)
    all_states = [s.upper() for s in states] == ["ALL"]
    default_states = not states and not job_ids
    req = pb.GetJobsRequest(
        job_ids=job_ids,
        users=users,
        partitions=split_list(args.partition),
        states=[] if all_states else states,
        include_finished=all_states,
    )

    async def body(stub):
        return await stub.GetJobs(req, timeout=30)

    try:
        resp = with_controller(body)
    except CliError as exc:
        print(f"squeue: error: {exc.message}", file=sys.stderr)
        return 1
    jobs = list(resp.jobs)
    if default_states:
        jobs = [j for j in jobs if j.state in ("PENDING", "RUNNING", "COMPLETING")]
    if job_ids and not jobs:
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
        return 1
    fmt = (
        args.format
        or os.environ.get("SQUEUE_FORMAT")
        or (LONG_FORMAT if args.long else SQUEUE_DEFAULT_FORMAT)
    )
    sys.stdout.write(format_jobs(jobs, fmt, header=not args.noheader, now=time.time()))
    return 0
