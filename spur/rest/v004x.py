"""slurmrestd 24.11's data parsers v0.0.40, v0.0.41 and v0.0.42 (pure mapping, no I/O).

One mapping layer for the three versions: the answers are built once here with slurmrestd 24.11's
field names and natural values, and :mod:`spur.rest.shape` renders them per version from that
version's own document (number objects, flag and state arrays, fields a version lacks left out).
The versions differ only where their documents differ, and that is read from the documents:
which operations exist (``job/allocate`` from v0.0.41), the layout of ``job_resources``, the
fields each schema declares. Requests are normalised to the v0.0.38 request form and validated by
:mod:`spur.rest.mapping`, so every request rule is written once.
"""

from __future__ import annotations

import copy
import signal as _signal
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

import orjson

from spur.core.output_path import DEFAULT_OUTPUT, expand_output_pattern
from spur.rest import mapping
from spur.rest.errors import (
    ERROR_TEXT,
    ESLURM_DATA_CONV_FAILED,
    ESLURM_REST_INVALID_JOBS_DESC,
    ESLURM_REST_INVALID_QUERY,
    SLURM_ERROR,
    RestError,
)
from spur.rest.openapi import SENT_AS_NULL, document
from spur.rest.shape import INF, SchemaShapers, Shaper
from spur.rpc.proto import spur_pb2 as pb

SLURM_VERSION = {"major": "24", "micro": "5", "minor": "11"}
SLURM_RELEASE = "24.11.5"


class Dialect:
    """One v0.0.4x version: its document, meta, bodies and response shapers."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.doc = document(version)
        self.shapers = SchemaShapers(self.doc, SENT_AS_NULL.get(version, ()))
        self._responses: dict[tuple[str, str], Shaper] = {}

    def meta(self, db: bool, cluster: str, user: str = "", group: str = "") -> dict[str, Any]:
        kind = "slurmdbd" if db else "slurmctld"
        return {
            "plugin": {
                "type": f"openapi/{kind}",
                "name": f"Slurm OpenAPI {kind}",
                "data_parser": f"data_parser/{self.version}",
                "accounting_storage": "accounting_storage/slurmdbd",
            },
            "client": {"source": "", "user": user, "group": group},
            "command": [],
            "slurm": {"version": dict(SLURM_VERSION), "release": SLURM_RELEASE, "cluster": cluster},
        }

    def has(self, path: str, method: str) -> bool:
        item = self.doc["paths"].get(path)
        return item is not None and method in item

    def response_shaper(self, path: str, method: str) -> Shaper:
        """The shaper of ``method path``'s 200 answer (the ``default`` one when 200 is not declared)."""
        key = (path, method)
        found = self._responses.get(key)
        if found is None:
            responses = self.doc["paths"][path][method]["responses"]
            entry = responses.get("200") or responses["default"]
            schema = entry["content"]["application/json"]["schema"]
            found = self._responses[key] = self.shapers.for_schema(schema)
        return found

    def job_info_shaper(self, keys: Collection[str] | None = None) -> Shaper:
        """The shaper of one ``jobs[]`` item of ``GET jobs``: compiled from the same schema, owner
        and path as the whole answer's shaper compiles it, so it renders an item identically (and
        the whole answer's shaper passes an already rendered item through). ``keys``: only for
        items holding just those keys (:meth:`SchemaShapers.for_keys`)."""
        responses = self.doc["paths"][f"/slurm/{self.version}/jobs/"]["get"]["responses"]
        owner = responses["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        jobs = self.doc["components"]["schemas"][owner]["properties"]["jobs"]
        path = "jobs"
        ref = jobs.get("$ref")
        if isinstance(ref, str):  # jobs is a named list schema: its items are compiled under it
            owner, path = ref.rsplit("/", 1)[1], ""
            jobs = self.doc["components"]["schemas"][owner]
        if keys is not None:
            return self.shapers.for_keys(jobs["items"], keys, owner, path)
        return self.shapers.for_schema(jobs["items"], owner, path)

    def job_renderer(self, layout: str) -> Callable[[pb.JobInfo, str], bytes]:
        """``(job, cluster) -> the job's JSON`` in this version's ``GET jobs`` answer (pure): the
        shaped ``job_info`` (its fields' values are those the whole answer's shaper gives), with
        the fields whose value is the same for every job (:func:`fixed_job_fields`, about half of
        them) shaped and serialised once and placed last."""
        shape = self.job_info_shaper()
        fixed = orjson.dumps(shape(fixed_job_fields()))
        if fixed == b"{}":  # pragma: no cover - every 24.11 document declares some of them
            return lambda job, cluster: orjson.dumps(shape(job_info(job, cluster, layout)))
        tail = b"," + fixed[1:]
        shape_rest = self.job_info_shaper(VARIABLE_KEYS)  # probes only the keys job_info then holds

        def render(job: pb.JobInfo, cluster: str) -> bytes:
            return orjson.dumps(shape_rest(job_info(job, cluster, layout, fixed=False)))[:-1] + tail

        return render

    def _response_schema(self, path: str, method: str) -> dict[str, Any]:
        responses = self.doc["paths"][path][method]["responses"]
        entry = responses.get("200") or responses["default"]
        return _resolve_all(self.doc, entry["content"]["application/json"]["schema"], depth=1)

    def response_fields(self, path: str, method: str) -> list[str]:
        """The top-level property names of ``method path``'s 200 answer."""
        return list(self._response_schema(path, method).get("properties", {}))

    def required_fields(self, path: str, method: str) -> list[str]:
        """The top-level properties ``method path``'s answer requires (an error answer too)."""
        return list(self._response_schema(path, method).get("required") or ())

    def job_resources_layout(self) -> str:
        """``"nodes"`` (v0.0.42: ``nodes.allocation``) or ``"allocated_nodes"`` (v0.0.40/41)."""
        path = f"/slurm/{self.version}/jobs/"
        schema = self.doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        text = repr(_resolve_all(self.doc, schema, depth=6))
        return "allocated_nodes" if "'allocated_nodes'" in text else "nodes"


def _resolve_all(doc: dict[str, Any], node: Any, depth: int) -> Any:
    if depth <= 0:
        return node
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            return _resolve_all(doc, doc["components"]["schemas"][ref.rsplit("/", 1)[1]], depth - 1)
        return {k: _resolve_all(doc, v, depth) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve_all(doc, v, depth) for v in node]
    return node


def error(number: int, description: str = "", source: str = "", text: str | None = None) -> dict[str, Any]:
    return {
        "description": description,
        "error_number": number,
        "error": text if text is not None else ERROR_TEXT.get(number, ERROR_TEXT[SLURM_ERROR]),
        "source": source,
    }


# ---------------------------------------------------------------------------- jobs


def _time(value: float) -> int:
    return int(value) if value and value > 0 else 0


def exit_code(state: str, code: int, sig: int) -> dict[str, Any]:
    """``process_exit_code_verbose``."""
    if state in ("PENDING", "RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING"):
        return {"status": ["PENDING"], "return_code": None, "signal": {"id": None, "name": ""}}
    if sig:
        try:
            name = _signal.Signals(sig).name.removeprefix("SIG")
        except ValueError:
            name = str(sig)
        return {"status": ["SIGNALED"], "return_code": None, "signal": {"id": sig, "name": name}}
    return {
        "status": ["SUCCESS" if code == 0 else "ERROR"],
        "return_code": code,
        "signal": {"id": None, "name": ""},
    }


def _job_resources(alloc: list[pb.NodeAllocation], layout: str, ended: bool) -> dict[str, Any] | None:
    """v0.0.40's ``job_resources`` (``{}`` before the job has an allocation, as 24.11 sends it;
    ``allocated_cpus`` and ``cpus_used`` are 0, as 24.11's v0.0.40 parser sends them, running or
    not; memory no longer in use once the job ended: 0); None (left out) for the v0.0.41/42
    layout, whose schema requires slash-named keys (``nodes/count``) that the real server never
    sends and no client can parse."""
    if layout != "allocated_nodes":
        return None
    if not alloc:
        return {}
    nodes = mapping._hostlist(a.node for a in alloc)
    cpus = sum(a.cpus for a in alloc)
    return {
        "nodes": nodes,
        "allocated_cores": cpus,
        "allocated_cpus": 0,
        "allocated_hosts": len(alloc),
        "allocated_nodes": [
            {"nodename": a.node, "cpus_used": 0, "memory_used": 0 if ended else a.mem_mb,
             "memory_allocated": 0 if ended else a.mem_mb,
             "sockets": {"0": {"cores": {str(c): "allocated" for c in range(a.cpus)}}}}
            for a in alloc
        ],
    }  # fmt: skip


# job_info fields whose value is the same for every job Spur runs
_JOB_CONSTANTS: dict[str, Any] = {
    "container_id": "", "core_spec": 0, "minimum_switches": 0,
    "cores_per_socket": None, "cron": "", "extra": "", "failed_node": "", "job_size_str": [],
    "mail_type": [], "network": "", "tasks_per_core": INF, "tasks_per_tres": 0, "tasks_per_socket": INF,
    "power": {"flags": []}, "preemptable_time": 0, "priority_by_partition": [], "profile": ["NOT_SET"],
    "required_switches": 0, "scheduled_nodes": "", "selinux_context": "", "sockets_per_node": None, "thread_spec": 32766,
    "threads_per_core": None, "maximum_switch_wait_time": 0,
}  # fmt: skip


def fixed_job_fields() -> dict[str, Any]:
    """The ``job_info`` fields whose value is the same for every job Spur runs (natural values): v0.0.38's
    fixed fields less those :func:`job_info` writes per job (such as a pending job's ``max_nodes``)."""
    d = {k: v for k, v in mapping.JOB_FIXED.items() if k not in _RESHAPED and k not in VARIABLE_KEYS}
    d.update(_JOB_CONSTANTS)
    return d


def job_info(job: pb.JobInfo, cluster: str, layout: str, fixed: bool = True) -> dict[str, Any]:
    """One ``job_info`` (slurmrestd 24.11 names; natural values, shaped per version); without the
    :func:`fixed_job_fields` when ``fixed`` is false."""
    # the v0.0.38 values: every value rule lives there
    if fixed:
        d = mapping.job_to_slurm(job, cluster)
        for key in _RESHAPED:
            del d[key]
        d.update(_JOB_CONSTANTS)
    else:
        d = mapping.job_to_slurm(job, cluster, _VARIABLE_TEMPLATE)
        for key in _WRITTEN_BEYOND:
            del d[key]
    spec = job.spec
    limit = job.time_limit_secs
    state = job.state
    exclusive = spec.exclusive
    d["array_task_id"] = job.array_task_id if job.HasField("array_task_id") else None
    d["cpus_per_task"] = spec.cpus_per_task or 1
    # slurmctld's exit code of a job that has not ended is 0 (SUCCESS), not "pending"
    ended = state not in _NOT_ENDED
    d["derived_exit_code"] = (_DERIVED.get(state) or exit_code(state, 0, 0)) if ended else _NOT_ENDED_EXIT
    d["exit_code"] = exit_code(state, job.exit_code, job.signal) if ended else _NOT_ENDED_EXIT
    d["billable_tres"] = d["billable_tres"] if state != "PENDING" else None  # computed when it starts
    d["max_nodes"] = max(spec.num_nodes, 1) if state == "PENDING" else 0  # slurmctld clears it at start
    d["standard_input"] = spec.stdin_path or "/dev/null"
    d["flags"] = _job_flags(spec)
    # the submitting host; a REST submission names none, and slurmctld (as scontrol's AllocNode) says localhost
    d["allocating_node"] = job.submit_host or "localhost"
    d["job_resources"] = _job_resources(list(job.allocation), layout, ended)
    d["job_state"] = [state]
    d["mail_user"] = job.user
    d["nice"] = spec.nice
    d["memory_per_cpu"] = spec.mem_per_cpu_mb or None
    d["memory_per_node"] = spec.mem_per_node_mb if not spec.mem_per_cpu_mb else None
    d["hold"] = spec.hold and state == "PENDING"
    d["shared"] = ["exclusive"] if exclusive else []
    d["exclusive"] = ["true"] if exclusive else []
    d["oversubscribe"] = not exclusive
    d["time_limit"] = INF if limit < 0 else -(-limit // 60)
    return d


def _job_flags(spec: pb.JobSpec) -> list[str]:
    """slurmctld 24.11's job flags from what the submission left to the defaults."""
    flags = []
    if not spec.account:
        flags.append("USING_DEFAULT_ACCOUNT")
    if not spec.partition:
        flags.append("USING_DEFAULT_PARTITION")
    if not spec.qos:
        flags.append("USING_DEFAULT_QOS")
    if not spec.wckey:
        flags.append("USING_DEFAULT_WCKEY")
    if not spec.partition:
        flags.append("PARTITION_ASSIGNED")
    return flags


# v0.0.38 values whose 24.11 form differs (rebuilt in job_info)
_RESHAPED = frozenset({"job_resources", "exit_code", "derived_exit_code", "shared", "profile"})
# job_info(fixed=False) starts from v0.0.38's fields less the fixed and the reshaped ones, and drops
# what job_to_slurm writes beyond them (the same keys for every job)
_VARIABLE_TEMPLATE = mapping.job_template_without({*mapping.JOB_FIXED, *_JOB_CONSTANTS, *_RESHAPED})
_WRITTEN_BEYOND = tuple(k for k in mapping.job_to_slurm(pb.JobInfo(), "", _VARIABLE_TEMPLATE) if k not in _VARIABLE_TEMPLATE)


_DERIVED = {s: exit_code(s, 0, 0) for s in ("PENDING", "RUNNING", "COMPLETED")}
_NOT_ENDED = frozenset({"PENDING", "RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING"})
_NOT_ENDED_EXIT = {"status": ["SUCCESS"], "return_code": 0, "signal": {"id": None, "name": ""}}

# the keys of job_info(fixed=False): the same for every job
VARIABLE_KEYS = frozenset(job_info(pb.JobInfo(), "", "nodes", fixed=False))


def job_state_entry(job: pb.JobInfo) -> dict[str, Any]:
    """One ``jobs/state`` entry: the job's ``state`` array, as slurmrestd 24.11 sends it, and its
    ``job_id`` as the documents declare it (a ``job_info`` item: an integer; 24.11 sends a string)."""
    return {"job_id": job.job_id, "state": [job.state]}


# ---------------------------------------------------------------------------- requests


def _number(value: Any, where: str, source: str) -> Any:
    """A number object (``{"set", "infinite", "number"}``) or plain number -> int, INF or None."""
    if isinstance(value, dict):
        if value.get("infinite") is True:
            return INF
        if value.get("set") is False:
            return None
        number = value.get("number")
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise RestError(400, ESLURM_DATA_CONV_FAILED, f"{where}: expected a number", source)
        return int(number)
    return value


_NUMBER_FIELDS = (
    "time_limit", "time_minimum", "priority", "nice", "tasks", "cpus_per_task", "tasks_per_node",
    "memory_per_node", "memory_per_cpu", "begin_time",
)  # fmt: skip


def job_desc_to_v0038(desc: Mapping[str, Any], where: str, source: str) -> dict[str, Any]:
    """A 24.11 ``job_desc_msg`` -> the v0.0.38 job description :mod:`spur.rest.mapping` validates:
    number objects become numbers (infinite ``time_limit`` -> 0, Slurm's "unlimited" there),
    ``minimum_nodes``/``maximum_nodes`` become ``nodes``, ``argv`` and ``environment`` pass as they
    are, ``flags`` are accepted and ignored, ``shared``/``exclusive`` arrays become ``exclusive``."""
    if not isinstance(desc, Mapping):
        raise RestError(400, ESLURM_REST_INVALID_JOBS_DESC, f"{where} must be an object", source)
    out = {k: v for k, v in desc.items() if k not in ("script", "minimum_nodes", "maximum_nodes", "shared")}
    for key in _NUMBER_FIELDS:
        if key in out:
            value = _number(out[key], f"{where}.{key}", source)
            if value is INF:
                value = 0 if key == "time_limit" else None
            out[key] = value
    nodes = desc.get("minimum_nodes")
    if nodes is not None and "nodes" not in desc:
        out["nodes"] = _number(nodes, f"{where}.minimum_nodes", source)
    shared = desc.get("shared")
    if isinstance(shared, list) and "exclusive" not in desc:
        out["exclusive"] = "false" if shared else None
    exclusive = out.get("exclusive")
    if isinstance(exclusive, list):
        out["exclusive"] = "true" if exclusive else None
    hold = out.get("hold")
    if hold is not None and not isinstance(hold, bool):
        raise RestError(400, ESLURM_DATA_CONV_FAILED, f"{where}.hold: expected true or false", source)
    if isinstance(out.get("environment"), list) and not out["environment"]:
        out["environment"] = {}
    return out


def submit_body_to_spec(body: Mapping[str, Any], default_cwd: str, source: str) -> pb.JobSpec:
    """A 24.11 ``job_submit_req`` (``script`` at the top or in ``job``) -> JobSpec; a missing
    script is 24.11's 422/9000."""
    job = body.get("job")
    if body.get("jobs") not in (None, []):
        return mapping.submit_to_spec({"script": "#!", "jobs": body["jobs"]}, default_cwd, source)
    if job is None:
        job = {}
    if not isinstance(job, Mapping):
        raise RestError(400, ESLURM_REST_INVALID_JOBS_DESC, "job must be an object", source)
    script = job.get("script") if job.get("script") is not None else body.get("script")
    if script in (None, ""):
        raise RestError(422, ESLURM_REST_INVALID_QUERY, "script must be set in job.script", source)
    desc = job_desc_to_v0038(job, "job", source)
    desc.setdefault("environment", {})
    return mapping.submit_to_spec({"script": script, "job": desc}, default_cwd, source)


def plain_numbers(value: Any) -> Any:
    """A request body with every number object (``{"set", "infinite", "number"}``) replaced by its
    plain number (None when unset or infinite, v0.0.38's "no limit"), for the v0.0.38 parsers."""
    if isinstance(value, dict):
        if value and set(value) <= {"set", "infinite", "number"} and "number" in value:
            if value.get("infinite") is True or value.get("set") is False:
                return None
            return value["number"]
        return {k: plain_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_numbers(v) for v in value]
    return value


def add_condition(body: Mapping[str, Any], who: str, source: str) -> tuple[list[str], list[str], list[str], dict]:
    """``accounts_association``/``users_association``: (names, accounts, clusters, the entity's
    own fields) from ``association_condition`` and ``account``/``user``."""
    cond = body.get("association_condition")
    if not isinstance(cond, Mapping):
        raise RestError(400, ESLURM_REST_INVALID_QUERY, "association_condition must be an object", source)

    def names(key: str, required: bool) -> list[str]:
        value = cond.get(key)
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if value is None:
            value = []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise RestError(400, ESLURM_DATA_CONV_FAILED, f"association_condition.{key}: a list of names", source)
        if required and not value:
            raise RestError(400, ESLURM_REST_INVALID_QUERY, f"association_condition.{key} must be set", source)
        return value

    own = body.get(who.rstrip("s")) or {}
    if not isinstance(own, Mapping):
        raise RestError(400, ESLURM_DATA_CONV_FAILED, f"{who.rstrip('s')}: expected an object", source)
    return names(who, True), names("accounts", who == "users"), names("clusters", False), dict(own)


def update_body(body: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A 24.11 job update (a ``job_desc_msg``) -> the v0.0.38 update body."""
    return job_desc_to_v0038(body, "job", source)


# ---------------------------------------------------------------------------- nodes, partitions


_NODE_STATES = {
    "idle": ["IDLE"],
    "mixed": ["MIXED"],
    "allocated": ["ALLOCATED"],
    "down": ["DOWN"],
    "drained": ["IDLE", "DRAIN"],
    "draining": ["MIXED", "DRAIN"],
    "unknown": ["UNKNOWN"],
}


def node(n: pb.NodeInfo, cluster: str) -> dict[str, Any]:
    old = mapping.node_to_slurm(n)
    d = {k: v for k, v in old.items() if k not in ("state", "state_flags", "next_state_after_reboot_flags",
                                                  "owner", "reason_set_by_user")}  # fmt: skip
    d.update(
        cluster_name=cluster,
        specialized_cores=0,
        free_mem=old["free_memory"],
        effective_cpus=n.cpus,
        specialized_cpus="",
        energy={"average_watts": 0, "base_consumed_energy": 0, "consumed_energy": 0, "current_watts": 0,
                "previous_consumed_energy": 0, "last_collected": 0},  # no energy accounting: zeros
        external_sensors={},
        extra="",
        power={},
        gpu_spec="",
        instance_id="",
        instance_type="",
        last_busy=0,
        specialized_memory=0,
        next_state_after_reboot=["INVALID"],
        state=_NODE_STATES.get(n.state, [(n.state or "unknown").upper()]),
        owner="",
        res_cores_per_gpu=0,
        comment="",
        reason_set_by_user="",
        resume_after=0,
        reservation="",
        alloc_idle_cpus=old["idle_cpus"],
        features=list(n.features),  # arrays in 24.11 (v0.0.38: a comma-separated string)
        # slurmctld names memory in use only when there is some
        tres_used=f"cpu={n.alloc_cpus}" + (f",mem={n.alloc_mem_mb}M" if n.alloc_mem_mb else "") if n.alloc_cpus else "",
        active_features=list(n.features),
        version=n.version,
    )
    return d


def partition(
    part: pb.PartitionInfo, node_cpus: Mapping[str, int], cluster: str, node_memory: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """One ``partition_info``. A partition without a DefaultTime has ``defaults.time`` unset (the
    maximum applies); ``tres.configured`` sums its nodes' CPUs and memory (``node_memory``, MiB), as
    slurmctld's TRES string (billing = CPUs)."""
    members = list(part.nodes)
    default_time = None if part.default_time_secs < 0 else mapping._minutes(part.default_time_secs)
    max_time = INF if part.max_time_secs < 0 else mapping._minutes(part.max_time_secs)
    flags = ["DEFAULT"] if part.is_default else []
    total_cpus = sum(node_cpus.get(x, 0) for x in members)
    memory = sum((node_memory or {}).get(x, 0) for x in members)
    configured = f"cpu={total_cpus},mem={memory}M,node={len(members)},billing={total_cpus}" if members else ""
    return {
        "nodes": {"allowed_allocation": "", "configured": mapping._hostlist(members), "total": len(members)},
        "accounts": {"allowed": "", "deny": ""},
        "groups": {"allowed": ""},
        "qos": {"allowed": "", "deny": "", "assigned": ""},
        "alternate": "",
        "tres": {"billing_weights": "", "configured": configured},
        "cluster": cluster,
        "select_type": [],
        "cpus": {"task_binding": 0, "total": total_cpus},
        "defaults": {
            "memory_per_cpu": 0,
            "partition_memory_per_cpu": None,
            "partition_memory_per_node": 0,  # slurmctld's DefMemPerNode when unset: 0, set
            "time": default_time,
            "job": "",
        },
        "grace_time": 0,
        "maximums": {
            "cpus_per_node": INF,
            "cpus_per_socket": INF,
            "memory_per_cpu": 0,
            "partition_memory_per_cpu": None,
            "partition_memory_per_node": 0,
            "nodes": INF,
            "shares": 1,
            "oversubscribe": {"jobs": 1, "flags": []},
            "time": max_time,
            "over_time_limit": None,
        },
        "minimums": {"nodes": 0},
        "name": part.name,
        "node_sets": "",
        "priority": {"job_factor": 1, "tier": 1},
        "timeouts": {"resume": None, "suspend": None},
        "partition": {"state": [(part.state or "UP").upper()]},
        "suspend_time": None,
        "flags": flags,
    }


def pings(controllers: Iterable[pb.ControllerInfo]) -> list[dict[str, Any]]:
    out = []
    for entry in mapping.pings(controllers):
        up = entry["ping"] == "UP"
        out.append(
            {
                "hostname": entry["hostname"],
                "pinged": entry["ping"],
                "responding": up,
                "latency": 0,
                "mode": entry["mode"],
                "primary": entry["mode"] == "primary",
            }
        )
    return out


def diag(stats: Mapping[str, Any]) -> dict[str, Any]:
    d = dict(stats)
    d.update(schedule_cycle_sum=d.get("schedule_cycle_total", 0), bf_cycle_sum=0, rpcs_by_message_type=[],
             rpcs_by_user=[], pending_rpcs=[], pending_rpcs_by_hostlist=[])  # fmt: skip
    # slurmctld's scheduler counters Spur's scheduler has no notion of: 0, as an idle slurmctld
    for key in ("schedule_cycle_depth", "bf_last_depth", "bf_last_depth_try", "bf_depth_sum", "bf_depth_try_sum",
                "bf_queue_len_sum", "bf_table_size_sum"):  # fmt: skip
        d.setdefault(key, 0)
    d.setdefault("schedule_exit", {"end_job_queue": d.get("schedule_cycle_total", 0), "default_queue_depth": 0,
                                   "max_job_start": 0, "max_rpc_cnt": 0, "max_sched_time": 0, "licenses": 0})  # fmt: skip
    d.setdefault("bf_exit", {"end_job_queue": 0, "bf_max_job_start": 0, "bf_max_job_test": 0, "bf_max_time": 0,
                             "bf_node_space_size": 0, "state_changed": 0})  # fmt: skip
    return d


# ---------------------------------------------------------------------------- slurmdb jobs


def db_job(job: pb.JobInfo, cluster: str, now: float) -> dict[str, Any]:
    """One slurmdb ``job`` (24.11 names), from the v0.0.38 value rules."""
    old = mapping.job_to_slurmdb(job, cluster, now)
    d = dict(old)
    # slurmdbd records exit code 0 (SUCCESS) until the job ends, as slurmctld reports it
    ended = job.state not in _NOT_ENDED
    d["exit_code"] = exit_code(job.state, job.exit_code, job.signal) if ended else _NOT_ENDED_EXIT
    d["derived_exit_code"] = exit_code(job.state, 0, 0) if ended else _NOT_ENDED_EXIT
    d["state"] = {"current": [job.state], "reason": job.reason or "None"}
    # planned: how long it waited to start (set once it started, as slurmdbd records it)
    planned = max(0, int(job.start_time) - int(job.eligible_time or job.submit_time)) if job.start_time > 0 else None
    d["time"] = dict(old["time"], limit=INF if job.time_limit_secs < 0 else old["time"]["limit"],
                     planned=planned)  # fmt: skip
    d["flags"] = ["STARTED_ON_SCHEDULE", "START_RECEIVED"] if job.start_time > 0 else []
    d["association"] = dict(old.get("association") or {}, partition="", id=0)  # a job's association: no partition
    d["allocation_nodes"] = len(job.allocation)
    d["array"] = dict(old["array"], task_id=old["array"]["task_id"])
    d["het"] = {"job_id": 0, "job_offset": None}
    d["reservation"] = {"id": 0, "name": ""}
    mem_cpu = job.spec.mem_per_cpu_mb
    d["required"] = {"CPUs": old["required"]["CPUs"], "memory_per_cpu": mem_cpu or None,
                     "memory_per_node": None if mem_cpu else old["required"]["memory"]}  # fmt: skip
    d["tres"] = {"allocated": old["tres"]["allocated"], "requested": old["tres"]["requested"]}
    d["wckey"] = {"wckey": job.spec.wckey, "flags": []}
    d["submit_line"] = job.spec.submit_line
    d["extra"] = ""
    d["failed_node"] = ""
    d["hold"] = False
    d["licenses"] = ""
    d["kill_request_user"] = ""
    d["restart_cnt"] = job.restarts
    d["used_gres"] = ""
    d["block"] = ""
    d["script"] = ""  # slurmdbd keeps a script only with AccountingStoreFlags=job_script
    d["qosreq"] = job.spec.qos
    spec = job.spec
    # as slurmdbd records them: a batch job's default output in its working directory, expanded too
    stdout = spec.stdout_pattern or (f"{spec.work_dir.rstrip('/')}/{DEFAULT_OUTPUT}" if not spec.interactive else "")
    d["stdin"], d["stdout"], d["stderr"] = spec.stdin_path, stdout, spec.stderr_pattern

    def expanded(pattern: str) -> str:
        if not pattern:
            return ""
        has_task = job.HasField("array_task_id")
        return expand_output_pattern(
            pattern, job_id=job.job_id, job_name=spec.name, user=job.user, node=job.nodelist.split(",")[0],
            array_job_id=job.array_job_id if has_task else None, array_task_id=job.array_task_id if has_task else None,
        )  # fmt: skip

    d["stdin_expanded"], d["stdout_expanded"], d["stderr_expanded"] = map(expanded, (spec.stdin_path, stdout, spec.stderr_pattern))
    steps = []
    for step, s in zip(job.steps, old["steps"], strict=True):
        s = dict(s)
        s["exit_code"] = exit_code(step.state, step.exit_code, step.signal)
        s["state"] = [step.state]
        s["step"] = {"id": s["step"]["id"], "name": s["step"]["name"]}
        s["nodes"] = {"count": s["nodes"]["count"], "range": s["nodes"]["range"], "list": []}
        s["kill_request_user"] = ""
        s["pid"] = ""
        s["CPU"] = {"requested_frequency": {"min": None, "max": None}, "governor": ""}
        s["task"] = {"distribution": "Block"}
        steps.append(s)
    batch = _batch_step(job, now)
    d["steps"] = ([batch] if batch is not None else []) + steps
    return d


def _batch_step(job: pb.JobInfo, now: float) -> dict[str, Any] | None:
    """The ``batch`` step slurmdbd records for a batch job once it started (sacct's ``.batch`` line):
    its shell on the first node, one task; a shell ended by a signal is a CANCELLED step."""
    if job.spec.interactive or job.start_time <= 0:
        return None
    first = job.allocation[0] if job.allocation else None
    node = first.node if first else job.nodelist.split(",")[0]
    start, end = int(job.start_time), int(job.end_time) if job.end_time > 0 else 0
    state = "CANCELLED" if job.state == "CANCELLED" or (job.signal and job.state == "FAILED") else job.state
    code = exit_code(state, job.exit_code, job.signal) if state not in _NOT_ENDED else _NOT_ENDED_EXIT
    return {
        "time": {"elapsed": max((end or int(now)) - start, 0), "end": end, "start": start, "suspended": 0,
                 "system": {"seconds": 0, "microseconds": 0}, "total": {"seconds": 0, "microseconds": 0},
                 "user": {"seconds": 0, "microseconds": 0}},
        "exit_code": code,
        "nodes": {"count": 1, "range": node, "list": [node]},
        "tasks": {"count": 1},
        "pid": "",
        "CPU": {"requested_frequency": {"min": 0, "max": 0}, "governor": "0"},
        "kill_request_user": "",
        "state": [state],
        "statistics": {"CPU": {"actual_frequency": 0}, "energy": {"consumed": 0}},
        "step": {"id": f"{job.job_id}.batch", "name": "batch"},
        "task": {"distribution": "Unknown"},
        "tres": {"requested": {"max": [], "min": [], "average": [], "total": []},
                 "consumed": {"max": [], "min": [], "average": [], "total": []},
                 "allocated": [{"type": "cpu", "name": "", "id": 1, "count": first.cpus if first else 0},
                               {"type": "mem", "name": "", "id": 2, "count": first.mem_mb if first else 0},
                               {"type": "node", "name": "", "id": 4, "count": 1}]},
    }  # fmt: skip


# ---------------------------------------------------------------------------- slurmdb entities


def _unlimited(node: dict[str, Any], *path: str) -> None:
    """``node[path...]`` None (no limit) -> INF: slurmdbd 24.11 sends an unset limit as infinite."""
    *parents, last = path
    for key in parents:
        node = node.setdefault(key, {})
    if node.get(last) is None:
        node[last] = INF


def _association(a: dict[str, Any], parents: Mapping[str, str], version: str) -> dict[str, Any]:
    d = copy.deepcopy(a)
    for path in (
        ("max", "jobs", "per", "count"), ("max", "jobs", "per", "accruing"), ("max", "jobs", "per", "submitted"),
        ("max", "jobs", "per", "wall_clock"), ("max", "jobs", "active"), ("max", "jobs", "accruing"),
        ("max", "jobs", "total"), ("max", "per", "account", "wall_clock"), ("min", "priority_threshold"),
        ("priority",),
    ):  # fmt: skip
        _unlimited(d, *path)
    d["default"] = {"qos": (d.get("default") or {}).get("qos") or ""}
    # slurmdbd marks the own association of every account but root (which the cluster's
    # registration made) as a default one
    d["is_default"] = bool(d.get("is_default")) or (not d.get("user") and d["account"] != "root")
    d.setdefault("accounting", [])
    d.setdefault("comment", "")
    d["parent_account"] = d.get("parent_account") or ""
    d["partition"] = d.get("partition") or ""
    d["user"] = d.get("user") or ""
    # Spur numbers no associations: 0 (v0.0.40 declares the id as the association's short form)
    d["id"] = _short_association(d) if version == "v0.0.40" else 0
    d["lineage"] = _lineage(d["account"], d["user"], parents)
    d.pop("usage", None)
    return d


def _lineage(account: str, user: str, parents: Mapping[str, str]) -> str:
    """slurmdbd's lineage: the accounts below ``root`` down to ``account``, then ``0-<user>``
    (``/``, ``/physics/``, ``/physics/0-alice/``, ``/0-root/``)."""
    chain: list[str] = []
    seen: set[str] = set()
    while account and account != "root" and account not in seen:
        seen.add(account)
        chain.append(account)
        account = parents.get(account, "")
    parts = [*reversed(chain), *([f"0-{user}"] if user else [])]
    return "/" + "".join(f"{p}/" for p in parts)


def _short_association(a: dict[str, Any]) -> dict[str, Any]:
    return {"account": a.get("account") or "", "cluster": a.get("cluster") or "",
            "partition": a.get("partition") or "", "user": a.get("user") or "", "id": 0}  # fmt: skip


def _qos(q: dict[str, Any]) -> dict[str, Any]:
    d = copy.deepcopy(q)
    limits = d.setdefault("limits", {})
    for path in (
        ("factor",), ("max", "wall_clock", "per", "qos"), ("max", "wall_clock", "per", "job"),
        ("max", "jobs", "active_jobs", "per", "account"), ("max", "jobs", "active_jobs", "per", "user"),
        ("max", "jobs", "per", "account"), ("max", "jobs", "per", "user"), ("max", "jobs", "count"),
        ("max", "accruing", "per", "account"), ("max", "accruing", "per", "user"),
        ("max", "active_jobs", "accruing"), ("max", "active_jobs", "count"), ("min", "priority_threshold"),
    ):  # fmt: skip
        _unlimited(limits, *path)
    limits.setdefault("grace_time", 0)
    tres = limits["max"].setdefault("tres", {})
    tres.setdefault("total", [])
    tres.setdefault("minutes", {}).setdefault("total", [])
    preempt = d.setdefault("preempt", {})
    _unlimited(preempt, "exempt_time")
    # 24.11 names PreemptMode=OFF (and Spur's "cluster": the cluster's, which is off) DISABLED
    modes = [m.upper() for m in preempt.get("mode") or () if m.upper() not in ("OFF", "CLUSTER")]
    preempt["mode"] = modes or ["DISABLED"]
    _unlimited(d, "usage_threshold")
    d["id"] = int(d["id"]) if str(d.get("id", "")).isdigit() else 0
    return d


def _user(u: dict[str, Any], with_assocs: bool) -> dict[str, Any]:
    d = dict(u)
    d["flags"] = list(d.get("flags") or ["NONE"])
    d.setdefault("old_name", "")
    d.setdefault("wckeys", [])
    d["associations"] = [_short_association(a) for a in d.get("associations") or []] if with_assocs else []
    return d


def _account(a: dict[str, Any], with_assocs: bool) -> dict[str, Any]:
    assocs = [_short_association(x) for x in a.get("associations") or []] if with_assocs else []
    return dict(a, associations=assocs)


def _cluster(c: dict[str, Any], nodes: Iterable[pb.NodeInfo] | None) -> dict[str, Any]:
    root = dict((c.get("associations") or {}).get("root") or {})
    # 24.11's protocol version (SLURM_24_11_PROTOCOL_VERSION), as the release meta names
    out = dict(c, associations={"root": dict(_short_association(root), id=1)}, rpc_version=10752)
    if nodes is not None:
        out.update(cluster_nodes_and_tres(list(nodes)))
    return out


def cluster_nodes_and_tres(nodes: list[pb.NodeInfo]) -> dict[str, Any]:
    """A cluster record's ``nodes`` (their hostlist) and ``tres`` (what its nodes offer, in
    slurmdbd's standard TRES; billing = CPUs; gres/gpu only when a node has GPUs)."""
    cpus = sum(n.cpus for n in nodes)
    gpus = sum(len(n.gpus) for n in nodes)
    counts: dict[object, int] = {1: cpus, 2: sum(n.memory_mb for n in nodes), 4: len(nodes), 5: cpus, 1001: gpus}
    tres = [dict(t, count=counts.get(t["id"], 0)) for t in mapping.STANDARD_TRES if t["id"] != 1001 or gpus]
    return {"nodes": mapping._hostlist(n.name for n in nodes), "tres": tres}


def _flag(query: Mapping[str, str], *names: str) -> bool:
    """A boolean query flag (``?with_assocs``, ``?with_assocs=true``): set unless ``false``/``0``/``no``."""
    return any(n in query and str(query[n]).lower() not in ("false", "0", "no") for n in names)


def entities(
    key: str, items: list[dict[str, Any]], query: Mapping[str, str], version: str = "v0.0.42",
    nodes: Iterable[pb.NodeInfo] | None = None,
) -> list[dict[str, Any]]:
    """slurmdb entity lists (``accounts``, ``associations``, ``users``, ``qos``, ``clusters``) from
    their v0.0.38 JSON to slurmdbd 24.11's values: an unset limit is infinite, every declared
    string is sent (empty when unset), associations carry their lineage, and accounts and users
    list their associations only when ``query`` asks (``with_assocs``; ``WithAssociations`` for
    the accounts list), as slurmrestd 24.11 does; a cluster lists ``nodes`` and their TRES."""
    if key == "associations":
        parents = {a["account"]: a.get("parent_account") or "" for a in items if not a.get("user")}
        return [_association(a, parents, version) for a in items]
    with_assocs = _flag(query, "with_assocs", "WithAssociations")
    if key == "users":
        return [_user(u, with_assocs) for u in items]
    if key == "accounts":
        return [_account(a, with_assocs) for a in items]
    if key == "qos":
        return [_qos(q) for q in items]
    if key == "clusters":  # ``nodes``: this cluster's, for its record (the only one Spur keeps)
        return [_cluster(c, nodes) for c in items]
    return items
