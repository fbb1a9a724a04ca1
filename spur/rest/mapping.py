"""Slurm REST (v0.0.38) JSON <-> Spur wire messages (pure, no I/O).

Response mappers take the protobuf messages the ControllerService methods return (``JobInfo``,
``NodeInfo``, ``PartitionInfo``, ``ControllerInfo``) and build the objects slurmrestd 22.05 sends,
with its field names, order and types (``null`` where slurmrestd sends null for "not set").
Request mappers validate a decoded JSON body and build the request message, raising
:class:`RestError` (HTTP 400 and a Slurm error number naming the field) for anything invalid;
they never produce a message the controller could misread.
"""

from __future__ import annotations

import builtins
import math
import signal as _signal
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from spur.rest.errors import (
    ESLURM_DATA_CONV_FAILED,
    ESLURM_INVALID_JOB_ID,
    ESLURM_JOB_SCRIPT_MISSING,
    ESLURM_NOT_SUPPORTED,
    ESLURM_PATHNAME_TOO_LONG,
    ESLURM_REST_INVALID_JOBS_DESC,
    ESLURM_REST_INVALID_QUERY,
    RestError,
)
from spur.rpc.proto import spur_pb2 as pb

INFINITE = 4294967295  # Slurm's INFINITE (uint32), how v0.0.38 dumps "unlimited"
_MAX_U32 = 2**32 - 1
_MAX_I32 = 2**31 - 1
_MAX_JOB_ID = 2**63 - 1
_MAX_MB = 2**53
_MAX_PATH = 4096

TERMINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OOM", "OUT_OF_MEMORY"}
)
SIGNAL_NAMES = (
    "HUP", "INT", "QUIT", "ABRT", "KILL", "ALRM", "TERM", "USR1", "USR2", "URG", "CONT", "STOP", "TSTP",
    "TTIN", "TTOU",
)  # fmt: skip


# ---------------------------------------------------------------------------- small helpers


def _ts(value: float) -> int:
    return int(value) if value and value > 0 else 0


def _minutes(secs: int) -> int:
    """Seconds -> Slurm minutes (rounded up); unlimited (-1) -> INFINITE."""
    if secs < 0:
        return INFINITE
    return math.ceil(secs / 60)


def _hostlist(names: Iterable[str]) -> str:
    from spur.core.hostlist import compress

    names = list(names)
    return compress(names) if names else ""


def _requested_cpus(spec: pb.JobSpec) -> int:
    nodes = spec.num_nodes or 1
    tasks = spec.num_tasks or nodes
    return tasks * (spec.cpus_per_task or 1)


def _requested_mem_mb(spec: pb.JobSpec) -> int:
    if spec.mem_per_node_mb:
        return spec.mem_per_node_mb * (spec.num_nodes or 1)
    if spec.mem_per_cpu_mb:
        return spec.mem_per_cpu_mb * _requested_cpus(spec)
    return 0


def _tres_str(cpus: int, mem_mb: int, nodes: int, gpus: int = 0) -> str:
    parts = [f"cpu={cpus}"]
    if mem_mb:
        parts.append(f"mem={mem_mb}M")
    parts.append(f"node={nodes}")
    parts.append(f"billing={cpus}")
    if gpus:
        parts.append(f"gres/gpu={gpus}")
    return ",".join(parts)


def _array_task_string(job: pb.JobInfo) -> str:
    if not job.array_job_id or job.HasField("array_task_id"):
        return ""
    text = f"{job.array_task_min}-{job.array_task_max}"
    return f"{text}%{job.array_max_running}" if job.array_max_running else text


# ---------------------------------------------------------------------------- slurm/v0.0.38 jobs


# Every field of v0.0.38_job_response_properties in slurmrestd's order, with the value Spur always
# sends for the ones it has no notion of; job_to_slurm copies this and fills in the rest.
_JOB_TEMPLATE: dict[str, Any] = dict.fromkeys(
    (
        "account accrue_time admin_comment array_job_id array_task_id array_max_tasks array_task_string "
        "association_id batch_features batch_flag batch_host flags burst_buffer burst_buffer_state cluster "
        "cluster_features command comment container contiguous core_spec thread_spec cores_per_socket "
        "billable_tres cpus_per_task cpu_frequency_minimum cpu_frequency_maximum cpu_frequency_governor "
        "cpus_per_tres deadline delay_boot dependency derived_exit_code eligible_time end_time excluded_nodes "
        "exit_code features federation_origin federation_siblings_active federation_siblings_viable "
        "gres_detail group_id group_name job_id job_resources job_state last_sched_evaluation licenses "
        "max_cpus max_nodes mcs_label memory_per_tres name nodes nice tasks_per_core tasks_per_node "
        "tasks_per_socket tasks_per_board cpus node_count tasks het_job_id het_job_id_set het_job_offset "
        "partition prefer memory_per_node memory_per_cpu minimum_cpus_per_node minimum_tmp_disk_per_node "
        "preempt_time pre_sus_time priority profile qos reboot required_nodes requeue resize_time "
        "restart_cnt resv_name shared show_flags sockets_per_board sockets_per_node start_time "
        "state_description state_reason standard_error standard_input standard_output submit_time "
        "suspend_time system_comment time_limit time_minimum threads_per_core tres_bind tres_freq "
        "tres_per_job tres_per_node tres_per_socket tres_per_task tres_req_str tres_alloc_str user_id "
        "user_name wckey current_working_directory"
    ).split()
)
# The fields Spur always sends with the same value (job_to_slurm never sets them).
JOB_FIXED: dict[str, Any] = dict(
    admin_comment="", association_id=0, batch_features="", burst_buffer="", burst_buffer_state="",
    cluster_features="", container="", contiguous=False, cpus_per_tres="", deadline=0, delay_boot=0,
    derived_exit_code=0, federation_origin="", federation_siblings_active="",
    federation_siblings_viable="", licenses="", max_cpus=0, max_nodes=0, mcs_label="", memory_per_tres="",
    tasks_per_board=0, het_job_id=0, het_job_id_set="", het_job_offset=0, prefer="",
    minimum_tmp_disk_per_node=0, preempt_time=0, pre_sus_time=0, reboot=False, resize_time=0, resv_name="",
    sockets_per_board=0, state_description="", system_comment="", time_minimum=0, tres_bind="",
    tres_freq="", tres_per_socket="",
)  # fmt: skip
_JOB_TEMPLATE.update(JOB_FIXED)
_SHOW_FLAGS = ("SHOW_ALL", "SHOW_DETAIL", "SHOW_LOCAL")


def job_template_without(keys: Collection[str]) -> dict[str, Any]:
    """The fields :func:`job_to_slurm` starts from (slurmrestd 22.05's order), less ``keys``."""
    return {k: v for k, v in _JOB_TEMPLATE.items() if k not in keys}


def job_to_slurm(job: pb.JobInfo, cluster: str, template: dict[str, Any] = _JOB_TEMPLATE) -> dict[str, Any]:
    """One ``v0.0.38_job_response_properties`` object (field order as slurmrestd 22.05).
    ``template``: the fields copied first (:func:`job_template_without`): v0.0.4x's renderer
    leaves out the ones it writes once for every job."""
    spec = job.spec
    alloc = job.allocation
    d = template.copy()
    nodes_requested = spec.num_nodes or 1
    cpus_per_task = spec.cpus_per_task
    req_cpus = (spec.num_tasks or nodes_requested) * (cpus_per_task or 1)
    if alloc:
        alloc_cpus = sum(a.cpus for a in alloc)
        alloc_mem = sum(a.mem_mb for a in alloc)
        alloc_gpus = sum(len(a.gpus) for a in alloc)
        d["batch_host"] = alloc[0].node
        d["gres_detail"] = [f"gpu:{len(a.gpus)}(IDX:{','.join(map(str, a.gpus))})" for a in alloc if a.gpus]
        d["job_resources"] = _job_resources(list(alloc))
        d["tres_alloc_str"] = _tres_str(alloc_cpus, alloc_mem, len(alloc), alloc_gpus)
        cpus, node_count = alloc_cpus or req_cpus, len(alloc)
    else:
        d["batch_host"] = ""
        d["gres_detail"] = []
        d["job_resources"] = {}
        d["tres_alloc_str"] = ""
        cpus, node_count = req_cpus, nodes_requested
    start_time = job.start_time
    eligible = int(job.eligible_time) if job.eligible_time > 0 else 0
    flags = []
    if start_time:
        flags.append("JOB_WAS_RUNNING")
    if eligible:
        flags.append("JOB_ACCRUE_OVER")
    dependency = job.dependency
    command = spec.command
    array_job_id = job.array_job_id
    has_task = job.HasField("array_task_id")
    limit = job.time_limit_secs
    mem_node, mem_cpu = spec.mem_per_node_mb, spec.mem_per_cpu_mb
    mem_req = mem_node * nodes_requested if mem_node else mem_cpu * req_cpus
    d["account"] = spec.account
    d["accrue_time"] = eligible
    d["array_job_id"] = array_job_id
    d["array_task_id"] = job.array_task_id if has_task else None
    d["array_max_tasks"] = job.array_max_running
    d["array_task_string"] = _array_task_string(job) if array_job_id and not has_task else ""
    d["batch_flag"] = not spec.interactive
    d["flags"] = flags
    d["cluster"] = cluster
    d["command"] = command if command != "(null)" else ""
    d["comment"] = spec.comment
    d["core_spec"] = d["thread_spec"] = d["cores_per_socket"] = None
    d["billable_tres"] = float(cpus)
    d["cpus_per_task"] = str(cpus_per_task) if cpus_per_task > 1 else None  # 22.05 declares a string
    d["cpu_frequency_minimum"] = d["cpu_frequency_maximum"] = d["cpu_frequency_governor"] = None
    d["dependency"] = dependency if dependency and dependency != "(null)" else ""
    d["eligible_time"] = eligible
    d["end_time"] = int(job.end_time) if job.end_time > 0 else 0
    d["excluded_nodes"] = ",".join(spec.exclude)
    d["exit_code"] = ((job.exit_code & 0xFF) << 8) | (job.signal & 0x7F)  # a wait(2) status, as Slurm
    d["features"] = "&".join(spec.constraint)
    d["group_id"] = job.gid
    d["group_name"] = job.group
    d["job_id"] = job.job_id
    d["job_state"] = job.state
    d["last_sched_evaluation"] = eligible or (int(job.submit_time) if job.submit_time > 0 else 0)
    d["name"] = spec.name
    d["nodes"] = job.nodelist
    d["nice"] = spec.nice or None
    d["tasks_per_core"] = d["tasks_per_socket"] = None
    d["tasks_per_node"] = spec.ntasks_per_node
    d["cpus"] = cpus
    d["node_count"] = node_count
    d["tasks"] = spec.num_tasks or nodes_requested
    d["partition"] = job.partition
    d["memory_per_node"] = mem_node or None
    d["memory_per_cpu"] = mem_cpu or None
    d["minimum_cpus_per_node"] = cpus_per_task or 1
    d["priority"] = max(job.priority, 0)
    d["profile"] = None
    d["qos"] = spec.qos or "normal"
    d["required_nodes"] = ",".join(spec.nodelist)
    d["requeue"] = not spec.no_requeue
    d["restart_cnt"] = job.restarts
    d["shared"] = "none" if spec.exclusive else "shared"
    d["show_flags"] = list(_SHOW_FLAGS)
    d["sockets_per_node"] = None
    d["start_time"] = int(start_time) if start_time > 0 else 0
    d["state_reason"] = job.reason or "None"
    d["standard_error"] = spec.stderr_pattern
    d["standard_input"] = spec.stdin_path
    d["standard_output"] = spec.stdout_pattern
    d["submit_time"] = int(job.submit_time) if job.submit_time > 0 else 0
    d["suspend_time"] = int(job.suspend_time) if job.suspend_time > 0 else 0
    d["time_limit"] = INFINITE if limit < 0 else -(-limit // 60)
    d["threads_per_core"] = None
    gpus_total, gpus_per_task, gres = spec.gpus_total, spec.gpus_per_task, spec.gres
    d["tres_per_job"] = f"gres:gpu:{gpus_total}" if gpus_total else ""
    d["tres_per_node"] = ",".join(f"gres:{g}" for g in gres) if gres else ""
    d["tres_per_task"] = f"gres:gpu:{gpus_per_task}" if gpus_per_task else ""
    d["tres_req_str"] = _tres_str(req_cpus, mem_req, nodes_requested)
    d["user_id"] = job.uid
    d["user_name"] = job.user
    d["wckey"] = spec.wckey
    d["current_working_directory"] = spec.work_dir
    return d


def _job_resources(alloc: list[pb.NodeAllocation]) -> dict[str, Any]:
    if not alloc:
        return {}
    nodes = []
    for a in alloc:
        nodes.append(
            {
                "sockets": {"0": {"cores": {str(i): "allocated" for i in range(a.cpus)}}},
                "nodename": a.node,
                "cpus_used": a.cpus,
                "memory_used": a.mem_mb,
                "memory_allocated": a.mem_mb,
                "cpus": a.cpus,
                "memory": a.mem_mb,
            }
        )
    return {
        "nodes": _hostlist(a.node for a in alloc),
        "allocated_cores": sum(a.cpus for a in alloc),
        "allocated_cpus": sum(a.cpus for a in alloc),
        "allocated_hosts": len(alloc),
        "allocated_nodes": nodes,
    }


def parse_job_id(text: str, source: str) -> tuple[int, int | None]:
    """``"123"`` or ``"123_4"`` (array task) -> (job id, task id); anything else -> 404 2017."""
    head, sep, tail = text.partition("_")
    try:
        job_id = int(head, 10) if head.isdigit() else -1
        task = (int(tail, 10) if tail.isdigit() else -1) if sep else None
    except ValueError:
        job_id, task = -1, None
    if job_id <= 0 or job_id > _MAX_JOB_ID or (task is not None and not 0 <= task <= _MAX_U32):
        raise RestError(404, ESLURM_INVALID_JOB_ID, f"Unable to find JobId={text}", source)
    return job_id, task


def parse_signal(value: str | None, source: str) -> int:
    """``?signal=`` of DELETE job: a name (with or without SIG) or number; absent -> SIGKILL (cancel)."""
    if value is None or value == "":
        return int(_signal.SIGKILL)
    text = value.strip().upper()
    if text.isdigit():
        number = int(text)
        if 1 <= number < _signal.NSIG:
            return number
    name = text if text.startswith("SIG") else f"SIG{text}"
    sig = getattr(_signal.Signals, name, None) if name.isidentifier() else None
    if isinstance(sig, _signal.Signals):
        return int(sig)
    raise RestError(400, ESLURM_REST_INVALID_QUERY, f"unknown signal {value!r}", source)


# Slurm's kill flags on ``DELETE job?flags=``: the two that choose what a signal reaches, and the rest
# (accepted by slurmrestd, with no effect on one cluster's job here).
_KILL_FLAGS_NO_EFFECT = frozenset(
    {"ARRAY_TASK", "FULL_STEPS_ONLY", "FEDERATION_REQUEUE", "HURRY", "OUT_OF_MEMORY", "NO_SIBLING_JOBS",
     "RESERVATION_JOB", "NO_CRON_JOBS", "VERBOSE", "CRON_JOBS", "WARNING_SENT"}
)  # fmt: skip


def cancel_request(job_id: str, signal: str | None, flags: str | None, source: str) -> pb.CancelJobRequest:
    """``DELETE job/{job_id}?signal=&flags=`` as a CancelJob call. As ``scancel``: a signal other than
    KILL reaches only the job's steps unless ``flags`` has ``BATCH_JOB`` (the batch shell only) or
    ``FULL_JOB`` (the shell and every step); flags are comma-separated names, an unknown one is a 400."""
    jid, task = parse_job_id(job_id, source)
    sig = parse_signal(signal, source)
    req = pb.CancelJobRequest(job_id=jid, signal=0 if sig == 9 else sig)
    if task is not None:
        req.array_task_id = task
    for flag in (f.strip().upper() for f in (flags or "").split(",") if f.strip()):
        if flag == "BATCH_JOB":
            req.batch_only = True
        elif flag == "FULL_JOB":
            req.full = True
        elif flag not in _KILL_FLAGS_NO_EFFECT:
            raise RestError(400, ESLURM_REST_INVALID_QUERY, f"unknown signal flag {flag!r}", source)
    return req


# ---------------------------------------------------------------------------- submit / update


class _Fields:
    """Typed access to a JSON object's fields; a wrong type is a 400 naming the field."""

    def __init__(self, data: Mapping[str, Any], where: str, source: str) -> None:
        self.data = data
        self.where = where
        self.source = source

    def bad(self, key: str, expected: str) -> RestError:
        return RestError(
            400, ESLURM_DATA_CONV_FAILED, f"{self.where}.{key}: expected {expected}", self.source
        )

    def str(self, key: str, max_len: int = _MAX_PATH) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.bad(key, "a string")
        if "\x00" in value:
            raise self.bad(key, "a string without NUL characters")
        if len(value) > max_len:
            raise RestError(
                400, ESLURM_PATHNAME_TOO_LONG, f"{self.where}.{key}: longer than {max_len}", self.source
            )
        return value

    def int(self, key: builtins.str, lo: int, hi: int) -> int | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, str) and value.strip().lstrip("-").isdigit():
                value = int(value.strip())
            else:
                raise self.bad(key, "an integer")
        if not lo <= value <= hi:
            raise self.bad(key, f"an integer in {lo}..{hi}")
        return value

    def bool(self, key: builtins.str) -> bool | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self.bad(key, "true or false")
        return value


def _environment(value: Any, f: _Fields) -> dict[str, str]:
    env: dict[str, str] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(v, str | int | float) or isinstance(v, bool):
                raise f.bad(f"environment.{k}", "a string value")
            env[k] = str(v)
    elif isinstance(value, list):
        for item in value:
            if not isinstance(item, str) or "=" not in item:
                raise f.bad("environment", 'an object or a list of "NAME=value" strings')
            k, _, v = item.partition("=")
            env[k] = v
    else:
        raise f.bad("environment", 'an object or a list of "NAME=value" strings')
    for k in env:
        if not k or "=" in k or "\x00" in k or "\x00" in env[k]:
            raise f.bad("environment", "variable names without '=' or NUL")
    return env


def _node_count(value: Any, f: _Fields) -> int | None:
    """``nodes``: an integer, ``"N"``/``"N-M"``, or ``[min, max]`` -> the minimum node count."""
    if value is None:
        return None
    first: Any = value
    if isinstance(value, list):
        if not value:
            raise f.bad("nodes", "an integer, a string N[-M] or a list [min, max]")
        first = value[0]
    elif isinstance(value, str):
        first = value.split("-", 1)[0].strip()
    if isinstance(first, str) and first.isdigit():
        first = int(first)
    if isinstance(first, bool) or not isinstance(first, int) or not 1 <= first <= 100000:
        raise f.bad("nodes", "a node count of at least 1")
    return first


def _gres_list(text: str | None) -> list[str]:
    if not text:
        return []
    return [g.removeprefix("gres:").removeprefix("gres/") for g in text.split(",") if g.strip()]


def _gpu_count(text: str | None, f: _Fields, key: str) -> int:
    if not text:
        return 0
    last = text.rsplit(":", 1)[-1]
    if not last.isdigit() or int(last) > 1024:
        raise f.bad(key, '"[type:]count"')
    return int(last)


def submit_to_spec(
    body: Mapping[str, Any], default_cwd: str, source: str = "_op_handler_submit_job", *, allocation: bool = False
) -> pb.JobSpec:
    """A ``v0.0.38_job_submission`` body -> JobSpec (see the module docstring for errors).

    ``script`` is the batch script (must start with ``#!``, as sbatch requires); ``job`` holds the
    job description; ``jobs`` (heterogeneous jobs) answers Slurm's "not supported" error. A job
    without ``current_working_directory`` runs in ``default_cwd``. ``#SBATCH`` lines are not read
    (slurmrestd does not read them either): the description is the whole request.

    ``allocation``: ``job/allocate`` (salloc's request): no script, an interactive allocation only.
    """
    from spur.core.script import ScriptError, validate_script

    if "jobs" in body and body["jobs"] is not None:
        raise RestError(
            400, ESLURM_NOT_SUPPORTED, "heterogeneous jobs (jobs[]) are not supported by Spur", source
        )
    script = body.get("script")
    if allocation:
        script = None
    elif script is None or script == "":
        raise RestError(400, ESLURM_JOB_SCRIPT_MISSING, "script must be set", source)
    if not allocation and not isinstance(script, str):
        raise RestError(400, ESLURM_DATA_CONV_FAILED, "script: expected a string", source)
    if script is not None:
        try:
            validate_script(script)
        except ScriptError as exc:
            raise RestError(400, ESLURM_JOB_SCRIPT_MISSING, str(exc), source) from None
    desc = body.get("job")
    if desc is None:
        desc = {}
    if not isinstance(desc, dict):
        raise RestError(400, ESLURM_REST_INVALID_JOBS_DESC, "job must be an object", source)
    f = _Fields(desc, "job", source)
    spec = pb.JobSpec(script=script or "", command="(null)")
    if allocation:
        spec.interactive = True
        spec.allocation_only = True
    if "environment" not in desc or desc["environment"] is None:
        raise RestError(400, ESLURM_REST_INVALID_JOBS_DESC, "job.environment must be set", source)
    spec.environment.update(_environment(desc["environment"], f))
    cwd = f.str("current_working_directory") or default_cwd
    if not cwd.startswith("/"):
        raise f.bad("current_working_directory", "an absolute path")
    spec.work_dir = cwd
    for key, attr in (
        ("name", "name"),
        ("partition", "partition"),
        ("account", "account"),
        ("qos", "qos"),
        ("wckey", "wckey"),
        ("comment", "comment"),
        ("dependency", "dependency"),
        ("array", "array"),
        ("standard_output", "stdout_pattern"),
        ("standard_error", "stderr_pattern"),
        ("standard_input", "stdin_path"),
        ("signal", "signal"),
    ):
        value = f.str(key)
        if value is not None:
            setattr(spec, attr, value)
    if spec.array:
        from spur.core.job_options import parse_array_spec

        try:
            parse_array_spec(spec.array)
        except ValueError as exc:
            raise f.bad("array", f"an array spec ({exc})") from None
    if spec.signal:
        from spur.core.job_options import parse_signal_spec

        try:
            parse_signal_spec(spec.signal)
        except ValueError as exc:
            raise f.bad("signal", f"[B:]SIG[@secs] ({exc})") from None
    if spec.dependency:
        from spur.core.job_options import parse_dependency

        try:
            parse_dependency(spec.dependency)
        except ValueError as exc:
            raise f.bad("dependency", f"a dependency ({exc})") from None
    open_mode = f.str("open_mode")
    if open_mode is not None:
        if open_mode not in ("append", "truncate"):
            raise f.bad("open_mode", '"append" or "truncate"')
        spec.open_mode = open_mode
    nodes = _node_count(desc.get("nodes"), f)
    spec.num_nodes = nodes or 1
    for key, attr, lo, hi in (
        ("tasks", "num_tasks", 1, 1_000_000),
        ("cpus_per_task", "cpus_per_task", 1, 100_000),
        ("tasks_per_node", "ntasks_per_node", 1, 100_000),
        ("memory_per_node", "mem_per_node_mb", 0, _MAX_MB),
        ("memory_per_cpu", "mem_per_cpu_mb", 0, _MAX_MB),
    ):
        number = f.int(key, lo, hi)
        if number is not None:
            setattr(spec, attr, number)
    if spec.mem_per_node_mb and spec.mem_per_cpu_mb:
        raise f.bad("memory_per_cpu", "either memory_per_node or memory_per_cpu, not both")
    if spec.num_tasks and spec.num_tasks < spec.num_nodes:
        raise f.bad("tasks", f"at least the node count ({spec.num_nodes})")
    limit = f.int("time_limit", 0, 2**31 // 60)
    if limit is not None:
        spec.time_limit_secs = limit * 60 if limit else -1
    time_min = desc.get("time_minimum")
    if time_min is not None:
        f.int("time_minimum", 0, 2**31 // 60)
    nice = f.int("nice", -10000, 10000)
    if nice is not None:
        spec.nice = nice
    begin = f.int("begin_time", 0, 2**40)
    if begin:
        spec.begin_time = float(begin)
    for key, attr in (("hold", "hold"), ("kill_on_invalid_dependency", "kill_on_invalid_dep")):
        flag = f.bool(key)
        if flag is not None:
            setattr(spec, attr, flag)
    requeue = f.bool("requeue")
    if requeue is not None:
        spec.no_requeue = not requeue
    exclusive = desc.get("exclusive")
    if exclusive is not None:
        if exclusive not in ("user", "mcs", "true", "false", True, False):
            raise f.bad("exclusive", '"user", "mcs", "true" or "false"')
        spec.exclusive = exclusive not in ("false", False)
    constraints = f.str("constraints")
    if constraints:
        spec.constraint.extend(c for c in constraints.replace("&", ",").split(",") if c)
    spec.gres.extend(_gres_list(f.str("gres")))
    spec.gpus_total = _gpu_count(f.str("gpus"), f, "gpus")
    spec.gpus_per_task = _gpu_count(f.str("gpus_per_task"), f, "gpus_per_task")
    per_node = f.str("gpus_per_node")
    if per_node:
        spec.gres.append(f"gpu:{per_node}" if not per_node.startswith("gpu") else per_node)
    argv = desc.get("argv")
    if argv is not None:
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise f.bad("argv", "a list of strings")
        spec.argv.extend(argv)
    return spec


def update_to_request(
    job_id: int, task: int | None, body: Mapping[str, Any], source: str = "_op_handler_job"
) -> pb.UpdateJobRequest:
    """``POST job/{id}`` (``v0.0.38_job_properties``) -> UpdateJobRequest.

    Applied: time_limit (minutes, 0 = unlimited), partition, priority, nice, name, comment, and
    hold (true: hold, false: release). Other keys are accepted and ignored, as slurmrestd ignores
    unset fields; a wrong type is a 400.
    """
    f = _Fields(body, "job", source)
    req = pb.UpdateJobRequest(job_id=job_id)
    if task is not None:
        req.array_task_id = task
    limit = f.int("time_limit", 0, 2**31 // 60)
    if limit is not None:
        req.time_limit_secs = limit * 60 if limit else -1
    for key in ("partition", "name", "comment"):
        value = f.str(key)
        if value is not None:
            setattr(req, key, value)
    priority = f.int("priority", 0, _MAX_U32 - 1)
    if priority is not None:
        req.priority = priority
    nice = f.int("nice", -10000, 10000)
    if nice is not None:
        req.nice = nice
    hold = f.bool("hold")
    if hold is not None:
        req.action = "hold" if hold else "release"
    return req


# ---------------------------------------------------------------------------- nodes, partitions


_NODE_STATE = {
    "idle": ("idle", []),
    "mixed": ("mixed", []),
    "allocated": ("allocated", []),
    "down": ("down", []),
    "drained": ("idle", ["DRAIN"]),
    "draining": ("mixed", ["DRAIN"]),
    "unknown": ("unknown", []),
}


def node_to_slurm(node: pb.NodeInfo) -> dict[str, Any]:
    """One ``v0.0.38_node`` object."""
    state, flags = _NODE_STATE.get(node.state, (node.state or "unknown", []))
    gpus = len(node.gpus)
    gres = f"gpu:{gpus}" if gpus else ""
    return {
        "architecture": node.arch,
        "burstbuffer_network_address": "",
        "boards": 1,
        "boot_time": _ts(node.boot_time),
        "cores": node.cores_per_socket or 1,
        "cpu_binding": 0,
        "cpu_load": 0,
        "free_memory": max(node.memory_mb - node.alloc_mem_mb, 0),
        "cpus": node.cpus,
        "features": ",".join(node.features),
        "active_features": ",".join(node.features),
        "gres": gres,
        "gres_drained": "N/A",
        "gres_used": f"gpu:{node.alloc_gpus}" if gpus else "",
        "mcs_label": "",
        "name": node.name,
        "next_state_after_reboot": "invalid",
        "next_state_after_reboot_flags": [],
        "address": node.address,
        "hostname": node.name,
        "state": state,
        "state_flags": flags,
        "operating_system": node.os,
        "owner": None,
        "partitions": list(node.partitions),
        "port": node.port,
        "real_memory": node.memory_mb,
        "reason": node.reason,
        "reason_changed_at": 0,
        "reason_set_by_user": None,
        "slurmd_start_time": _ts(node.registered_time),
        "sockets": node.sockets or 1,
        "threads": node.threads_per_core or 1,
        "temporary_disk": 0,
        "weight": 1,
        "tres": _tres_str(node.cpus, node.memory_mb, 1, gpus).replace(",node=1", ""),
        "tres_used": f"cpu={node.alloc_cpus},mem={node.alloc_mem_mb}M" if node.alloc_cpus else "",
        "tres_weighted": float(node.alloc_cpus),
        "slurmd_version": node.version,
        "alloc_cpus": node.alloc_cpus,
        "idle_cpus": max(node.cpus - node.alloc_cpus, 0),
        "alloc_memory": node.alloc_mem_mb,
    }


def partition_to_slurm(part: pb.PartitionInfo, node_cpus: Mapping[str, int]) -> dict[str, Any]:
    """One ``v0.0.38_partition`` object; ``node_cpus`` gives each member node's CPU count."""
    members = list(part.nodes)
    default_time = part.default_time_secs if part.default_time_secs >= 0 else part.max_time_secs
    return {
        "flags": ["default"] if part.is_default else [],
        "preemption_mode": ["disabled"],
        "allowed_allocation_nodes": "",
        "allowed_accounts": "",
        "allowed_groups": "",
        "allowed_qos": "",
        "alternative": "",
        "billing_weights": "",
        "default_memory_per_cpu": 0,
        "default_time_limit": _minutes(default_time) if default_time >= 0 else None,
        "denied_accounts": "",
        "denied_qos": "",
        "preemption_grace_time": 0,
        "maximum_cpus_per_node": -1,
        "maximum_memory_per_node": 0,
        "maximum_nodes_per_job": -1,
        "max_time_limit": _minutes(part.max_time_secs),
        "min_nodes_per_job": 0,
        "name": part.name,
        "nodes": _hostlist(members),
        "over_time_limit": None,
        "priority_job_factor": 1,
        "priority_tier": 1,
        "qos": "",
        "state": part.state or "UP",
        "total_cpus": sum(node_cpus.get(n, 0) for n in members),
        "total_nodes": len(members),
        "tres": "",
        "maximum_memory_per_cpu": 0,
        "default_memory_per_node": 0,
    }


# ---------------------------------------------------------------------------- ping, diag


def pings(controllers: Iterable[pb.ControllerInfo]) -> list[dict[str, Any]]:
    """``v0.0.38_ping`` entries: ``mode`` is primary for the Raft leader, backup for the others."""
    out = []
    for info in controllers:
        host = info.address.rsplit(":", 1)[0].strip("[]") if info.address else f"controller{info.node_id}"
        up = info.healthy and info.role != "unreachable"
        out.append(
            {
                "hostname": host,
                "ping": "UP" if up else "DOWN",
                "status": 0 if up else -1,
                "mode": "primary" if info.role.lower() == "leader" else "backup",
            }
        )
    return out


def diag_statistics(
    jobs: Iterable[pb.JobInfo], now: float, started_at: float, counters: Mapping[str, int]
) -> dict[str, Any]:
    """``v0.0.38_diag.statistics`` from the current jobs and the controller's counters."""
    by_state: dict[str, int] = {}
    for job in jobs:
        by_state[job.state] = by_state.get(job.state, 0) + 1
    return {
        "parts_packed": 1,
        "req_time": int(now),
        "req_time_start": int(started_at),
        "server_thread_count": 1,
        "agent_queue_size": 0,
        "agent_count": 0,
        "agent_thread_count": 0,
        "dbd_agent_queue_size": int(counters.get("outbox_depth", 0)),
        "gettimeofday_latency": 0,
        "schedule_cycle_max": int(counters.get("schedule_cycle_max_us", 0)),
        "schedule_cycle_last": int(counters.get("schedule_cycle_last_us", 0)),
        "schedule_cycle_total": int(counters.get("schedule_cycle_total", 0)),
        "schedule_cycle_mean": int(counters.get("schedule_cycle_mean_us", 0)),
        "schedule_cycle_mean_depth": 0,
        "schedule_cycle_per_minute": 0,
        "schedule_queue_length": by_state.get("PENDING", 0),
        "jobs_submitted": int(counters.get("jobs_submitted", 0)),
        "jobs_started": int(counters.get("jobs_started", 0)),
        "jobs_completed": by_state.get("COMPLETED", 0),
        "jobs_canceled": by_state.get("CANCELLED", 0),
        "jobs_failed": by_state.get("FAILED", 0) + by_state.get("NODE_FAIL", 0) + by_state.get("TIMEOUT", 0),
        "jobs_pending": by_state.get("PENDING", 0),
        "jobs_running": by_state.get("RUNNING", 0) + by_state.get("COMPLETING", 0),
        "job_states_ts": int(now),
        "bf_backfilled_jobs": 0,
        "bf_last_backfilled_jobs": 0,
        "bf_backfilled_het_jobs": 0,
        "bf_cycle_counter": 0,
        "bf_cycle_mean": 0,
        "bf_depth_mean": 0,
        "bf_depth_mean_try": 0,
        "bf_cycle_last": 0,
        "bf_cycle_max": 0,
        "bf_queue_len": 0,
        "bf_queue_len_mean": 0,
        "bf_table_size": 0,
        "bf_table_size_mean": 0,
        "bf_when_last_cycle": 0,
        "bf_active": False,
        "rpcs_by_message_type": [],
        "rpcs_by_user": [],
    }


# ---------------------------------------------------------------------------- slurmdb jobs


def _exit_code_db(state: str, exit_code: int, sig: int) -> dict[str, Any]:
    if state in ("PENDING", "RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING"):
        return {"status": "PENDING", "return_code": 0}
    if sig:
        try:
            name = _signal.Signals(sig).name.removeprefix("SIG")
        except ValueError:
            name = str(sig)
        return {"status": "SIGNALED", "return_code": 0, "signal": {"signal_id": sig, "name": name}}
    return {"status": "SUCCESS" if exit_code == 0 else "FAILED", "return_code": exit_code}


def _tres_list(cpus: int, mem_mb: int, nodes: int) -> list[dict[str, Any]]:
    out = [{"type": "cpu", "name": "", "id": 1, "count": cpus}]
    if mem_mb:
        out.append({"type": "mem", "name": "", "id": 2, "count": mem_mb})
    out.append({"type": "node", "name": "", "id": 4, "count": nodes})
    out.append({"type": "billing", "name": "", "id": 5, "count": cpus})
    return out


def job_to_slurmdb(job: pb.JobInfo, cluster: str, now: float) -> dict[str, Any]:
    """One ``dbv0.0.38_job`` object (what sacct shows), with the job's steps."""
    spec = job.spec
    alloc = list(job.allocation)
    start, end = _ts(job.start_time), _ts(job.end_time)
    elapsed = (end or int(now)) - start if start else 0
    elapsed = max(elapsed - int(job.suspended_secs), 0)
    steps = []
    for step in job.steps:
        s_start, s_end = _ts(step.start_time), _ts(step.end_time)
        steps.append(
            {
                "time": {
                    "elapsed": max((s_end or int(now)) - s_start, 0) if s_start else 0,
                    "end": s_end,
                    "start": s_start,
                    "suspended": 0,
                    "system": {"seconds": 0, "microseconds": 0},
                    "total": {"seconds": 0, "microseconds": 0},
                    "user": {"seconds": 0, "microseconds": 0},
                },
                "exit_code": _exit_code_db(step.state, step.exit_code, step.signal),
                "nodes": {"count": len(step.allocation), "range": _hostlist(a.node for a in step.allocation)},
                "tasks": {"count": sum(a.tasks for a in step.allocation)},
                "pid": "",
                "CPU": {"requested_frequency": {"min": 0, "max": 0}, "governor": []},
                "kill_request_user": "",
                "state": step.state,
                "step": {"job_id": job.job_id, "het": {"component": None}, "id": str(step.step_id),
                         "name": step.spec.name or (step.spec.argv[0] if step.spec.argv else "")},
                "task": {"distribution": "Block"},
                "tres": {"requested": {"max": [], "min": [], "average": [], "total": []},
                         "consumed": {"max": [], "min": [], "average": [], "total": []},
                         "allocated": _tres_list(sum(a.cpus for a in step.allocation), 0, len(step.allocation))},
            }
        )  # fmt: skip
    array: dict[str, Any] = {
        "job_id": job.array_job_id,
        "limits": {"max": {"running": {"tasks": job.array_max_running}}},
        "task": _array_task_string(job) if not job.HasField("array_task_id") else str(job.array_task_id),
        "task_id": job.array_task_id if job.HasField("array_task_id") else None,
    }
    return {
        "account": spec.account,
        "comment": {"administrator": "", "job": spec.comment, "system": ""},
        "allocation_nodes": len(alloc),
        "array": array,
        "time": {
            "elapsed": elapsed,
            "eligible": _ts(job.eligible_time),
            "end": end,
            "start": start,
            "submission": _ts(job.submit_time),
            "suspended": int(job.suspended_secs),
            "system": {"seconds": 0, "microseconds": 0},
            "total": {"seconds": 0, "microseconds": 0},
            "user": {"seconds": 0, "microseconds": 0},
            "limit": _minutes(job.time_limit_secs),
        },
        "association": {"account": spec.account, "cluster": cluster, "partition": job.partition, "user": job.user},
        "cluster": cluster,
        "constraints": "&".join(spec.constraint),
        "container": "",
        "derived_exit_code": {"status": "SUCCESS", "return_code": 0},
        "exit_code": _exit_code_db(job.state, job.exit_code, job.signal),
        "flags": ["CLEAR_SCHEDULING"] if job.start_time else [],
        "group": job.group,
        "het": {"job_id": 0, "job_offset": None},
        "job_id": job.job_id,
        "name": spec.name,
        "mcs": {"label": ""},
        "nodes": job.nodelist or "None assigned",
        "partition": job.partition,
        "priority": max(job.priority, 0),
        "qos": spec.qos or "normal",
        "required": {"CPUs": _requested_cpus(spec), "memory": _requested_mem_mb(spec)},
        "kill_request_user": None,
        "reservation": {"id": 0, "name": 0},
        "state": {"current": job.state, "reason": job.reason or "None"},
        "steps": steps,
        "tres": {
            "allocated": _tres_list(sum(a.cpus for a in alloc), sum(a.mem_mb for a in alloc), len(alloc))
            if alloc
            else [],
            "requested": _tres_list(_requested_cpus(spec), _requested_mem_mb(spec), spec.num_nodes or 1),
        },
        "user": job.user,
        "wckey": {"wckey": spec.wckey, "flags": []},
        "working_directory": spec.work_dir,
    }


def slurmdb_job_filter(query: Mapping[str, str]) -> Any:
    """A predicate over JobInfo for the ``slurmdb/v0.0.38/jobs`` query parameters Spur supports:
    account, partition, state, job_name, qos, group, wckey, users/user (comma-separated lists).
    Unknown parameters are ignored, as slurmrestd ignores empty filters."""

    def wanted(name: str) -> set[str] | None:
        text = query.get(name)
        if not text:
            return None
        return {v.strip() for v in text.split(",") if v.strip()}

    accounts, parts, states = wanted("account"), wanted("partition"), wanted("state")
    names, qos, groups, wckeys = wanted("job_name"), wanted("qos"), wanted("group"), wanted("wckey")
    users = wanted("users") or wanted("user")
    upper_states = {s.upper() for s in states} if states else None

    def keep(job: pb.JobInfo) -> bool:
        checks = (
            (accounts, job.spec.account),
            (parts, job.partition),
            (names, job.spec.name),
            (qos, job.spec.qos or "normal"),
            (groups, job.group),
            (wckeys, job.spec.wckey),
            (users, job.user),
        )
        if any(allowed is not None and value not in allowed for allowed, value in checks):
            return False
        return upper_states is None or job.state in upper_states

    return keep


STANDARD_TRES = (
    {"type": "cpu", "name": "", "id": 1, "count": 0},
    {"type": "mem", "name": "", "id": 2, "count": 0},
    {"type": "energy", "name": "", "id": 3, "count": 0},
    {"type": "node", "name": "", "id": 4, "count": 0},
    {"type": "billing", "name": "", "id": 5, "count": 0},
    {"type": "fs", "name": "disk", "id": 6, "count": 0},
    {"type": "vmem", "name": "", "id": 7, "count": 0},
    {"type": "pages", "name": "", "id": 8, "count": 0},
    {"type": "gres", "name": "gpu", "id": 1001, "count": 0},
)
