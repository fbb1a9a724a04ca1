"""Values of a job as Slurm's tools print them (squeue letters, scontrol keys). Pure."""

from __future__ import annotations

import time

from spur.core.timespec import format_elapsed, format_hms, format_time_limit, format_timestamp

SHORT_STATE = {
    "PENDING": "PD",
    "RUNNING": "R",
    "COMPLETING": "CG",
    "COMPLETED": "CD",
    "FAILED": "F",
    "CANCELLED": "CA",
    "TIMEOUT": "TO",
    "NODE_FAIL": "NF",
}

SQUEUE_DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"

SQUEUE_HEADERS = {
    "i": "JOBID",
    "A": "JOBID",
    "j": "NAME",
    "u": "USER",
    "t": "ST",
    "T": "STATE",
    "M": "TIME",
    "l": "TIME_LIMIT",
    "D": "NODES",
    "R": "NODELIST(REASON)",
    "P": "PARTITION",
    "N": "NODELIST",
    "C": "CPUS",
    "b": "TRES_PER_NODE",
    "a": "ACCOUNT",
    "r": "REASON",
    "S": "START_TIME",
    "V": "SUBMIT_TIME",
    "e": "END_TIME",
    "Q": "PRIORITY",
    "F": "ARRAY_JOB_ID",
    "K": "ARRAY_TASK_ID",
    "o": "COMMAND",
    "Z": "WORK_DIR",
    "U": "UID",
    "G": "GID",
    "g": "GROUP",
    "L": "TIME_LEFT",
    "m": "MIN_MEMORY",
    "c": "MIN_CPUS",
    "q": "QOS",
    "y": "NICE",
    "k": "COMMENT",
}


def run_seconds(job, now: float | None = None) -> int:
    """Elapsed run time: 0 while pending, up to end_time once finished."""
    if not job.start_time:
        return 0
    end = job.end_time if job.end_time else (now if now is not None else time.time())
    return max(0, int(end - job.start_time))


def num_cpus(job) -> int:
    if job.allocation:
        return sum(a.cpus for a in job.allocation)
    spec = job.spec
    return max(1, spec.num_tasks or spec.num_nodes) * max(1, spec.cpus_per_task)


def num_nodes(job) -> int:
    return len(job.allocation) if job.allocation else max(1, job.spec.num_nodes)


def command_of(job) -> str:
    if job.spec.interactive:
        return " ".join(job.spec.argv)
    return job.spec.command or "(null)"


def squeue_value(job, letter: str, now: float) -> str:
    """The text squeue prints for %<letter> of ``job``."""
    pending = job.state == "PENDING"
    spec = job.spec
    match letter:
        case "i" | "A":
            return str(job.job_id)
        case "j":
            return spec.name
        case "u":
            return job.user
        case "U":
            return str(job.uid)
        case "G":
            return str(job.gid)
        case "g":
            return job.group
        case "t":
            return SHORT_STATE.get(job.state, job.state)
        case "T":
            return job.state
        case "M":
            return format_elapsed(run_seconds(job, now))
        case "l":
            return format_time_limit(job.time_limit_secs)
        case "L":
            if job.time_limit_secs < 0:
                return "UNLIMITED"
            return format_elapsed(max(0, job.time_limit_secs - run_seconds(job, now)))
        case "D":
            return str(num_nodes(job))
        case "R":
            return f"({job.reason})" if pending or not job.nodelist else job.nodelist
        case "r":
            return job.reason
        case "P":
            return job.partition
        case "N":
            return job.nodelist
        case "C" | "c":
            return str(num_cpus(job) if letter == "C" else max(1, spec.cpus_per_task))
        case "b":
            return ",".join(f"gres:{g}" for g in spec.gres) or "N/A"
        case "a":
            return spec.account or "(null)"
        case "q":
            return "normal"
        case "S":
            return format_timestamp(job.start_time) if job.start_time else "N/A"
        case "V":
            return format_timestamp(job.submit_time)
        case "e":
            return format_timestamp(job.end_time) if job.end_time else "N/A"
        case "Q":
            return str(job.priority)
        case "F":
            return str(job.job_id)
        case "K":
            return "N/A"
        case "o":
            return command_of(job)
        case "Z":
            return spec.work_dir
        case "m":
            return f"{spec.mem_per_node_mb}M" if spec.mem_per_node_mb else "0"
        case "y":
            return str(spec.nice)
        case "k":
            return spec.comment or "(null)"
    return ""


def exit_code_text(job) -> str:
    return f"{job.exit_code}:{job.signal}"


def scontrol_job(job, now: float) -> str:
    """``scontrol show job`` layout (Slurm's key=value lines, three-space indent)."""
    spec = job.spec
    ts = format_timestamp
    start = ts(job.start_time) if job.start_time else "Unknown"
    if job.end_time:
        end = ts(job.end_time)
    elif job.start_time and job.time_limit_secs >= 0:
        end = ts(job.start_time + job.time_limit_secs)
    else:
        end = "Unknown"
    tres = f"cpu={num_cpus(job)},node={num_nodes(job)}"
    if spec.mem_per_node_mb:
        tres = f"cpu={num_cpus(job)},mem={spec.mem_per_node_mb}M,node={num_nodes(job)}"
    stdout = spec.stdout_pattern or ("" if spec.interactive else f"{spec.work_dir}/spur-{job.job_id}.out")
    lines = [
        f"JobId={job.job_id} JobName={spec.name}",
        f"   UserId={job.user}({job.uid}) GroupId={job.group}({job.gid}) MCS_label=N/A",
        f"   Priority={job.priority} Nice={spec.nice} Account={spec.account or '(null)'} QOS=(null)",
        f"   JobState={job.state} Reason={job.reason} Dependency=(null)",
        f"   Requeue=1 Restarts={0} BatchFlag={0 if spec.interactive else 1} Reboot=0 ExitCode={exit_code_text(job)}",
        f"   RunTime={format_hms(run_seconds(job, now))} TimeLimit={format_time_limit_long(job.time_limit_secs)} TimeMin=N/A",
        f"   SubmitTime={ts(job.submit_time)} EligibleTime={ts(job.submit_time)}",
        f"   AccrueTime={ts(job.submit_time)}",
        f"   StartTime={start} EndTime={end} Deadline=N/A",
        f"   Partition={job.partition} AllocNode:Sid=localhost:0",
        f"   ReqNodeList={','.join(spec.nodelist) or '(null)'} ExcNodeList={','.join(spec.exclude) or '(null)'}",
        f"   NodeList={job.nodelist}",
        f"   NumNodes={num_nodes(job)} NumCPUs={num_cpus(job)} NumTasks={spec.num_tasks or spec.num_nodes} "
        f"CPUs/Task={spec.cpus_per_task} ReqB:S:C:T=0:0:*:*",
        f"   TRES={tres}",
        f"   MinCPUsNode={spec.cpus_per_task} MinMemoryNode={spec.mem_per_node_mb}M MinTmpDiskNode=0"
        if spec.mem_per_node_mb
        else f"   MinCPUsNode={spec.cpus_per_task} MinMemoryNode=0 MinTmpDiskNode=0",
        f"   Features={','.join(spec.constraint) or '(null)'} DelayBoot=00:00:00",
        f"   OverSubscribe={'NO' if spec.exclusive else 'OK'} Contiguous=0 Licenses=(null) Network=(null)",
        f"   Command={command_of(job)}",
        f"   WorkDir={spec.work_dir}",
    ]
    if not spec.interactive:
        lines += [
            f"   StdErr={spec.stderr_pattern or stdout}",
            f"   StdIn={spec.stdin_path or '/dev/null'}",
            f"   StdOut={stdout}",
        ]
    if spec.gres:
        lines.append(f"   TresPerNode={','.join('gres:' + g for g in spec.gres)}")
    return "\n".join(lines) + "\n   \n"


def format_time_limit_long(secs: int) -> str:
    """scontrol's TimeLimit: D-HH:MM:SS (or HH:MM:SS), UNLIMITED."""
    return "UNLIMITED" if secs < 0 else format_hms(secs)
