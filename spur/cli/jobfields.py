"""Values of a job as Slurm's tools print them (squeue letters and long names, scontrol keys). Pure.

Every function takes a ``spur_pb2.JobInfo`` (or anything with the same attributes) and the current
time, and returns text exactly as Slurm 22.05 prints it. Array tasks show as ``<array_job_id>_<task>``;
a pending array group (see :mod:`spur.core.array_rows`) shows as ``<array_job_id>_[<ranges>[%<limit>]]``.
"""

from __future__ import annotations

import time

from spur.core.array_rows import ArrayGroup, array_task_text, has_task
from spur.core.timespec import format_elapsed, format_hms, format_time_limit, format_timestamp

SHORT_STATE = {
    "PENDING": "PD",
    "RUNNING": "R",
    "SUSPENDED": "S",
    "COMPLETING": "CG",
    "COMPLETED": "CD",
    "FAILED": "F",
    "CANCELLED": "CA",
    "TIMEOUT": "TO",
    "NODE_FAIL": "NF",
    "REQUEUED": "RQ",
    "PREEMPTED": "PR",
    "BOOT_FAIL": "BF",
    "DEADLINE": "DL",
    "OUT_OF_MEMORY": "OOM",
    # Slurm's state flags: Spur's jobs never show them, but squeue -t takes them as Slurm does.
    "CONFIGURING": "CF",
    "RESIZING": "RS",
    "REQUEUE_FED": "RF",
    "REQUEUE_HOLD": "RH",
    "SPECIAL_EXIT": "SE",
    "STOPPED": "ST",
    "SIGNALING": "SI",
    "STAGE_OUT": "SO",
    "RESV_DEL_HOLD": "RD",
    "REVOKED": "RV",
}
LONG_STATE = {short: long for long, short in SHORT_STATE.items()}

# Slurm's enum job_states order (squeue sorts "t" by it); COMPLETING is a flag there, shown after RUNNING.
STATE_ORDER = {
    "PENDING": 0,
    "RUNNING": 1,
    "SUSPENDED": 2,
    "COMPLETING": 3,
    "COMPLETED": 4,
    "CANCELLED": 5,
    "FAILED": 6,
    "TIMEOUT": 7,
    "NODE_FAIL": 8,
    "OUT_OF_MEMORY": 12,
}

TERMINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"})

SQUEUE_DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
SQUEUE_LONG_FORMAT = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"

SQUEUE_HEADERS = {
    "a": "ACCOUNT",
    "A": "JOBID",
    "b": "TRES_PER_NODE",
    "B": "EXEC_HOST",
    "c": "MIN_CPUS",
    "C": "CPUS",
    "D": "NODES",
    "e": "END_TIME",
    "E": "DEPENDENCY",
    "f": "FEATURES",
    "F": "ARRAY_JOB_ID",
    "g": "GROUP",
    "G": "GROUP",
    "i": "JOBID",
    "j": "NAME",
    "k": "COMMENT",
    "K": "ARRAY_TASK_ID",
    "l": "TIME_LIMIT",
    "L": "TIME_LEFT",
    "m": "MIN_MEMORY",
    "M": "TIME",
    "n": "REQ_NODES",
    "N": "NODELIST",
    "o": "COMMAND",
    "p": "PRIORITY",
    "P": "PARTITION",
    "q": "QOS",
    "Q": "PRIORITY",
    "r": "REASON",
    "R": "NODELIST(REASON)",
    "S": "START_TIME",
    "t": "ST",
    "T": "STATE",
    "u": "USER",
    "U": "UID",
    "V": "SUBMIT_TIME",
    "w": "WCKEY",
    "x": "EXC_NODES",
    "y": "NICE",
    "Z": "WORK_DIR",
    "d": "MIN_TMP_DISK",
    "h": "OVER_SUBSCRIBE",
    "H": "SOCKETS_PER_NODE",
    "I": "CORES_PER_SOCKET",
    "J": "THREADS_PER_CORE",
    "O": "CONTIGUOUS",
    "s": "",
    "v": "RESERVATION",
    "W": "LICENSES",
    "X": "CORE_SPEC",
    "Y": "SCHEDNODES",
    "z": "S:C:T",
}

# What Slurm 22.05 prints for a job that uses none of these (Spur has no such request or feature):
# squeue letter or -O pseudo-letter -> text.
SQUEUE_FIXED = {
    "d": "0",
    "H": "*",
    "I": "*",
    "J": "*",
    "O": "0",
    "s": "",
    "v": "(null)",
    "W": "(null)",
    "X": "N/A",
    "Y": "(null)",
    "z": "*:*:*",
    "@assoc_id": "0",
    "@boards": "0",
    "@null": "(null)",
    "@na": "N/A",
    "@NA": "NA",
    "@zero": "0",
    "@zero_time": "0:00",
    "@profile": "NotSet",
}

# squeue -O names (case-insensitive) -> (letter, header). Names without a letter get a pseudo-letter
# handled in squeue_value.
SQUEUE_LONG_FIELDS: dict[str, tuple[str, str]] = {
    "account": ("a", "ACCOUNT"),
    "arrayjobid": ("F", "ARRAY_JOB_ID"),
    "arraytaskid": ("K", "ARRAY_TASK_ID"),
    "batchhost": ("B", "EXEC_HOST"),
    "command": ("o", "COMMAND"),
    "comment": ("k", "COMMENT"),
    "dependency": ("E", "DEPENDENCY"),
    "endtime": ("e", "END_TIME"),
    "eligibletime": ("@eligible", "ELIGIBLE_TIME"),
    "exit_code": ("@exit_code", "EXIT_CODE"),
    "feature": ("f", "FEATURES"),
    "gres": ("b", "TRES_PER_NODE"),
    "groupid": ("G", "GROUP"),
    "groupname": ("g", "GROUP"),
    "jobarrayid": ("i", "JOBID"),
    "jobid": ("A", "JOBID"),
    "mincpus": ("c", "MIN_CPUS"),
    "minmemory": ("m", "MIN_MEMORY"),
    "name": ("j", "NAME"),
    "nice": ("y", "NICE"),
    "nodelist": ("N", "NODELIST"),
    "numcpus": ("C", "CPUS"),
    "numnodes": ("D", "NODES"),
    "numtasks": ("@numtasks", "TASKS"),
    "partition": ("P", "PARTITION"),
    "priority": ("p", "PRIORITY"),
    "prioritylong": ("Q", "PRIORITY"),
    "qos": ("q", "QOS"),
    "reason": ("r", "REASON"),
    "reasonlist": ("R", "NODELIST(REASON)"),
    "reqnodes": ("n", "REQ_NODES"),
    "exc_nodes": ("x", "EXC_NODES"),
    "restartcnt": ("@restarts", "RESTART_COUNT"),
    "starttime": ("S", "START_TIME"),
    "state": ("T", "STATE"),
    "statecompact": ("t", "ST"),
    "stderr": ("@stderr", "STDERR"),
    "stdin": ("@stdin", "STDIN"),
    "stdout": ("@stdout", "STDOUT"),
    "submittime": ("V", "SUBMIT_TIME"),
    "timeleft": ("L", "TIME_LEFT"),
    "timelimit": ("l", "TIME_LIMIT"),
    "timeused": ("M", "TIME"),
    "tres-per-node": ("b", "TRES_PER_NODE"),
    "tres-per-job": ("@tres_per_job", "TRES_PER_JOB"),
    "tres-per-task": ("@tres_per_task", "TRES_PER_TASK"),
    "userid": ("U", "UID"),
    "username": ("u", "USER"),
    "wckey": ("w", "WCKEY"),
    "workdir": ("Z", "WORK_DIR"),
    "accruetime": ("@accrue", "ACCRUE_TIME"),
    "allocnodes": ("@alloc_node", "ALLOC_NODES"),
    "allocsid": ("@alloc_sid", "ALLOC_SID"),
    "associd": ("@assoc_id", "ASSOC_ID"),
    "batchflag": ("@batch_flag", "BATCH_FLAG"),
    "boardspernode": ("@boards", "BOARDS_PER_NODE"),
    "burstbuffer": ("@null", "BURST_BUFFER"),
    "burstbufferstate": ("@null", "BURST_BUFFER_STATE"),
    "clusterfeature": ("@null", "CLUSTER_FEATURES"),
    "contiguous": ("O", "CONTIGUOUS"),
    "container": ("@null", "CONTAINER"),
    "cores": ("I", "CORES_PER_SOCKET"),
    "corespec": ("X", "CORE_SPEC"),
    "cpus-per-task": ("c", "CPUS_PER_TASK"),
    "cpus-per-tres": ("@na", "CPUS_PER_TRES"),
    "deadline": ("@na", "DEADLINE"),
    "delayboot": ("@zero_time", "DELAY_BOOT"),
    "derivedec": ("@zero", "DERIVED_EC"),
    "hetjobid": ("@na", "HET_JOB_ID"),
    "hetjobidset": ("@na", "HET_JOB_ID_SET"),
    "hetjoboffset": ("@na", "HET_JOB_OFFSET"),
    "lastschedeval": ("@last_sched_eval", "LAST_SCHED_EVAL"),
    "licenses": ("W", "LICENSES"),
    "maxcpus": ("@max_cpus", "MAX_CPUS"),
    "maxnodes": ("@max_nodes", "MAX_NODES"),
    "mcslabel": ("@null", "MCSLABEL"),
    "mem-per-tres": ("@na", "MEM_PER_TRES"),
    "mintime": ("@zero_time", "TIME_MIN"),
    "mintmpdisk": ("d", "MIN_TMP_DISK"),
    "network": ("@null", "NETWORK"),
    "ntperboard": ("@zero", "NTASKS_PER_BOARD"),
    "ntpercore": ("@na", "NTASKS_PER_CORE"),
    "ntpernode": ("@ntasks_per_node", "NTASKS_PER_NODE"),
    "ntpersocket": ("@na", "NTASKS_PER_SOCKET"),
    "origin": ("@NA", "ORIGIN"),
    "originraw": ("@NA", "ORIGIN_RAW"),
    "oversubscribe": ("h", "OVER_SUBSCRIBE"),
    "pendingtime": ("@pending_time", "PENDING_TIME"),
    "preempttime": ("@na", "PREEMPT_TIME"),
    "prefer": ("@null", "PREFER"),
    "profile": ("@profile", "PROFILE"),
    "reboot": ("@zero", "REBOOT"),
    "reqswitch": ("@zero", "REQ_SWITCH"),
    "requeue": ("@requeue", "REQUEUE"),
    "reservation": ("v", "RESERVATION"),
    "resizetime": ("@na", "RESIZE_TIME"),
    "schednodes": ("Y", "SCHEDNODES"),
    "sct": ("z", "S:C:T"),
    "siblingsactive": ("@NA", "ACTIVE_SIBLINGS"),
    "siblingsactiveraw": ("@NA", "ACTIVE_SIBLINGS_RAW"),
    "siblingsviable": ("@NA", "VIABLE_SIBLINGS"),
    "siblingsviableraw": ("@NA", "VIALBLE_SIBLINGS_RAW"),  # sic: Slurm 22.05's header
    "sockets": ("H", "SOCKETS_PER_NODE"),
    "sperboard": ("@zero", "SOCKETS_PER_BOARD"),
    "system_comment": ("@null", "SYSTEM_COMMENT"),
    "threads": ("J", "THREADS_PER_CORE"),
    "tres-alloc": ("@tres_alloc", "TRES_ALLOC"),
    "tres-bind": ("@na", "TRES_BIND"),
    "tres-freq": ("@na", "TRES_FREQ"),
    "tres-per-socket": ("@na", "TRES_PER_SOCKET"),
    "wait4switch": ("@zero_time", "WAIT4SWITCH"),
}


def job_id_text(job, group: ArrayGroup | None = None) -> str:
    """``%i``: ``218_[3-5%2]`` for a group, ``218_1`` for an array task, else the job id."""
    if group is not None:
        return f"{job.array_job_id}_[{array_task_text(group)}]"
    if has_task(job):
        return f"{job.array_job_id}_{job.array_task_id}"
    return str(job.job_id)


def run_seconds(job, now: float | None = None) -> int:
    """Elapsed run time as Slurm counts it: 0 while pending, suspended time excluded."""
    if not job.start_time or job.state == "PENDING":
        return 0
    suspended = getattr(job, "suspended_secs", 0.0) or 0.0
    if job.state == "SUSPENDED" and getattr(job, "suspend_time", 0.0):
        end = job.suspend_time
    elif job.end_time:
        end = job.end_time
    else:
        end = now if now is not None else time.time()
    return max(0, int(end - job.start_time - suspended))


def num_tasks(job) -> int:
    spec = job.spec
    if spec.num_tasks:
        return spec.num_tasks
    if spec.ntasks_per_node:
        return spec.ntasks_per_node * max(1, spec.num_nodes)
    return max(1, spec.num_nodes)


def num_cpus(job) -> int:
    if job.allocation:
        return sum(a.cpus for a in job.allocation)
    return num_tasks(job) * max(1, job.spec.cpus_per_task)


def num_nodes(job) -> int:
    return len(job.allocation) if job.allocation else max(1, job.spec.num_nodes)


def command_of(job) -> str:
    if job.spec.interactive:
        return " ".join(job.spec.argv) or "(null)"
    return job.spec.command or "(null)"


def tres_per_node(job) -> str:
    return ",".join(f"gres:{g}" for g in job.spec.gres) or "N/A"


def expand_io_pattern(pattern: str, job) -> str:
    """An output path as scontrol shows it: %j %x %u %A %a %% expanded, relative paths under WorkDir."""
    spec = job.spec
    array_job = job.array_job_id if job.array_job_id else job.job_id
    task = str(job.array_task_id) if has_task(job) else "4294967294"
    repl = {"j": str(job.job_id), "J": str(job.job_id), "x": spec.name, "u": job.user}
    repl.update({"A": str(array_job), "a": task, "%": "%"})
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "%" and i + 1 < len(pattern) and pattern[i + 1] in repl:
            out.append(repl[pattern[i + 1]])
            i += 2
            continue
        out.append(ch)
        i += 1
    path = "".join(out)
    if not path.startswith("/") and spec.work_dir:
        path = f"{spec.work_dir.rstrip('/')}/{path}"
    return path


def stdout_path(job) -> str:
    spec = job.spec
    if spec.stdout_pattern:
        return expand_io_pattern(spec.stdout_pattern, job)
    if has_task(job):
        return expand_io_pattern("slurm-%A_%a.out", job)
    return expand_io_pattern("slurm-%j.out", job)


def stderr_path(job) -> str:
    return expand_io_pattern(job.spec.stderr_pattern, job) if job.spec.stderr_pattern else stdout_path(job)


def reason_list(job) -> str:
    """``%R``: ``(Reason)`` for pending and failed-without-nodes jobs, else the node list."""
    if job.state == "PENDING" or not job.nodelist:
        return f"({job.reason or 'None'})"
    return job.nodelist


def squeue_value(job, letter: str, now: float, group: ArrayGroup | None = None) -> str:
    """The text squeue prints for ``%<letter>`` (or an ``@name`` pseudo-letter of -O) of ``job``."""
    spec = job.spec
    match letter:  # the default format's letters first: cases are tried in order
        case "i":
            return job_id_text(job, group)
        case "P":
            return job.partition
        case "j":
            return spec.name
        case "u":
            return job.user
        case "t":
            return SHORT_STATE.get(job.state, job.state)
        case "M":
            return format_elapsed(run_seconds(job, now))
        case "D":
            return str(num_nodes(job))
        case "R":
            return reason_list(job)
        case "A":
            return str(job.array_job_id if group is not None else job.job_id)
        case "F":
            return str(job.array_job_id or job.job_id)
        case "K":
            if group is not None:
                return array_task_text(group)
            return str(job.array_task_id) if has_task(job) else "N/A"
        case "U":
            return str(job.uid)
        case "G":
            return str(job.gid)
        case "g":
            return job.group or str(job.gid)
        case "T":
            return job.state
        case "l":
            return format_time_limit(job.time_limit_secs)
        case "L":
            if job.time_limit_secs < 0:
                return "UNLIMITED"
            return format_elapsed(max(0, job.time_limit_secs - run_seconds(job, now)))
        case "r":
            return job.reason or "None"
        case "N":
            return job.nodelist
        case "B":
            return job.allocation[0].node if job.allocation else "n/a"
        case "C":
            return str(num_cpus(job))
        case "c":
            return str(max(1, spec.cpus_per_task))
        case "b":
            return tres_per_node(job)
        case "a":
            return spec.account or "(null)"
        case "q":
            return spec.qos or "normal"
        case "w":
            return spec.wckey or "(null)"
        case "S":
            return format_timestamp(job.start_time) if job.start_time else "N/A"
        case "V":
            return format_timestamp(job.submit_time)
        case "e":
            if job.end_time:
                return format_timestamp(job.end_time)
            if job.start_time and job.time_limit_secs >= 0:
                return format_timestamp(job.start_time + job.time_limit_secs)
            return "N/A"
        case "E":
            return job.dependency if job.dependency and job.dependency != "(null)" else "(null)"
        case "Q":
            return str(job.priority)
        case "o":
            return command_of(job)
        case "Z":
            return spec.work_dir
        case "m":
            if spec.mem_per_cpu_mb:
                return f"{spec.mem_per_cpu_mb}M"
            return f"{spec.mem_per_node_mb}M" if spec.mem_per_node_mb else "0"
        case "y":
            return str(spec.nice)
        case "k":
            return spec.comment or "(null)"
        case "f":
            return ",".join(spec.constraint) or "(null)"
        case "n":
            return ",".join(spec.nodelist)
        case "x":
            return ",".join(spec.exclude)
        case "@eligible":
            return format_timestamp(job.eligible_time) if job.eligible_time and not is_held(job) else "N/A"
        case "@exit_code":
            return str(job.exit_code)
        case "@numtasks":
            return str(num_tasks(job))
        case "@restarts":
            return str(job.restarts)
        case "@stdout":
            return stdout_path(job) if not spec.interactive else ""
        case "@stderr":
            return stderr_path(job) if not spec.interactive else ""
        case "@stdin":
            return spec.stdin_path or "/dev/null"
        case "@tres_per_job":
            return f"gres:gpu:{spec.gpus_total}" if spec.gpus_total else "N/A"
        case "@tres_per_task":
            return f"gres:gpu:{spec.gpus_per_task}" if spec.gpus_per_task else "N/A"
        case "h":
            return "OK" if not spec.exclusive else "NO"
        case "@accrue":
            return format_timestamp(job.eligible_time) if job.eligible_time and not is_held(job) else "N/A"
        case "@alloc_node":
            return job.submit_host or "(null)"
        case "@alloc_sid":
            return str(spec.alloc_sid)
        case "@batch_flag":
            return "0" if spec.interactive else "1"
        case "@last_sched_eval":
            return format_timestamp(job.submit_time)
        case "@max_cpus":
            return str(num_cpus(job))
        case "@max_nodes":
            return str(num_nodes(job))
        case "@ntasks_per_node":
            return str(spec.ntasks_per_node)
        case "@pending_time":
            end = job.start_time or now
            return str(max(0, int(end - job.submit_time))) if job.state == "PENDING" or job.start_time else "0"
        case "@requeue":
            return "0" if spec.no_requeue else "1"
        case "@tres_alloc":
            return _tres(job)
        case "p":
            return f"{job.priority / 4294967295:.14f}"
    return SQUEUE_FIXED.get(letter, "")


def is_held(job) -> bool:
    """A held job (priority 0 while pending): Slurm reports no eligible or accrue time for it."""
    return job.state == "PENDING" and job.priority == 0


def exit_code_text(job) -> str:
    return f"{job.exit_code}:{job.signal}"


def format_time_limit_long(secs: int) -> str:
    """scontrol's TimeLimit: D-HH:MM:SS (or HH:MM:SS), UNLIMITED."""
    return "UNLIMITED" if secs < 0 else format_hms(secs)


def _tres(job) -> str:
    parts = [f"cpu={num_cpus(job)}"]
    mem = job.spec.mem_per_node_mb or job.spec.mem_per_cpu_mb * num_cpus(job)
    if job.allocation and any(a.mem_mb for a in job.allocation):
        mem = sum(a.mem_mb for a in job.allocation)
    if mem:
        parts.append(f"mem={mem}M")
    parts.append(f"node={num_nodes(job)}")
    parts.append(f"billing={num_cpus(job)}")
    gpus = sum(len(a.gpus) for a in job.allocation)
    if gpus:
        parts.append(f"gres/gpu={gpus}")
    return ",".join(parts)


def scontrol_job(job, now: float, *, one_liner: bool = False) -> str:
    """``scontrol show job`` layout (Slurm 22.05's slurm_sprint_job_info): each group of fields on
    its own indented line, or with ``one_liner`` (``scontrol -o``) the whole record on one line with
    a single space where a line break was."""
    spec = job.spec
    ts = format_timestamp
    first = f"JobId={job.job_id} "
    if job.array_job_id:
        task = str(job.array_task_id) if has_task(job) else ""
        first += f"ArrayJobId={job.array_job_id} ArrayTaskId={task} "
        if job.array_max_running:
            first += f"ArrayTaskThrottle={job.array_max_running} "
    first += f"JobName={spec.name}"
    start = ts(job.start_time) if job.start_time else "Unknown"
    if job.end_time:
        end = ts(job.end_time)
    elif job.start_time and job.time_limit_secs >= 0:
        end = ts(job.start_time + job.time_limit_secs)
    else:
        end = "Unknown"
    eligible = ts(job.eligible_time) if job.eligible_time and not is_held(job) else "Unknown"
    suspend = ts(job.suspend_time) if job.suspend_time else "None"
    pre_sus = int(job.suspend_time - job.start_time - job.suspended_secs) if job.suspend_time else 0
    dependency = job.dependency or "(null)"
    mem_line = (
        f"MinCPUsNode={max(1, spec.cpus_per_task)} MinMemoryCPU={spec.mem_per_cpu_mb}M MinTmpDiskNode=0"
        if spec.mem_per_cpu_mb
        else f"MinCPUsNode={max(1, spec.cpus_per_task)} MinMemoryNode="
        f"{str(spec.mem_per_node_mb) + 'M' if spec.mem_per_node_mb else '0'} MinTmpDiskNode=0"
    )
    batch = not spec.interactive
    lines = [
        first,
        f"UserId={job.user}({job.uid}) GroupId={job.group or job.gid}({job.gid}) MCS_label=N/A",
        f"Priority={job.priority} Nice={spec.nice} Account={spec.account or '(null)'} "
        f"QOS={spec.qos or 'normal'}" + (f" WCKey={spec.wckey}" if spec.wckey else ""),
        f"JobState={job.state} Reason={(job.reason or 'None').replace(' ', '_')} Dependency={dependency}",
        f"Requeue={0 if spec.no_requeue else 1} Restarts={job.restarts} BatchFlag={1 if batch else 0} "
        f"Reboot=0 ExitCode={exit_code_text(job)}",
        f"RunTime={format_hms(run_seconds(job, now))} "
        f"TimeLimit={format_time_limit_long(job.time_limit_secs)} TimeMin=N/A",
        f"SubmitTime={ts(job.submit_time)} EligibleTime={eligible}",
        f"AccrueTime={eligible}",
        f"StartTime={start} EndTime={end} Deadline=N/A",
        f"SuspendTime={suspend} SecsPreSuspend={max(0, pre_sus)} LastSchedEval={ts(job.submit_time)} "
        "Scheduler=Main",
        f"Partition={job.partition} AllocNode:Sid={job.submit_host or 'localhost'}:{spec.alloc_sid}",
        f"ReqNodeList={','.join(spec.nodelist) or '(null)'} ExcNodeList={','.join(spec.exclude) or '(null)'}",
        f"NodeList={job.nodelist}",
    ]
    if job.allocation:
        lines.append(f"BatchHost={job.allocation[0].node}")
    lines += [
        f"NumNodes={num_nodes(job)} NumCPUs={num_cpus(job)} NumTasks={num_tasks(job)} "
        f"CPUs/Task={max(1, spec.cpus_per_task)} ReqB:S:C:T=0:0:*:*",
        f"TRES={_tres(job)}",
        f"Socks/Node=* NtasksPerN:B:S:C={spec.ntasks_per_node}:0:*:* CoreSpec=*",
        mem_line,
        f"Features={'&'.join(spec.constraint) or '(null)'} DelayBoot=00:00:00",
        f"OverSubscribe={'NO' if spec.exclusive else 'OK'} Contiguous=0 Licenses=(null) Network=(null)",
        f"Command={command_of(job)}",
        f"WorkDir={spec.work_dir}",
    ]
    if spec.comment:
        lines.append(f"Comment={spec.comment} ")
    if batch:
        lines += [
            f"StdErr={stderr_path(job)}",
            f"StdIn={spec.stdin_path or '/dev/null'}",
            f"StdOut={stdout_path(job)}",
        ]
    lines.append("Power=")
    if spec.kill_on_invalid_dep:
        lines.append("KillOInInvalidDependent=Yes")
    if spec.gpus_total:
        lines.append(f"TresPerJob=gres:gpu:{spec.gpus_total}")
    if spec.gres:
        lines.append(f"TresPerNode={','.join('gres:' + g for g in spec.gres)}")
    if spec.gpus_per_task:
        lines.append(f"TresPerTask=gres:gpu:{spec.gpus_per_task}")
    return record_text(lines + [""], one_liner)


def record_text(lines: list[str], one_liner: bool) -> str:
    """One ``scontrol show`` record from its lines: joined by Slurm's line end (a newline and three
    spaces, or one space for ``-o``), ended by a blank line (one newline for ``-o``)."""
    if one_liner:
        return " ".join(lines) + "\n"
    return "\n   ".join(lines) + "\n\n"
