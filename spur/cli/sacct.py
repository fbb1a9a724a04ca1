"""``sacct`` / ``spur history``: accounting records of jobs and their steps, in Slurm's layouts.

Records come from PostgreSQL through the controller's AccountingDb service when ``[accounting]
database_url`` is set, else from its embedded history through ``GetJobs(include_finished=true)``.
Formatting is pure (:func:`build_rows`, :func:`render_table`); :func:`main` only fetches and prints.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from spur.cli.client import CliError, with_controller
from spur.cli.jobfields import LONG_STATE, SHORT_STATE, has_task, num_cpus, num_nodes, num_tasks
from spur.cli.slurmargs import SlurmArgParser, split_list
from spur.core.timespec import format_hms, format_timestamp

DEFAULT_FORMAT = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
BRIEF_FORMAT = "JobID,State,ExitCode"
LONG_FORMAT = (
    "JobID,JobIDRaw,JobName,Partition,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,MaxRSS,"
    "MaxRSSNode,MaxRSSTask,AveRSS,MaxPages,MaxPagesNode,MaxPagesTask,AvePages,MinCPU,MinCPUNode,"
    "MinCPUTask,AveCPU,NTasks,AllocCPUS,Elapsed,State,ExitCode"
)

# Slurm's sacct field table (name, width): positive widths right-justify, negative left-justify.
FIELDS: tuple[tuple[str, int], ...] = (
    ("Account", 10),
    ("AdminComment", 15),
    ("AllocCPUS", 10),
    ("AllocNodes", 10),
    ("AllocTRES", 10),
    ("AssocID", 7),
    ("AveCPU", 10),
    ("AvePages", 10),
    ("AveRSS", 10),
    ("AveVMSize", 10),
    ("Cluster", 10),
    ("Comment", 14),
    ("Constraints", 19),
    ("CPUTime", 10),
    ("CPUTimeRAW", 10),
    ("DerivedExitCode", 15),
    ("Elapsed", 10),
    ("ElapsedRaw", 10),
    ("Eligible", 19),
    ("End", 19),
    ("ExitCode", 8),
    ("GID", 6),
    ("Group", 9),
    ("JobID", -12),
    ("JobIDRaw", -12),
    ("JobName", 10),
    ("MaxPages", 8),
    ("MaxPagesNode", 12),
    ("MaxPagesTask", 14),
    ("MaxRSS", 10),
    ("MaxRSSNode", 10),
    ("MaxRSSTask", 10),
    ("MaxVMSize", 10),
    ("MaxVMSizeNode", 14),
    ("MaxVMSizeTask", 14),
    ("MinCPU", 10),
    ("MinCPUNode", 10),
    ("MinCPUTask", 10),
    ("NCPUS", 10),
    ("NNodes", 8),
    ("NodeList", 15),
    ("NTasks", 8),
    ("Partition", 10),
    ("Priority", 10),
    ("QOS", 10),
    ("Reason", 22),
    ("ReqCPUS", 8),
    ("ReqMem", 10),
    ("ReqNodes", 8),
    ("ReqTRES", 10),
    ("Reservation", 20),
    ("Restarts", 8),
    ("Start", 19),
    ("State", 10),
    ("StdErr", 20),
    ("StdIn", 20),
    ("StdOut", 20),
    ("Submit", 19),
    ("SubmitLine", 20),
    ("Suspended", 10),
    ("Timelimit", 10),
    ("TimelimitRaw", 10),
    ("UID", 6),
    ("User", 9),
    ("WCKey", 10),
    ("WorkDir", 20),
)
# Numeric fields are never truncated with "+" (Slurm prints them with a plain width).
_NUMERIC = frozenset(
    "AllocCPUS AssocID CPUTimeRAW ElapsedRaw GID NCPUS NNodes NTasks Priority ReqCPUS Restarts UID".split()
)

SACCT_STATES = {
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
    "REQUEUED",
    "RESIZING",
}


class SacctError(ValueError):
    """A bad sacct argument; the message is the line Slurm prints."""


@dataclass(frozen=True)
class Column:
    name: str
    width: int  # Slurm's signed width: < 0 left-justified


def parse_columns(fmt: str) -> list[Column]:
    """``JobID,JobName%30,state`` -> columns; names are case-insensitive, ``%N`` sets the width."""
    cols: list[Column] = []
    for item in fmt.split(","):
        item = item.strip()
        if not item:
            continue
        name, pct, width_text = item.partition("%")
        match = next((f for f in FIELDS if f[0].lower() == name.lower()), None)
        if match is None:
            match = next((f for f in FIELDS if name and f[0].lower().startswith(name.lower())), None)
        if match is None:
            raise SacctError(f'Invalid field requested: "{name}"')
        width = match[1]
        if pct:
            try:
                new = int(width_text)
            except ValueError:
                new = 0
            if new:
                width = new
        cols.append(Column(match[0], width))
    return cols


class JobSelector(NamedTuple):
    """One ``-j`` item: a job (or a whole array), an array task, and optionally one step of it."""

    job_id: int
    task: int | None = None
    step: str | None = None  # None: the job with all its steps; else "batch", "extern", "3", ...

    def matches(self, job) -> bool:
        """Whether ``job`` (a JobInfo) is this selector's job: by id, or as a task of its array."""
        if self.task is None:
            return job.job_id == self.job_id or job.array_job_id == self.job_id
        return job.array_job_id == self.job_id and has_task(job) and job.array_task_id == self.task


NAMED_STEPS = ("batch", "extern", "interactive")


def parse_job_selectors(values: Sequence[str]) -> list[JobSelector]:
    """-j values: ``123``, ``123_4``, ``123.batch``, ``123.extern``, ``123_4.0`` -> selectors."""
    out: list[JobSelector] = []
    for text in values:
        head, dot, step = text.partition(".")
        base, sep, task = head.partition("_")
        if not base.isdigit() or (sep and not task.isdigit()):
            raise SacctError(f"sacct: fatal: Bad job/step specified: {text}")
        if dot and step not in NAMED_STEPS and not step.isdigit():
            raise SacctError(f"sacct: fatal: Bad job/step specified: {text}")
        out.append(
            JobSelector(
                int(base),
                int(task) if sep else None,
                (step if not step.isdigit() else str(int(step))) if dot else None,
            )
        )
    return out


def parse_state_list(values: Sequence[str]) -> set[str]:
    out: set[str] = set()
    for v in values:
        up = v.upper()
        name = LONG_STATE.get(up, up)
        if name not in SACCT_STATES:
            raise SacctError("sacct: fatal: unrecognized job state value")
        out.add(name)
    return out


def parse_time_option(text: str, now: float) -> float:
    """-S/-E values as Slurm's parse_time(..., past=1) reads them."""
    from spur.core.timespec import TimeSpecError, parse_begin_time

    try:
        return parse_begin_time(text, now, past=True)
    except TimeSpecError:
        raise SacctError(
            f"sacct: error: Invalid time specification (valid formats: see man sacct): {text}"
        ) from None


def through_end_of_second(end: float) -> float:
    """The -E bound as Slurm applies it: its times are whole seconds, so ``-E now`` (or ``-E 12:00:00``)
    takes in everything up to the end of that second. Ours carry fractions: a job submitted at
    ``12:00:00.4`` is selected by ``-E 12:00:00`` as Slurm would select it."""
    return math.floor(end) + 1 - 1e-6


def midnight(now: float) -> float:
    dt = datetime.fromtimestamp(now)
    return dt.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def job_id_text(job) -> str:
    if has_task(job):
        return f"{job.array_job_id}_{job.array_task_id}"
    return str(job.job_id)


def state_text(job) -> str:
    if job.state == "CANCELLED":
        return f"CANCELLED by {job.uid}"
    return job.state


def _elapsed(start: float, end: float, now: float, suspended: float = 0.0) -> int:
    if not start:
        return 0
    return max(0, int((end or now) - start - suspended))


def _date(ts: float) -> str:
    return format_timestamp(ts) if ts else "Unknown"


def _job_values(job, now: float) -> dict[str, str]:
    spec = job.spec
    pending = job.state == "PENDING"
    elapsed = _elapsed(job.start_time, job.end_time, now, job.suspended_secs)
    cpus = 0 if pending else num_cpus(job)
    limit = "UNLIMITED" if job.time_limit_secs < 0 else format_hms(job.time_limit_secs)
    return {
        "Account": spec.account,
        "AllocCPUS": str(cpus),
        "NCPUS": str(cpus),
        "AllocNodes": "0" if pending else str(num_nodes(job)),
        "NNodes": str(num_nodes(job)),
        "AllocTRES": "" if pending else f"billing={cpus},cpu={cpus},node={num_nodes(job)}",
        "Cluster": "spur",
        "Comment": spec.comment,
        "Constraints": "&".join(spec.constraint),
        "CPUTime": format_hms(elapsed * cpus),
        "CPUTimeRAW": str(elapsed * cpus),
        "DerivedExitCode": "0:0",
        "Elapsed": format_hms(elapsed),
        "ElapsedRaw": str(elapsed),
        "Eligible": _date(job.eligible_time or job.submit_time),
        "End": _date(job.end_time),
        "ExitCode": f"{job.exit_code}:{job.signal}",
        "GID": str(job.gid),
        "Group": job.group,
        "JobID": job_id_text(job),
        "JobIDRaw": str(job.job_id),
        "JobName": spec.name,
        "NodeList": job.nodelist or "None assigned",
        "NTasks": "",
        "Partition": job.partition,
        "Priority": str(job.priority),
        "QOS": spec.qos or "normal",
        "Reason": job.reason or "None",
        "ReqCPUS": str(num_tasks(job) * max(1, spec.cpus_per_task)),
        "ReqMem": f"{spec.mem_per_node_mb}M" if spec.mem_per_node_mb else "0",
        "ReqNodes": str(max(1, spec.num_nodes)),
        "ReqTRES": f"billing={num_cpus(job)},cpu={num_cpus(job)},node={max(1, spec.num_nodes)}",
        "Restarts": str(job.restarts),
        "Start": _date(job.start_time),
        "State": state_text(job),
        "Submit": _date(job.submit_time),
        "Suspended": format_hms(job.suspended_secs),
        "Timelimit": limit,
        "TimelimitRaw": "UNLIMITED" if job.time_limit_secs < 0 else str(job.time_limit_secs // 60),
        "UID": str(job.uid),
        "User": job.user,
        "WCKey": spec.wckey,
        "WorkDir": spec.work_dir,
    }


def _step_values(job, base: dict[str, str], suffix: str, name: str, **kw) -> dict[str, str]:
    """A step line: the job's values with the step's id, name, state, times, exit code."""
    values = dict(base)
    values.update(
        {
            "JobID": f"{base['JobID']}.{suffix}",
            "JobIDRaw": f"{job.job_id}.{suffix}",
            "JobName": name,
            "Partition": "",
            "User": "",
            "UID": "",
            "Group": "",
            "GID": "",
            "Timelimit": "",
            "TimelimitRaw": "",
            "Priority": "",
            "QOS": "",
            "Reason": "",
            "Submit": base["Start"],
            "Eligible": base["Start"],
        }
    )
    values.update(kw)
    return values


def _batch_state(job) -> str:
    return "CANCELLED" if job.state == "CANCELLED" else job.state


def step_records(job, base: dict[str, str], now: float) -> list[dict[str, str]]:
    """Step lines of ``job``: ``.batch`` for batch jobs, ``.0`` for a standalone srun job, JobInfo.steps."""
    if job.state == "PENDING" or not job.start_time:
        return []
    spec = job.spec
    out: list[dict[str, str]] = []
    first = job.allocation[0] if job.allocation else None
    if not spec.interactive:
        cpus = str(first.cpus) if first else base["AllocCPUS"]
        out.append(
            _step_values(
                job,
                base,
                "batch",
                "batch",
                State=_batch_state(job),
                AllocCPUS=cpus,
                NCPUS=cpus,
                NNodes="1",
                AllocNodes="1",
                NodeList=first.node if first else base["NodeList"],
                NTasks="1",
            )
        )
    elif not spec.allocation_only:
        out.append(
            _step_values(job, base, "0", spec.name, State=_batch_state(job), NTasks=str(num_tasks(job)))
        )
    for step in job.steps:
        elapsed = _elapsed(step.start_time, step.end_time, now)
        cpus = sum(a.cpus for a in step.allocation)
        from spur.core.hostlist import compress

        out.append(
            _step_values(
                job,
                base,
                str(step.step_id),
                step.spec.name or (step.spec.argv[0].rsplit("/", 1)[-1] if step.spec.argv else ""),
                State=step.state,
                ExitCode=f"{step.exit_code}:{step.signal}",
                Start=_date(step.start_time),
                End=_date(step.end_time),
                Submit=_date(step.start_time),
                Eligible=_date(step.start_time),
                Elapsed=format_hms(elapsed),
                ElapsedRaw=str(elapsed),
                AllocCPUS=str(cpus),
                NCPUS=str(cpus),
                CPUTime=format_hms(elapsed * cpus),
                CPUTimeRAW=str(elapsed * cpus),
                NNodes=str(len(step.allocation)),
                AllocNodes=str(len(step.allocation)),
                NodeList=compress([a.node for a in step.allocation]) if step.allocation else "",
                NTasks=str(sum(a.tasks for a in step.allocation)),
            )
        )
    return out


def in_window(job, start: float, end: float) -> bool:
    """Slurm's selection: the job existed (was eligible or ran) at some time in [start, end]."""
    begun = job.submit_time or job.start_time
    if begun and begun > end:
        return False
    finished = job.end_time
    return not (finished and finished < start)


def build_rows(
    jobs, now: float, *, allocations_only: bool, selectors: Sequence[JobSelector] = ()
) -> list[dict[str, str]]:
    """Job lines (sorted by job id) each followed by its step lines unless ``allocations_only``.

    With ``selectors`` only the jobs they name are shown. As in Slurm, a job picked only by ``-j ID.STEP`` selectors shows just those steps' lines (no job
    line, and nothing with ``-X``); one picked by a plain ``-j ID`` as well shows everything.
    """
    rows: list[dict[str, str]] = []
    for job in sorted(jobs, key=lambda j: j.job_id):
        picked = [s for s in selectors if s.matches(job)]
        if selectors and not picked:
            continue
        steps = {s.step for s in picked}
        base = _job_values(job, now)
        if not selectors or None in steps:
            rows.append(base)
            if not allocations_only:
                rows.extend(step_records(job, base, now))
        elif not allocations_only:
            rows.extend(r for r in step_records(job, base, now) if r["JobIDRaw"].rsplit(".", 1)[1] in steps)
    return rows


def _cell(col: Column, value: str) -> str:
    width = abs(col.width)
    if len(value) > width and col.name not in _NUMERIC:
        value = value[: width - 1] + "+"
    return value.ljust(width) if col.width < 0 else value.rjust(width)


def render_table(
    cols: list[Column], rows: list[dict[str, str]], *, header: bool, parsable: str | None = None
) -> str:
    """Text as sacct prints it. ``parsable``: None (columns), "trailing" (-p) or "plain" (-P)."""
    lines: list[str] = []

    def emit(values: list[str], cell: Callable[[Column, str], str]) -> None:
        if parsable == "plain":
            lines.append("|".join(values))
        elif parsable == "trailing":
            lines.append("".join(v + "|" for v in values))
        else:
            lines.append("".join(cell(c, v) + " " for c, v in zip(cols, values, strict=True)))

    if header:
        emit([c.name for c in cols], _cell)
        if parsable is None:
            lines.append("".join("-" * abs(c.width) + " " for c in cols))
    for row in rows:
        emit([row.get(c.name, "") for c in cols], _cell)
    return "".join(line + "\n" for line in lines)


def build_parser() -> SlurmArgParser:
    p = SlurmArgParser("sacct")
    p.add_argument("-j", "--jobs", action="append")
    p.add_argument("-u", "--user", "--uid", dest="user", action="append")
    p.add_argument("-a", "--allusers", action="store_true")
    p.add_argument("-S", "--starttime")
    p.add_argument("-E", "--endtime")
    p.add_argument("-s", "--state", action="append")
    p.add_argument("-X", "--allocations", action="store_true")
    p.add_argument("-n", "--noheader", action="store_true")
    p.add_argument("-P", "--parsable2", action="store_true")
    p.add_argument("-p", "--parsable", action="store_true")
    p.add_argument("-o", "--format", action="append")
    p.add_argument("-b", "--brief", action="store_true")
    p.add_argument("-l", "--long", action="store_true")
    p.add_argument("-r", "--partition", action="append")
    p.add_argument("-A", "--accounts", action="append")
    p.add_argument("--name", action="append")
    p.add_argument("-N", "--nodelist")
    p.add_argument("-e", "--helpformat", action="store_true")
    p.add_argument("-D", "--duplicates", action="store_true")
    p.add_argument("-L", "--allclusters", action="store_true")
    p.add_argument("-M", "--clusters")
    p.add_argument("--noconvert", action="store_true")
    p.add_argument("-v", "--verbose", action="count")
    return p


def select(jobs, args, *, selectors, states, start: float, end: float, users: set[str]) -> list:
    out = []
    names = set(split_list(args.name))
    accounts = set(split_list(args.accounts))
    partitions = set(split_list(args.partition))
    for job in jobs:
        if selectors and not any(s.matches(job) for s in selectors):
            continue
        if users and job.user not in users:
            continue
        if states and job.state not in states:
            continue
        if names and job.spec.name not in names:
            continue
        if accounts and job.spec.account not in accounts:
            continue
        if partitions and job.partition not in partitions:
            continue
        if not in_window(job, start, end):
            continue
        out.append(job)
    return out


def fetch_body(args, *, selectors, states, start: float, end: float, users: set[str]):
    """A ``with_controller`` body returning JobInfo messages: from PostgreSQL (through the controller's
    AccountingDb service) when a database is configured, else from the embedded history (GetJobs)."""
    from spur.cli.acctdb_client import acctdb_stub, no_database
    from spur.rpc.proto import accounting_db_pb2 as apb
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError

    db_req = apb.JobRecordsRequest(
        start_time=start,
        end_time=end,
        users=sorted(users),
        accounts=sorted(set(split_list(args.accounts))),
        partitions=sorted(set(split_list(args.partition))),
        names=sorted(set(split_list(args.name))),
        states=sorted(states),
        jobs=[
            apb.JobSelector(job_id=s.job_id, has_task=s.task is not None, array_task_id=s.task or 0)
            for s in selectors
        ],
    )
    req = pb.GetJobsRequest(job_ids=sorted({s.job_id for s in selectors}), include_finished=True)

    async def body(stub):
        try:
            resp = await acctdb_stub(stub).GetJobRecords(db_req, timeout=30)
        except RpcError as exc:
            if not no_database(exc):
                raise
        else:
            out = []
            for data in resp.jobs:
                job = pb.JobInfo()
                job.ParseFromString(data)
                out.append(job)
            return out
        return list((await stub.GetJobs(req, timeout=30)).jobs)

    return body


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.helpformat:
        names = [f[0] for f in FIELDS]
        for i in range(0, len(names), 4):
            print("".join(n.ljust(20) for n in names[i : i + 4]).rstrip())
        return 0
    now = time.time()
    try:
        selectors = parse_job_selectors(split_list(args.jobs))
        states = parse_state_list(split_list(args.state))
        if args.format:
            fmt = ",".join(args.format)
        elif args.brief:
            fmt = BRIEF_FORMAT
        elif args.long:
            fmt = LONG_FORMAT
        else:
            fmt = DEFAULT_FORMAT
        cols = parse_columns(fmt)
        if args.starttime:
            start = parse_time_option(args.starttime, now)
        elif selectors:
            start = 0.0
        elif states:
            start = now
        else:
            start = midnight(now)
        end = through_end_of_second(parse_time_option(args.endtime, now) if args.endtime else now)
    except SacctError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    users = set(split_list(args.user))
    if not users and not args.allusers and not selectors:
        from spur.auth.identity import current_identity

        ident = current_identity()
        if ident.uid != 0:
            users = {ident.user}
    try:
        found = with_controller(
            fetch_body(args, selectors=selectors, states=states, start=start, end=end, users=users)
        )
    except CliError as exc:
        print(f"sacct: error: {exc.message}", file=sys.stderr)
        return 1
    jobs = select(found, args, selectors=selectors, states=states, start=start, end=end, users=users)
    rows = build_rows(jobs, now, allocations_only=args.allocations, selectors=selectors)
    parsable = "plain" if args.parsable2 else ("trailing" if args.parsable else None)
    sys.stdout.write(render_table(cols, rows, header=not args.noheader, parsable=parsable))
    return 0


__all__ = [
    "DEFAULT_FORMAT",
    "FIELDS",
    "Column",
    "JobSelector",
    "SacctError",
    "build_rows",
    "main",
    "parse_columns",
    "parse_job_selectors",
    "parse_state_list",
    "render_table",
    "SHORT_STATE",
]


# ---- documentation hooks (see spur.cli.main): --help, man page and completion read these.
USAGE = "Usage: sacct [OPTIONS...]"
OPTION_HELP = {
    "jobs": "display information about this job or comma-separated list of jobs",
    "user": "use this comma-separated list of user names or uids to select jobs",
    "allusers": "display jobs for all users",
    "starttime": "select jobs eligible after this time (default: 00:00:00 today)",
    "endtime": "select jobs eligible before this time",
    "state": "select jobs based on their state during the time period given",
    "allocations": "only show statistics relevant to the job allocation itself",
    "noheader": "no header will be added to the beginning of output",
    "parsable2": "output will be '|' delimited without a '|' at the end",
    "parsable": "output will be '|' delimited with a '|' at the end",
    "format": "comma separated list of fields (use --helpformat for a list)",
    "brief": "equivalent to '--format=jobstep,state,error'",
    "long": "equivalent to specifying a long list of fields",
    "partition": "comma separated list of partitions to select jobs from",
    "accounts": "use this comma separated list of accounts to select jobs",
    "name": "display jobs that have any of these name(s)",
    "nodelist": "display jobs that ran on any of these node(s)",
    "helpformat": "print a list of fields that can be specified with --format",
    "duplicates": "if jobs were requeued, show every run (all records)",
    "allclusters": "display jobs ran on all clusters",
    "clusters": "comma separated list of clusters to select jobs from",
    "noconvert": "don't convert units from their original type",
    "verbose": "primarily for debugging purposes",
}
