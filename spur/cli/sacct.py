"""``sacct`` / ``spur history``: accounting records of jobs and their steps, in Slurm's layouts.

Records come from PostgreSQL through the controller's AccountingDb service when ``[accounting]
database_url`` is set, else from its embedded history through ``GetJobs(include_finished=true)``.
Formatting is pure (:func:`build_rows`, :func:`render_table`); :func:`main` only fetches and prints.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from spur.cli.client import CliError, with_controller
from spur.cli.jobfields import (
    LONG_STATE,
    SHORT_STATE,
    TERMINAL_STATES,
    is_held,
    num_cpus,
    num_nodes,
    num_tasks,
)
from spur.cli.slurmargs import SlurmArgParser, split_list
from spur.core.array_rows import has_task
from spur.core.timespec import format_hms, format_timestamp

DEFAULT_FORMAT = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
BRIEF_FORMAT = "JobID,State,ExitCode"
LONG_FORMAT = (
    "JobID,JobIDRaw,JobName,Partition,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,MaxRSS,"
    "MaxRSSNode,MaxRSSTask,AveRSS,MaxPages,MaxPagesNode,MaxPagesTask,AvePages,MinCPU,MinCPUNode,"
    "MinCPUTask,AveCPU,NTasks,AllocCPUS,Elapsed,State,ExitCode,AveCPUFreq,ReqCPUFreqMin,ReqCPUFreqMax,"
    "ReqCPUFreqGov,ReqMem,ConsumedEnergy,MaxDiskRead,MaxDiskReadNode,MaxDiskReadTask,AveDiskRead,"
    "MaxDiskWrite,MaxDiskWriteNode,MaxDiskWriteTask,AveDiskWrite,ReqTRES,AllocTRES,TRESUsageInAve,"
    "TRESUsageInMax,TRESUsageInMaxNode,TRESUsageInMaxTask,TRESUsageInMin,TRESUsageInMinNode,"
    "TRESUsageInMinTask,TRESUsageInTot,TRESUsageOutMax,TRESUsageOutMaxNode,TRESUsageOutMaxTask,"
    "TRESUsageOutAve,TRESUsageOutTot"
)

# Slurm 22.05's sacct field table (name, width), in ``sacct -e`` order: positive widths
# right-justify, negative left-justify.
FIELDS: tuple[tuple[str, int], ...] = (
    ("Account", 10),
    ("AdminComment", 15),
    ("AllocCPUS", 10),
    ("AllocNodes", 10),
    ("AllocTRES", 10),
    ("AssocID", 7),
    ("AveCPU", 10),
    ("AveCPUFreq", 10),
    ("AveDiskRead", 14),
    ("AveDiskWrite", 14),
    ("AvePages", 10),
    ("AveRSS", 10),
    ("AveVMSize", 10),
    ("BlockID", 16),
    ("Cluster", 10),
    ("Comment", 14),
    ("Constraints", 19),
    ("ConsumedEnergy", 14),
    ("ConsumedEnergyRaw", 17),
    ("Container", 19),
    ("CPUTime", 10),
    ("CPUTimeRAW", 10),
    ("DBIndex", -10),
    ("DerivedExitCode", 15),
    ("Elapsed", 10),
    ("ElapsedRaw", 10),
    ("Eligible", 19),
    ("End", 19),
    ("ExitCode", 8),
    ("Flags", 19),
    ("GID", 6),
    ("Group", 9),
    ("JobID", -12),
    ("JobIDRaw", -12),
    ("JobName", 10),
    ("Layout", 9),
    ("MaxDiskRead", 12),
    ("MaxDiskReadNode", 15),
    ("MaxDiskReadTask", 15),
    ("MaxDiskWrite", 12),
    ("MaxDiskWriteNode", 16),
    ("MaxDiskWriteTask", 16),
    ("MaxPages", 8),
    ("MaxPagesNode", 12),
    ("MaxPagesTask", 14),
    ("MaxRSS", 10),
    ("MaxRSSNode", 10),
    ("MaxRSSTask", 10),
    ("MaxVMSize", 10),
    ("MaxVMSizeNode", 14),
    ("MaxVMSizeTask", 14),
    ("McsLabel", 12),
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
    ("QOSRAW", 6),
    ("Reason", 22),
    ("ReqCPUFreq", 10),
    ("ReqCPUFreqGov", 13),
    ("ReqCPUFreqMax", 13),
    ("ReqCPUFreqMin", 13),
    ("ReqCPUS", 8),
    ("ReqMem", 10),
    ("ReqNodes", 8),
    ("ReqTRES", 10),
    ("Reservation", 20),
    ("ReservationId", 8),
    ("Reserved", 10),
    ("ResvCPU", 10),
    ("ResvCPURAW", 10),
    ("Start", 19),
    ("State", 10),
    ("Submit", 19),
    ("SubmitLine", 20),
    ("Suspended", 10),
    ("SystemComment", 15),
    ("SystemCPU", 10),
    ("Timelimit", 10),
    ("TimelimitRaw", 10),
    ("TotalCPU", 10),
    ("TRESUsageInAve", 14),
    ("TRESUsageInMax", 14),
    ("TRESUsageInMaxNode", 18),
    ("TRESUsageInMaxTask", 18),
    ("TRESUsageInMin", 14),
    ("TRESUsageInMinNode", 18),
    ("TRESUsageInMinTask", 18),
    ("TRESUsageInTot", 14),
    ("TRESUsageOutAve", 15),
    ("TRESUsageOutMax", 15),
    ("TRESUsageOutMaxNode", 19),
    ("TRESUsageOutMaxTask", 19),
    ("TRESUsageOutMin", 15),
    ("TRESUsageOutMinNode", 19),
    ("TRESUsageOutMinTask", 19),
    ("TRESUsageOutTot", 15),
    ("UID", 6),
    ("User", 9),
    ("UserCPU", 10),
    ("WCKey", 10),
    ("WCKeyID", 10),
    ("WorkDir", 20),
)
# Numeric fields are never truncated with "+" (Slurm prints them with a plain width).
_NUMERIC = frozenset(
    "AllocCPUS AssocID ConsumedEnergyRaw CPUTimeRAW DBIndex ElapsedRaw GID MaxDiskReadTask MaxDiskWriteTask "
    "MaxPagesTask MaxRSSTask MaxVMSizeTask MinCPUTask NCPUS NNodes NTasks Priority QOSRAW ReqCPUS "
    "ReservationId ResvCPURAW UID WCKeyID".split()
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
                width = int(width_text)  # %0 is a column of no width (Slurm prints it empty)
            except ValueError:
                pass
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


def _requested_mem_mb(job) -> int:
    """The job's memory in MB: as asked (per node, or per CPU times its CPUs), else what its
    allocation holds (a job asking none gets its nodes' memory, as in Slurm), else 0."""
    spec = job.spec
    mem = spec.mem_per_node_mb or spec.mem_per_cpu_mb * num_cpus(job)
    if not mem and job.allocation:
        mem = sum(a.mem_mb for a in job.allocation)
    return mem


def _job_values(job, now: float, cluster: str) -> dict[str, str]:
    """The job line's values (the allocation), as Slurm 22.05's sacct shows them. Pure.

    Spur gathers no per-process accounting (like ``jobacct_gather/none``): usage, CPU-time and disk
    fields are blank or zero as Slurm prints them then.
    """
    spec = job.spec
    pending = job.state == "PENDING"
    elapsed = _elapsed(job.start_time, job.end_time, now, job.suspended_secs)
    requested = num_tasks(job) * max(1, spec.cpus_per_task)
    cpus = requested if pending else num_cpus(job)
    nodes = num_nodes(job)
    limit = "UNLIMITED" if job.time_limit_secs < 0 else format_hms(job.time_limit_secs)
    mem = _requested_mem_mb(job)
    eligible = 0.0 if is_held(job) else (job.eligible_time or job.submit_time)
    reserved = max(0, int((job.start_time or now) - eligible)) if eligible else 0
    req_nodes = max(1, spec.num_nodes)
    return {
        "Account": spec.account,
        "AllocCPUS": str(cpus),
        "NCPUS": str(cpus),
        "AllocNodes": "0" if pending else str(nodes),
        "NNodes": str(nodes),
        "AllocTRES": "" if pending else f"billing={cpus},cpu={cpus},node={nodes}",
        "AveCPUFreq": "",
        "Cluster": cluster,
        "Comment": spec.comment,
        "ConsumedEnergy": "0" if pending else "",
        "ConsumedEnergyRaw": "0" if pending else "",
        "Constraints": "&".join(spec.constraint),
        "CPUTime": format_hms(elapsed * cpus),
        "CPUTimeRAW": str(elapsed * cpus),
        "DerivedExitCode": "0:0",
        "Elapsed": format_hms(elapsed),
        "ElapsedRaw": str(elapsed),
        "Eligible": _date(job.eligible_time or job.submit_time),
        "End": _date(job.end_time),
        # As Slurm records it: a job cancelled while it ran ends 0:0 (its batch step shows the signal).
        "ExitCode": "0:0" if job.state == "CANCELLED" else f"{job.exit_code}:{job.signal}",
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
        "ReqCPUFreq": "Unknown",
        "ReqCPUFreqGov": "Unknown",
        "ReqCPUFreqMax": "Unknown",
        "ReqCPUFreqMin": "Unknown",
        "ReqCPUS": str(requested),
        "ReqMem": f"{mem}M" if mem else "0",
        "ReqNodes": str(req_nodes),
        "ReqTRES": f"billing={requested},cpu={requested}" + (f",mem={mem}M" if mem else "") + f",node={req_nodes}",
        "Reserved": format_hms(reserved),
        "ResvCPU": format_hms(reserved * requested),
        "ResvCPURAW": str(reserved * requested),
        "Start": _date(job.start_time),
        "State": state_text(job),
        "Submit": _date(job.submit_time),
        "SubmitLine": spec.submit_line,
        "Suspended": format_hms(job.suspended_secs),
        "SystemCPU": "00:00:00",
        "Timelimit": limit,
        "TimelimitRaw": "UNLIMITED" if job.time_limit_secs < 0 else str(job.time_limit_secs // 60),
        "TotalCPU": "00:00:00",
        "UID": str(job.uid),
        "User": job.user,
        "UserCPU": "00:00:00",
        "WCKey": spec.wckey,
        "WCKeyID": "0",
        "WorkDir": spec.work_dir,
    }


# What a step line leaves blank (or sets) of its job's values.
_STEP_BLANK = {
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
    "DerivedExitCode": "",
    "WorkDir": "",
    "SubmitLine": "",
    "ReqMem": "",
    "ReqTRES": "",
    "Reserved": "",
    "ResvCPU": "",
    "ResvCPURAW": "",
    "WCKeyID": "",
    "AveCPUFreq": "0",
    "ConsumedEnergy": "0",
    "ConsumedEnergyRaw": "0",
    "ReqCPUFreq": "0",
    "ReqCPUFreqGov": "0",
    "ReqCPUFreqMax": "0",
    "ReqCPUFreqMin": "0",
}


def _step_values(job, base: dict[str, str], suffix: str, name: str, **kw: str) -> dict[str, str]:
    """A step line: the job's values with the step's id, name, state, times, exit code."""
    values = dict(base)
    values.update(_STEP_BLANK)
    values.update(
        {
            "JobID": f"{base['JobID']}.{suffix}",
            "JobIDRaw": f"{job.job_id}.{suffix}",
            "JobName": name,
            "Submit": base["Start"],
            "Eligible": base["Start"],
            "Layout": "Block",
        }
    )
    values.update(kw)
    values["AllocTRES"] = f"cpu={values['AllocCPUS']},mem=0,node={values['NNodes']}"
    return values


def _batch_state_and_exit(job) -> tuple[str, str]:
    """The batch step's state and exit code as Slurm records them: a shell ended by a signal (its
    job cancelled or not) is a CANCELLED step with that signal. (For a job cancelled while it ran,
    Slurm 22.05 sometimes records ``FAILED 15:0`` instead, as slurmstepd's report races the kill.)"""
    if job.state == "CANCELLED":
        return "CANCELLED", f"{job.exit_code}:{job.signal}"
    if job.signal and job.state == "FAILED":
        return "CANCELLED", f"{job.exit_code}:{job.signal}"
    return job.state, f"{job.exit_code}:{job.signal}"


def step_records(job, base: dict[str, str], now: float) -> list[dict[str, str]]:
    """Step lines of ``job``: ``.batch`` for batch jobs, ``.0`` for a standalone srun job, JobInfo.steps."""
    if job.state == "PENDING" or not job.start_time:
        return []
    from spur.core.hostlist import compress

    spec = job.spec
    out: list[dict[str, str]] = []
    first = job.allocation[0] if job.allocation else None
    if not spec.interactive:
        cpus = str(first.cpus) if first else base["AllocCPUS"]
        state, exit_code = _batch_state_and_exit(job)
        out.append(
            _step_values(
                job,
                base,
                "batch",
                "batch",
                State=state,
                ExitCode=exit_code,
                AllocCPUS=cpus,
                NCPUS=cpus,
                NNodes="1",
                AllocNodes="1",
                NodeList=first.node if first else base["NodeList"],
                NTasks="1",
                Layout="Unknown",
            )
        )
    elif not spec.allocation_only:
        state, exit_code = _batch_state_and_exit(job)
        out.append(
            _step_values(job, base, "0", spec.name, State=state, ExitCode=exit_code, NTasks=str(num_tasks(job)))
        )
    for step in job.steps:
        elapsed = _elapsed(step.start_time, step.end_time, now)
        cpus = sum(a.cpus for a in step.allocation)
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


def in_state_window(job, states: set[str], start: float, end: float) -> bool:
    """Slurm's ``-s`` selection: the job was in one of ``states`` at some time in [start, end]. Pure.

    PENDING means eligible and waiting then (a held job never was); RUNNING, started and not yet
    ended then; an end state, ended in that state within the window; any other, in that state now.
    """
    for state in states:
        if state == "PENDING":
            eligible = 0.0 if is_held(job) else (job.eligible_time or job.submit_time)
            if eligible and eligible < end and (not job.start_time or job.start_time > start):
                return True
        elif state == "RUNNING":
            if job.start_time and job.start_time < end and (not job.end_time or job.end_time >= start):
                return True
        elif state in _END_STATES:
            if job.state == state and job.end_time and start <= job.end_time <= end:
                return True
        elif job.state == state:
            return True
    return False


# Slurm's end states: Spur's own, and those a Slurm state filter may name that Spur never records.
_END_STATES = TERMINAL_STATES | {"PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def build_rows(
    jobs,
    now: float,
    *,
    allocations_only: bool,
    selectors: Sequence[JobSelector] = (),
    cluster: str = "",
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
        base = _job_values(job, now, cluster)
        if not selectors or None in steps:
            rows.append(base)
            if not allocations_only:
                rows.extend(step_records(job, base, now))
        elif not allocations_only:
            rows.extend(r for r in step_records(job, base, now) if r["JobIDRaw"].rsplit(".", 1)[1] in steps)
    return rows


def _cell(col: Column, value: str) -> str:
    """A value in its column: one longer than the width ends in ``+`` (numbers are never cut)."""
    width = abs(col.width)
    if not width:
        return ""
    if len(value) > width and col.name not in _NUMERIC:
        value = value[: width - 1] + "+"
    return value.ljust(width) if col.width < 0 else value.rjust(width)


def _header_cell(col: Column, name: str) -> str:
    """A column's title: cut to the width without a ``+``, as Slurm's header is."""
    width = abs(col.width)
    name = name[:width]
    return name.ljust(width) if col.width < 0 else name.rjust(width)


def render_table(
    cols: list[Column],
    rows: list[dict[str, str]],
    *,
    header: bool,
    parsable: str | None = None,
    delimiter: str = "|",
) -> str:
    """Text as sacct prints it. ``parsable``: None (columns), "trailing" (-p) or "plain" (-P), with
    ``delimiter`` between the values (``--delimiter``)."""
    lines: list[str] = []

    def emit(values: list[str], cell: Callable[[Column, str], str]) -> None:
        if parsable == "plain":
            lines.append(delimiter.join(values))
        elif parsable == "trailing":
            lines.append("".join(v + delimiter for v in values))
        else:
            lines.append("".join(cell(c, v) + " " for c, v in zip(cols, values, strict=True)))

    if header:
        emit([c.name for c in cols], _header_cell)
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
    p.add_argument("--delimiter")
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
        if states and not in_state_window(job, states, start, end):
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


def fetch_body(
    args, *, selectors, states, start: float, end: float, users: set[str], want_cluster: bool = False
):
    """A ``with_controller`` body returning (JobInfo messages, cluster name): the jobs from PostgreSQL
    (through the controller's AccountingDb service) when a database is configured, else from the
    embedded history (GetJobs); the name only when ``want_cluster`` (else "")."""
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

    async def cluster_name(stub) -> str:
        if not want_cluster:
            return ""
        resp = await stub.GetControllers(pb.Empty(), timeout=30)
        return next((c.cluster_name for c in resp.controllers if c.cluster_name), "")

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
            return out, await cluster_name(stub)
        return list((await stub.GetJobs(req, timeout=30)).jobs), await cluster_name(stub)

    return body


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.helpformat:
        names = [f[0] for f in FIELDS]
        for i in range(0, len(names), 4):
            print(" ".join(n.ljust(19) for n in names[i : i + 4]))
        return 0
    now = time.time()
    try:
        selectors = parse_job_selectors(split_list(args.jobs))
        states = parse_state_list(split_list(args.state))
        if args.format:
            fmt = ",".join(args.format)
        elif os.environ.get("SACCT_FORMAT"):
            fmt = os.environ["SACCT_FORMAT"]
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
        found, cluster = with_controller(
            fetch_body(
                args,
                selectors=selectors,
                states=states,
                start=start,
                end=end,
                users=users,
                want_cluster=any(c.name == "Cluster" for c in cols),
            )
        )
    except CliError as exc:
        print(f"sacct: error: {exc.message}", file=sys.stderr)
        return 1
    jobs = select(found, args, selectors=selectors, states=states, start=start, end=end, users=users)
    rows = build_rows(jobs, now, allocations_only=args.allocations, selectors=selectors, cluster=cluster)
    parsable = "plain" if args.parsable2 else ("trailing" if args.parsable else None)
    text = render_table(cols, rows, header=not args.noheader, parsable=parsable, delimiter=args.delimiter or "|")
    sys.stdout.write(text)
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
    "delimiter": "ASCII characters used to separate the fields when -p or -P is given",
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
